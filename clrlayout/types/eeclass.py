"""EEClass and FieldDesc: the fields a class declares, read from the runtime's own structures.

A MethodTable points at its EEClass (or at its canonical MethodTable, whose EEClass it shares); the
EEClass holds the field counts and the address of the class's FieldDesc list, one FieldDesc per field the
class itself declares (instance fields first, then statics).  The layouts are data
(``formats/type-system.toml``), chosen by runtime version, architecture and OS, parsed with construct
structs built from them.  Every EEClass is checked to point back at its canonical MethodTable before its
counts are believed.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from construct import Array, ConstructError, Int8ul, Int16ul, Int32sl, Int32ul, Int64sl, Int64ul, Padding, Struct

from ..formats import formats_dir
from ..formats import load as load_format
from ..runtime.profiles import version_matches
from ..runtime.structs import relative_target
from ..util.bits import BitStream

#: FieldDescs read of one class at most (the count is a WORD on .NET 9+; a bound on what a dump controls)
MAX_FIELDS = 0xFFFF


@dataclass(frozen=True)
class FieldDescRecord:
    """One FieldDesc as the runtime keeps it."""

    address: int
    enclosing_method_table: int
    token: int  # 0x04000000 | Field RID
    offset: int  # m_dwOffset: instance fields from the end of the MethodTable pointer
    element_type: int  # CorElementType (enums as their underlying type, references as CLASS)
    is_static: bool
    is_thread_local: bool
    is_rva: bool


@dataclass(frozen=True)
class ClassData:
    """What an EEClass says of its class's fields."""

    address: int
    num_instance_fields: int  # including inherited ones
    num_static_fields: int
    num_thread_static_fields: int
    base_size_padding: int  # BaseSize - unboxed size of a value type
    field_desc_list: int


class TypeSystemLayout:
    """The EEClass and FieldDesc layouts of one runtime (version, architecture, OS)."""

    def __init__(self, eeclass: dict, field_desc: dict, bits: dict, element_types: dict, pointer_size: int,
                 lookup_map: dict | None = None):
        self.eeclass = eeclass
        self.lookup_map = lookup_map
        self.field_desc = field_desc
        self.bits = bits
        self.element_types = element_types
        self.pointer_size = pointer_size
        ptr = Int64ul if pointer_size == 8 else Int32ul
        #: RelativePointer<T> of runtimes built with FEATURE_PREJIT (2.x): the EEClass's MethodTable and
        #: FieldDesc list and a FieldDesc's enclosing MethodTable are stored as deltas from the field itself
        self.relative = bool(eeclass.get("relative_pointers"))
        if self.relative:
            ptr = Int64sl if pointer_size == 8 else Int32sl
        fd = field_desc
        self.field_desc_struct = _at(fd["size"], [("enclosing", fd["enclosing_method_table"], ptr),
                                                   ("dword1", fd["dword1"], Int32ul),
                                                   ("dword2", fd["dword2"], Int32ul)])
        e = eeclass
        items = [("method_table", e["method_table"], ptr), ("field_desc_list", e["field_desc_list"], ptr),
                 ("base_size_padding", e["base_size_padding"], Int8ul)]
        if "count_offset" in e:
            items += [(f"num_{k}", off, Int16ul) for k, off in e["count_offset"].items()]
        else:
            items += [("fields_are_packed", e["fields_are_packed"], Int8ul),
                      ("fixed_fields_size", e["fixed_fields_size"], Int8ul)]
        self.eeclass_size = max(off + s.sizeof() for _, off, s in items)
        self.eeclass_struct = _at(self.eeclass_size, items)
        self.count_count = max(e.get("count_index", {"x": -1}).values()) + 1

    def read_class(self, space, address: int, canonical_mt: int) -> ClassData | str:
        """The EEClass at ``address`` of the class whose canonical MethodTable is ``canonical_mt``, or why not."""
        data = space.try_read(address, self.eeclass_size) if address else None
        if data is None:
            return "EEClass not in the dump"
        try:
            c = self.eeclass_struct.parse(data)
        except ConstructError:
            return "EEClass not in the dump"
        method_table = self._pointer(c.method_table, address + self.eeclass["method_table"])
        if method_table != canonical_mt:
            return "EEClass does not point back at its MethodTable (layout of another runtime?)"
        if "num_instance" in c:
            counts = (c.num_instance, c.num_static, c.num_thread_static)
        else:
            index = self.eeclass["count_index"]
            if c.fields_are_packed:
                packed = self.eeclass.get("packed_fields")
                if packed is None:
                    return "EEClass counts are bit-packed (an NGEN image): no packed layout for this runtime"
                words = space.read_available(address + c.fixed_fields_size, packed["max_bytes"])
                array = unpack_fields(words, self.count_count, packed["length_bits"])
            else:
                words = space.try_read(address + c.fixed_fields_size, 4 * self.count_count)
                if words is None:
                    return "EEClass field counts not in the dump"
                array = Array(self.count_count, Int32ul).parse(words)
            counts = (array[index["instance"]], array[index["static"]], array[index["thread_static"]])
        if max(counts) > MAX_FIELDS:
            return "implausible field count in the EEClass"
        field_desc_list = self._pointer(c.field_desc_list, address + self.eeclass["field_desc_list"])
        return ClassData(address, counts[0], counts[1], counts[2], c.base_size_padding, field_desc_list)

    def _pointer(self, value: int, at: int) -> int:
        """A pointer field's target: the value itself, or for a self-relative one the field's address plus it
        (0 is null either way)."""
        return relative_target(at, value, self.pointer_size) if self.relative else value

    def read_field_descs(self, space, first: int, count: int) -> list[FieldDescRecord] | None:
        """``count`` FieldDescs from ``first`` (None when they are not all in the dump)."""
        size = self.field_desc["size"]
        data = space.try_read(first, size * count) if count else b""
        if data is None:
            return None
        b = self.bits
        out = []
        for i in range(count):
            fd = self.field_desc_struct.parse(data[i * size : (i + 1) * size])
            d1, d2 = fd.dword1, fd.dword2
            rid = d1 & (b["token_mask"] if d1 & b["requires_full_token"] else b["short_token_mask"])
            at = first + i * size
            enclosing = self._pointer(fd.enclosing, at + self.field_desc["enclosing_method_table"])
            out.append(FieldDescRecord(at, enclosing, 0x04000000 | rid, d2 & b["offset_mask"],
                                       d2 >> b["type_shift"], bool(d1 & b["is_static"]),
                                       bool(d1 & b["is_thread_local"]), bool(d1 & b["is_rva"])))
        return out

    def is_real_offset(self, offset: int) -> bool:
        return offset <= self.bits["last_real_offset"]


