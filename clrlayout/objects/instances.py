"""The layout of any object, row by row, with its values (JOL's model, as ``layout.py`` has it for strings).

``instance_layout`` turns a :class:`~clrlayout.types.layouts.TypeLayout` and the object's bytes into the
same :class:`~clrlayout.objects.layout.ObjectLayout` rows strings have: header, MethodTable, each field
(embedded structs followed by their own fields), the gaps between them, array lengths, bounds and first
elements, and the padding to the end; without the bytes, the rows of the type alone.  Each
field has a mark (``01``, ``02``, ...) that the hex dump repeats under its bytes.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from ..limits import REFERENCED_CHARS
from ..runtime.profiles import Profile
from ..types.layouts import TypeLayout
from .header import decode_header
from .layout import LayoutRow, ObjectLayout, quote

#: elements of an array shown one per row; the rest are one row
ARRAY_ROWS = 16

PRIMITIVES = {  # element type name -> (struct format, show)
    "System.Boolean": ("B", "bool"), "System.Char": ("H", "char"), "System.SByte": ("b", "int"),
    "System.Byte": ("B", "uint"), "System.Int16": ("h", "int"), "System.UInt16": ("H", "uint"),
    "System.Int32": ("i", "int"), "System.UInt32": ("I", "uint"), "System.Int64": ("q", "int"),
    "System.UInt64": ("Q", "uint"), "System.Single": ("f", "float"), "System.Double": ("d", "float"),
}
_FORMATS = {("int", 1): "b", ("int", 2): "h", ("int", 4): "i", ("int", 8): "q", ("uint", 1): "B", ("uint", 2): "H",
            ("uint", 4): "I", ("uint", 8): "Q", ("float", 4): "f", ("float", 8): "d", ("bool", 1): "B",
            ("char", 2): "H"}


@dataclass(frozen=True)
class Referent:
    """What a reference points at, for its value column."""

    type_name: str | None
    string: str | None = None
    #: how many of the string's characters the value column shows (None: all of them)
    limit: int | None = REFERENCED_CHARS


def primitive_value(show: str, data: bytes):
    """A primitive field's bytes as a number (a bool and a char as their integer too), or None when ``show`` and
    the size are no primitive's: the one decoding table, for the table's text and the model's values alike."""
    fmt = _FORMATS.get((show, len(data)))
    return None if fmt is None else struct.unpack("<" + fmt, data)[0]


def show_value(show: str, data: bytes | None, pointer_size: int, referent=None) -> str | None:
    """A field's bytes as the table shows them: integers in decimal, floats as repr, bool, char, pointers
    and references in hex (a reference with its object's type and a string's value)."""
    if data is None or not data:
        return None
    if show in ("reference", "pointer") or show == "hex" or len(data) > 8:
        value = int.from_bytes(data, "little")
        if show != "reference":
            return f"{value:#x}"
        if value == 0:
            return "null"
        text = f"{value:#x}"
        r = referent(value) if referent is not None else None
        if r is not None and r.type_name:
            text += f" ({r.type_name})"
        if r is not None and r.string is not None:
            s = r.string if r.limit is None or len(r.string) <= r.limit else r.string[:r.limit] + "\u2026"
            text += " " + quote(s)
        return text
    v = primitive_value(show, data)
    if v is None:
        return data.hex(" ")
    if show == "bool":
        return {0: "false", 1: "true"}.get(v, f"{v} (not 0 or 1)")
    if show == "char":
        return f"{quote(chr(v))[1:-1]!r} (U+{v:04X})" if not 0xD800 <= v <= 0xDFFF else f"U+{v:04X}"
    if show == "float":
        return repr(v)
    return str(v)


def _mark(n: int) -> str:
    return f"{n % 100:02d}"


def _field_rows(profile, fields, rows, start, data, at, counter, prefix, referent=None, end=None, path=()):
    """Rows for ``fields`` (offsets from ``start``) with gaps; values from ``data`` read at ``at``."""
    pos = None
    for f in fields:
        if pos is not None and f.offset > pos:
            rows.append(LayoutRow(start + pos, f.offset - pos, "", f"{prefix}(alignment/padding gap)", "gap"))
        desc = f"{prefix}{f.name}" + (f" (from {f.declaring_type})" if f.inherited and not prefix else "")
        raw = data[at + start + f.offset :][: f.size] if data is not None and at is not None else None
        if f.kind == "struct":
            note = "" if f.size_known else " (size: room to the next field; struct not in the dump's types)"
            rows.append(LayoutRow(start + f.offset, f.size, f.type, desc + note, "struct",
                                  None if raw is None or f.fields else (raw.hex(" ") if raw else None),
                                  path=path + (f.token,)))
            if f.fields:
                _field_rows(profile, f.fields, rows, start + f.offset, data, at, counter, prefix + "  .", referent,
                            f.size, path + (f.token,))
        else:
            counter[0] += 1
            rows.append(LayoutRow(start + f.offset, f.size, f.type, desc, "field",
                                  show_value(f.show, raw, profile.pointer_size, referent), _mark(counter[0]),
                                  path + (f.token,)))
        pos = f.end if pos is None else max(pos, f.end)
    if end is not None and pos is not None and end > pos:
        rows.append(LayoutRow(start + pos, end - pos, "", f"{prefix}(padding at the end of the struct)", "gap"))


