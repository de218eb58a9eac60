"""The layout of a System.String, row by row (JOL's model: OFF, SZ, TYPE, DESCRIPTION, VALUE).

``string_layout`` is a pure function of a profile and a length, optionally with a decoded object and its
bytes: the same rows serve ``dump --layout`` (values and bytes from a dump) and ``layout`` (no dump).
Offsets are relative to the object pointer, so the header has negative offsets, as in SOS and WinDbg.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..runtime.profiles import Profile
from .strings import StringObject


@dataclass(frozen=True)
class LayoutRow:
    offset: int  # relative to the object pointer
    size: int
    type: str
    description: str
    role: str  # header-padding | sync-block | method-table | sync-pointer | length | gap | chars | terminator | extra
    #            | alignment | field | struct | element
    value: str | None = None
    #: the two characters the hex dump shows under this row's bytes (None: the role's)
    mark: str | None = None
    #: a field's row: the field tokens from the object down to it (an embedded struct's field has two);
    #: an array element's: ("[i]",) and then the element's field tokens
    path: tuple | None = None

    @property
    def end(self) -> int:
        return self.offset + self.size


#: bytes of a role that hold no information (counted as space losses)
LOSS_ROLES = {"header-padding": "internal", "gap": "internal", "extra": "internal", "alignment": "external"}


@dataclass(frozen=True)
class ObjectLayout:
    profile: Profile
    rows: tuple[LayoutRow, ...]
    length: int
    sos_size: int
    aligned_size: int
    large: bool = False
    address: int | None = None
    #: the object's bytes from the start of its header through its padding (None without a dump)
    data: bytes | None = None
    #: the type's BaseSize and ComponentSize (None: System.String's, from the profile)
    base_size: int | None = None
    component_size: int = 2

    @property
    def start_offset(self) -> int:
        return -self.profile.object.header_size

    def losses(self) -> tuple[int, int]:
        """(internal, external) bytes that hold nothing: header padding, extra bytes, alignment gap."""
        internal = sum(r.size for r in self.rows if LOSS_ROLES.get(r.role) == "internal")
        external = sum(r.size for r in self.rows if LOSS_ROLES.get(r.role) == "external")
        return internal, external

    def bytes_of(self, row: LayoutRow) -> bytes | None:
        if self.data is None:
            return None
        lo = row.offset - self.start_offset
        return self.data[lo : lo + row.size]

    def row_at(self, offset: int) -> LayoutRow | None:
        """The innermost row holding ``offset`` (an embedded struct's field rather than the struct)."""
        found = None
        for r in self.rows:
            if r.offset <= offset < r.end:
                found = r
        return found

    def word_read_overrun(self) -> tuple[int, int]:
        """How far reading the characters a pointer-sized word at a time runs past the object.

        String routines read the characters in pointer-sized words from the first character.  The last
        word ends at ``chars_offset + ptr * ceil(2n / ptr)``.  Returns the bytes that read reaches past
        (the SOS size, the aligned allocation); (0, 0) means every such read stays inside the object.
        This is why BaseSize on .NET Framework x64 counts 4 extra bytes.
        """
        p = self.profile
        ptr = p.pointer_size
        payload = 2 * self.length
        read_end = p.string.chars_offset + ptr * -(-payload // ptr) if payload else 0
        header = p.object.header_size
        return max(0, read_end - (self.sos_size - header)), max(0, read_end - (self.aligned_size - header))


def _u(data: bytes | None) -> int | None:
    return None if data is None else int.from_bytes(data, "little")


def string_layout(profile: Profile, length: int, obj: StringObject | None = None, data: bytes | None = None,
                  large: bool = False, max_value_chars: int | None = None) -> ObjectLayout:
    """The rows of a string of ``length`` characters under ``profile``; values from ``obj`` when given."""
    p = profile
    ptr = p.pointer_size
    o = p.object
    s = p.string
    sos = p.string_size(length)
    aligned = p.string_aligned_size(length, large)
    rows: list[LayoutRow] = []

    def add(offset, size, type_, desc, role, value=None):
        if size > 0:
            rows.append(LayoutRow(offset, size, type_, desc, role, value))

    header = obj.header_state(p) if obj is not None else None
    mono = p.flavor == "mono"
    names = {"mt": ("MonoVTable*", "(object header: vtable)") if mono else ("MethodTable*",
                                                                            "(object header: MethodTable)"),
             "length": s.length_field,
             "chars": f"{s.chars_field} (UTF-16 characters)"}
    sync_off = o.sync_block_offset
    if o.header_size:
        pad = o.header_size + sync_off
        add(-o.header_size, pad, "DWORD", "(object header: padding)", "header-padding",
            None if obj is None else f"{obj.header_padding:#010x}")
        add(sync_off, 4, "DWORD", "(object header: sync block)", "sync-block",
            None if obj is None else f"{obj.header:#010x} {header.describe()}")
    add(0, ptr, *names["mt"], "method-table",
        None if obj is None else f"{obj.method_table:#0{2 + 2 * ptr}x}")
    pos = ptr
    if o.sync_pointer_offset is not None:
        add(pos, o.sync_pointer_offset - pos, "", "(gap)", "gap")
        add(o.sync_pointer_offset, ptr, "LockWord", "(object header: synchronisation)", "sync-pointer",
            None if obj is None else f"{obj.header:#x} {header.describe()}")
        pos = o.sync_pointer_offset + ptr
    add(pos, s.length_offset - pos, "", "(alignment/padding gap)", "gap")
    add(s.length_offset, 4, "int32", names["length"], "length", None if obj is None else str(obj.length))
    add(s.length_offset + 4, s.chars_offset - s.length_offset - 4, "", "(alignment/padding gap)", "gap")
    value = None
    if obj is not None and obj.value is not None:
        text = obj.value
        if max_value_chars is not None and len(text) > max_value_chars:
            text = text[:max_value_chars] + "\u2026"
        value = quote(text)
    add(s.chars_offset, 2 * length, f"char[{length}]", names["chars"], "chars", value)
    term_at = s.chars_offset + 2 * length
    term_value = None
    if data is not None:
        term_value = f"{_u(data[o.header_size + term_at:][:2]):#06x}"
    add(term_at, s.terminator_size, "char", "(terminator)", "terminator", term_value)
    extra_at = term_at + s.terminator_size
    extra = sos - o.header_size - extra_at
    extra_value = None
    if data is not None and extra > 0:
        extra_value = data[o.header_size + extra_at:][:extra].hex(" ")
    add(extra_at, extra, "", "(extra bytes counted in BaseSize)", "extra", extra_value)
    gap_at = sos - o.header_size
    gap_value = None
    if data is not None and aligned > sos:
        gap_value = data[o.header_size + gap_at:][: aligned - sos].hex(" ")
    add(gap_at, aligned - sos, "", "(object alignment gap)", "alignment", gap_value)
    return ObjectLayout(p, tuple(rows), length, sos, aligned, large,
                        None if obj is None else obj.address, data)


_ESCAPES = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\r": "\\r", "\t": "\\t", "\0": "\\0"}


def quote(text: str) -> str:
    """A string as a C#-like literal: escapes for control characters and lone surrogates."""
    out = []
    for ch in text:
        c = ord(ch)
        if ch in _ESCAPES:
            out.append(_ESCAPES[ch])
        elif c < 0x20 or 0x7F <= c < 0xA0 or 0xD800 <= c <= 0xDFFF:
            out.append(f"\\u{c:04x}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'