def unpack_fields(data: bytes, count: int, length_bits: int) -> list[int]:
    """The first ``count`` values of a packed DWORD-field stream (``PackedDWORDFields``, an NGEN image's
    EEClass): bits read from the lowest up across little-endian DWORDs, each value a ``length_bits``-bit length
    (minus 1) and then that many bits.  Values the bytes do not reach are 0xFFFFFFFF (not believable)."""
    stream = BitStream(data)
    out = []
    for _ in range(count):
        length = stream.read(length_bits)
        value = stream.read(length + 1) if length is not None else None
        out.append(0xFFFFFFFF if value is None else value)
    return out


def _at(size: int, items: list) -> Struct:
    """A construct Struct of ``size`` bytes with each (name, offset, type) at its offset."""
    parts, pos = [], 0
    for name, off, typ in sorted(items, key=lambda i: i[1]):
        if off < pos:
            raise ValueError(f"{name} at {off:#x} overlaps the field before it")
        if off > pos:
            parts.append(Padding(off - pos))
        parts.append(name / typ)
        pos = off + typ.sizeof()
    if size > pos:
        parts.append(Padding(size - pos))
    return Struct(*parts)


@functools.cache
def _data(directory: str) -> dict:
    return load_format("type-system", directory)


def type_system_layout(flavor: str, arch: str, os: str, version: tuple[int, ...] | None, pointer_size: int,
                       directory: str | None = None) -> TypeSystemLayout | str:
    """The layout for a runtime, or a sentence saying why there is none."""
    data = _data(str(directory or formats_dir()))
    if flavor != "coreclr":
        return f"field layouts are known for CoreCLR (.NET Core 2.x to .NET 10), not for {flavor}"
    if version is None:
        return "field layouts need the runtime's version, which the dump does not give"
    shown = ".".join(map(str, version))
    for e in data.get("eeclass", []):
        if e["arch"] == arch and e["os"] == os and version_matches(e["versions"], version):
            eeclass = e
            break
    else:
        return f"no EEClass layout for CoreCLR {shown} on {os} {arch} in type-system.toml"
    fd = next((f for f in data.get("field_desc", []) if f["pointer_size"] == pointer_size), None)
    if fd is None:
        return f"no FieldDesc layout for {pointer_size * 8}-bit processes"
    types = {int(k, 0) if isinstance(k, str) else k: v for k, v in data.get("element_types", {}).items()}
    lookup_map = data.get("lookup_map")
    if lookup_map is not None:  # the FEATURE_PREJIT map of 2.x, where it applies
        prejit = next((m for m in lookup_map.get("prejit", []) if m["pointer_size"] == pointer_size
                       and version_matches(m["versions"], version)), None)
        lookup_map = {**lookup_map, "prejit": prejit}
    return TypeSystemLayout(eeclass, fd, data["field_bits"], types, pointer_size, lookup_map)