def field_values(profile: Profile, fields, data: bytes, referent=None, start: int = 0, prefix: str = "") -> list:
    """(name, value) of each instance field of an object whose bytes from its MethodTable pointer on are ``data``,
    as ``object`` shows them (a reference with its object's type and a string's start); an embedded struct's fields
    by their dotted names (``When._dateData``), a struct whose fields are not known as its bytes in hex."""
    out = []
    for f in fields:
        raw = data[start + f.offset:][:f.size]
        if f.kind == "struct" and f.fields:
            out += field_values(profile, f.fields, data, referent, start + f.offset, f"{prefix}{f.name}.")
        elif f.kind == "struct":
            out.append((prefix + f.name, raw.hex(" ") if raw else None))
        else:
            out.append((prefix + f.name, show_value(f.show, raw, profile.pointer_size, referent)))
    return out


def instance_layout(profile: Profile, layout: TypeLayout, address: int | None = None, data: bytes | None = None,
                    size: int | None = None, aligned: int | None = None, count: int = 0, element=None,
                    referent=None, large: bool = False, max_elements: int | None = ARRAY_ROWS) -> ObjectLayout:
    """The rows of the object at ``address`` whose bytes (header through padding) are ``data``; without
    them, the rows of the type (no values; an array of ``count`` elements).

    ``count``: its NumComponents (array length); ``element``: for arrays, (type name, show, size, fields)
    of an element (fields: a value type's, offsets from the start of the element); ``referent(address)``: what a
    reference points at (a :class:`Referent`)."""
    p = profile
    ptr = p.pointer_size
    o = p.object
    h = o.header_size
    size = layout.base_size + layout.component_size * count if size is None else size
    aligned = max(p.align(size, large), o.min_object_size) if aligned is None else aligned
    rows: list[LayoutRow] = []

    def word(off: int, n: int) -> int | None:
        return None if data is None else int.from_bytes(data[h + off : h + off + n], "little")

    def shown(value, text):
        return None if value is None else text(value)

    if h:
        pad = h + o.sync_block_offset
        rows.append(LayoutRow(-h, pad, "DWORD", "(object header: padding)", "header-padding",
                              shown(word(-h, pad), lambda v: f"{v:#010x}")))
        rows.append(LayoutRow(o.sync_block_offset, 4, "DWORD", "(object header: sync block)", "sync-block",
                              shown(word(o.sync_block_offset, 4), lambda v: f"{v:#010x} " + decode_header(
                                  v, p.header, is_string=False).describe())))
    rows.append(LayoutRow(0, ptr, "MethodTable*", "(object header: MethodTable)", "method-table",
                          shown(word(0, ptr), lambda v: f"{v:#0{2 + 2 * ptr}x}")))
    if layout.component_size:  # an array: length, bounds, elements
        end = _array_rows(p, layout, rows, data, count, element, referent, max_elements)
    else:
        _field_rows(p, layout.fields, rows, 0, data, h if data is not None else None, [0], "", referent)
        end = max([ptr] + [r.end for r in rows if r.role in ("field", "struct")])
    if aligned - h > end:
        rows.append(LayoutRow(end, aligned - h - end, "", "(object alignment gap)", "alignment",
                              data[h + end : aligned].hex(" ") or None if data is not None else None))
    return ObjectLayout(p, tuple(rows), count, size, aligned, large, address, data, layout.base_size,
                        layout.component_size)


def _array_rows(p: Profile, layout: TypeLayout, rows: list, data: bytes, count: int, element, referent,
                max_elements: int | None) -> int:
    ptr = p.pointer_size
    h = p.object.header_size
    rows.append(LayoutRow(ptr, 4, "int32", "(array length)", "length", str(count) if data is not None else None,
                          "01"))
    pos = ptr + 4
    first = layout.base_size - h  # the elements start after BaseSize (it counts MD bounds)
    rank = (layout.base_size - 3 * ptr) // 8 if first > 2 * ptr else 1
    if first > 2 * ptr:  # multi-dimensional: lengths then lower bounds, INT32[rank] each, from 2 * P
        rows.append(LayoutRow(pos, 2 * ptr - pos, "", "(alignment/padding gap)", "gap"))
        for i in range(rank):
            at = 2 * ptr + 4 * i
            rows.append(LayoutRow(at, 4, "int32", f"(length of dimension {i})", "length", _int32(data, h + at), "01"))
        for i in range(rank):
            at = 2 * ptr + 4 * rank + 4 * i
            rows.append(LayoutRow(at, 4, "int32", f"(lower bound of dimension {i})", "length", _int32(data, h + at),
                                  "01"))
        pos = 2 * ptr + 8 * rank
    if first > pos:
        rows.append(LayoutRow(pos, first - pos, "", "(alignment/padding gap)", "gap"))
    name, show, _, inner = element if element is not None else ("?", "hex", 0, ())
    esize = layout.component_size
    shown = count if max_elements is None else min(count, max_elements)
    counter = [1]
    for i in range(shown):
        at = first + i * esize
        raw = data[h + at : h + at + esize] if data is not None else None
        if show == "struct" and inner:  # a value type's elements: each with its own fields
            rows.append(LayoutRow(at, esize, name, f"[{i}]", "struct", path=(f"[{i}]",)))
            _field_rows(p, inner, rows, at, data, h if data is not None else None, counter, "  .", referent, esize,
                        (f"[{i}]",))
            continue
        counter[0] += 1
        value = None if raw is None else show_value(show, raw, ptr, referent) if show != "struct" else raw.hex(" ")
        rows.append(LayoutRow(at, esize, name, f"[{i}]", "element", value, _mark(counter[0]), (f"[{i}]",)))
    if count > shown:
        at = first + shown * esize
        rows.append(LayoutRow(at, (count - shown) * esize, f"{name}[{count - shown}]",
                              f"[{shown}..{count - 1}] (the rest, in one row)", "element"))
    return first + count * esize


def _int32(data: bytes | None, at: int) -> str | None:
    return None if data is None else str(int.from_bytes(data[at : at + 4], "little", signed=True))
