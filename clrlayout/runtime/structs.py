"""construct structs built from a layout profile (never written per runtime).

``ClrStructs(profile)`` follows pyelftools' ``ELFStructs``: primitives come from the profile's pointer size
and byte order only, fields are laid out at the profile's offsets with explicit padding, and derived
values are ``Computed``.  The structs parse buffers whose size was checked against the limits first;
they never seek across the address space.  ``.build()`` makes test objects; ``.compile()`` is never used
(construct's docs: compiled parsers are not for untrusted data).
"""

from __future__ import annotations

import functools

from construct import (
    Adapter,
    Bytes,
    Computed,
    Int8ul,
    Int16ub,
    Int16ul,
    Int32ub,
    Int32ul,
    Int64ub,
    Int64ul,
    Padding,
    Struct,
    this,
)

from .profiles import Profile


def decode_utf16(data: bytes) -> str:
    """UTF-16LE code units to str: valid pairs combine, lone surrogates are kept (as the CLR keeps them)."""
    return data.decode("utf-16-le", "surrogatepass")


class Utf16(Adapter):
    """The characters of a string: bytes on the wire, str when parsed (lone surrogates kept)."""

    def _decode(self, obj, context, path):
        return decode_utf16(obj)

    def _encode(self, obj, context, path):
        return obj.encode("utf-16-le", "surrogatepass")


def relative_target(at: int, value: int, pointer_size: int) -> int:
    """Where a self-relative pointer (``RelativePointer<T>`` of runtimes built with FEATURE_PREJIT: .NET Core
    2.x) stored at ``at`` points: its own address plus the value, modulo the address space; 0 is null."""
    return (at + value) & ((1 << (8 * pointer_size)) - 1) if value else 0


class SelfRelative(Adapter):
    """A self-relative pointer field (``RelativePointer<T>``): parsed to the address it points at, from the
    structure's own address, which the parse is given as ``address=`` (0 stays 0: null)."""

    def __init__(self, subcon, offset: int):
        super().__init__(subcon)
        self.offset = offset
        self.size = subcon.sizeof()

    def _decode(self, obj, context, path):
        return relative_target(context._params.address + self.offset, obj, self.size)

    def _encode(self, obj, context, path):
        if obj == 0:
            return 0
        return relative_target(obj, -(context._params.address + self.offset), self.size)


class ClrStructs:
    """The structs of one profile.  Cached per profile: ``ClrStructs.of(profile)``."""

    def __init__(self, profile: Profile):
        self.profile = profile
        little = profile.little_endian
        self.UInt16 = Int16ul if little else Int16ub
        self.UInt32 = Int32ul if little else Int32ub
        self.UInt64 = Int64ul if little else Int64ub
        self.Pointer = self.UInt64 if profile.pointer_size == 8 else self.UInt32
        self._types = {"uint8": Int8ul, "uint16": self.UInt16, "uint32": self.UInt32, "int32": self.UInt32,
                       "uint64": self.UInt64, "pointer": self.Pointer}
        #: the MethodTable up to its vtable; parse with ``address=`` (self-relative fields need it)
        self.method_table = self._method_table() if profile.method_table is not None else None
        self.object_header = self._object_header()
        self.string_prefix = self._string_prefix()

    @staticmethod
    @functools.lru_cache(maxsize=64)
    def of(profile: Profile) -> ClrStructs:
        return ClrStructs(profile)

    # --- MethodTable -------------------------------------------------------------------------------

    def _method_table(self) -> Struct:
        """The MethodTable up to the vtable slots, fields at the profile's offsets."""
        mt = self.profile.method_table
        flags = mt.flags
        items, pos = [], 0
        for f in sorted(mt.fields.values(), key=lambda f: f.offset):
            if f.offset > pos:
                items.append(Padding(f.offset - pos))
            kind = SelfRelative(self.Pointer, f.offset) if f.type == "relative_pointer" else self._types[f.type]
            items.append(f.name / kind)
            pos = f.offset + f.size
        if mt.size > pos:
            items.append(Padding(mt.size - pos))
        has_component = flags["HasComponentSize"]
        items += [
            "has_component_size" / Computed((this.m_dwFlags & has_component) != 0),
            "component_size" / Computed(lambda ctx: (ctx.m_dwFlags & flags["ComponentSizeMask"])
                                        if ctx.m_dwFlags & has_component else 0),
            "category" / Computed(this.m_dwFlags & flags["Category_Mask"]),
        ]
        s = Struct(*items)
        assert s.sizeof() == mt.size, (s.sizeof(), mt.size)
        return s

    # --- object header and String ------------------------------------------------------------------

    def _object_header(self) -> Struct:
        """The bytes before the object pointer: [padding DWORD on 64-bit] + the sync block DWORD."""
        o = self.profile.object
        if o.header_size == 0:  # Mono: no header before the object
            return Struct()
        sync_at = o.header_size + o.sync_block_offset
        items = []
        if sync_at:
            items.append("m_alignpad" / Bytes(sync_at))
        items.append("m_SyncBlockValue" / self.UInt32)
        tail = o.header_size - sync_at - 4
        if tail:
            items.append(Padding(tail))
        s = Struct(*items)
        assert s.sizeof() == o.header_size
        return s

    def _string_prefix(self) -> Struct:
        """A string from its header to its first character: header, MethodTable pointer, length."""
        p = self.profile
        s = p.string
        items = []
        if p.object.header_size:
            items.append("header" / self.object_header)
        items.append("m_pMethTab" / self.Pointer)
        pos = p.pointer_size
        if p.object.sync_pointer_offset is not None:  # Mono: MonoThreadsSync* after the vtable
            gap = p.object.sync_pointer_offset - pos
            if gap:
                items.append(Padding(gap))
            items.append("synchronisation" / self.Pointer)
            pos = p.object.sync_pointer_offset + p.pointer_size
        if s.length_offset > pos:
            items.append(Padding(s.length_offset - pos))
        items.append("m_StringLength" / self.UInt32)
        pos = s.length_offset + 4
        if s.chars_offset > pos:
            items.append(Padding(s.chars_offset - pos))
        st = Struct(*items)
        assert st.sizeof() == p.object.header_size + s.chars_offset
        return st

    @functools.lru_cache(maxsize=4)
    def string_object(self, large: bool = False) -> Struct:
        """A whole string object from its header through its alignment padding.

        Parse a buffer of exactly ``string_aligned_size(length)`` bytes whose length field has been
        checked against the limits.  ``terminator`` must be 0; ``extra`` is non-empty where BaseSize
        counts bytes past the terminator (.NET Framework x64).
        """
        p = self.profile
        base = p.string.base_size
        component = p.string.component_size
        extra = p.string_extra_bytes
        return Struct(
            "prefix" / self.string_prefix,
            "m_FirstChar" / Utf16(Bytes(this.prefix.m_StringLength * component)),
            "terminator" / self.UInt16,
            "extra" / Bytes(extra),
            "sos_size" / Computed(base + component * this.prefix.m_StringLength),
            "aligned_size" / Computed(lambda ctx: p.string_aligned_size(ctx.prefix.m_StringLength, large)),
            "padding" / Bytes(this.aligned_size - this.sos_size),
        )
