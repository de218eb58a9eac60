"""Synthetic target memory built with the profile's own construct structs (minidump-synth style).

A ``SynthHeap`` lays out MethodTables in one region and objects back to back in another, as a GC heap
holds them.  The heap buffer is the concatenation of whole object spans (header through alignment
padding); an object's address is its span's start plus the header size.  In the GC's terms the segment
starts at the first object's address and ends ``header_size`` bytes past the buffer (the GC counts each
header at the end of the previous object).
"""

from __future__ import annotations

from clrlayout.dump.addrspace import AddressSpace, BytesSource
from clrlayout.heap.segments import Segment
from clrlayout.runtime.profiles import Profile
from clrlayout.runtime.structs import ClrStructs

#: (flavor, arch, runtime version) of the profiles the synthetic heaps are built for
PROFILES = [("coreclr", "x64", "3.1.23"), ("coreclr", "x86", "3.1.23"), ("netfx", "x64", "4.8"),
            ("netfx", "x86", "4.8"), ("coreclr", "x64", "8.0"), ("coreclr", "x64", "9.0")]

MT_BASE = {8: 0x7FFE_0000_1000, 4: 0x5C70_1000}
HEAP_BASE = {8: 0x0000_0165_0000_1000, 4: 0x033B_1000}


def method_table_bytes(profile: Profile, flags: int, base_size: int, parent: int = 0, eeclass: int = 0) -> bytes:
    values = {f.name: 0 for f in profile.method_table.fields.values()}
    values.update(m_dwFlags=flags, m_BaseSize=base_size, m_pParentMethodTable=parent)
    if "m_pEEClass" in values:
        values["m_pEEClass"] = eeclass
    return ClrStructs.of(profile).method_table.build(values)


def string_span(profile: Profile, value: str, method_table: int, sync: int = 0, terminator: int = 0,
                pad: int = 0) -> bytes:
    """A string's bytes from its header through its padding, built with the profile's struct."""
    units = len(value.encode("utf-16-le", "surrogatepass")) // 2
    header = {"m_SyncBlockValue": sync}
    if profile.object.header_size > 4:
        header["m_alignpad"] = pad.to_bytes(profile.object.header_size - 4, "little")
    return ClrStructs.of(profile).string_object().build(dict(
        prefix=dict(header=header, m_pMethTab=method_table, m_StringLength=units),
        m_FirstChar=value, terminator=terminator, extra=b"\0" * profile.string_extra_bytes,
        padding=b"\0" * (profile.string_aligned_size(units) - profile.string_size(units))))


class SynthHeap:
    def __init__(self, profile: Profile, mt_base: int | None = None):
        self.profile = profile
        ptr = profile.pointer_size
        self.mt_base = MT_BASE[ptr] if mt_base is None else mt_base
        self.heap_base = HEAP_BASE[ptr]
        self.mts = bytearray()
        self.heap = bytearray()
        self.object_mt = self.add_mt(0x00000200, profile.object.min_object_size)
        self.string_mt = self.add_mt(0x80000000 | profile.string.component_size, profile.string.base_size,
                                     parent=self.object_mt, eeclass=self.mt_base + 0x800)
        self.free_mt = self.add_mt(0x80000001, 3 * ptr)
        self.class_mt = self.add_mt(0x01000000, profile.object.min_object_size + ptr, parent=self.object_mt,
                                    eeclass=self.mt_base + 0x900)

    def add_mt(self, flags: int, base_size: int, parent: int = 0, eeclass: int = 0) -> int:
        address = self.mt_base + len(self.mts)
        self.mts += method_table_bytes(self.profile, flags, base_size, parent, eeclass)
        self.mts += b"\0" * (-len(self.mts) % 16)
        return address

    @property
    def cursor(self) -> int:
        """The address the next object gets."""
        return self.heap_base + len(self.heap) + self.profile.object.header_size

    def add_string(self, value: str, sync: int = 0, terminator: int = 0, pad: int = 0) -> int:
        address = self.cursor
        self.heap += string_span(self.profile, value, self.string_mt, sync, terminator, pad)
        return address

    def add_object(self, mt: int | None = None) -> int:
        """A zero-filled instance of the class MethodTable (BaseSize 3-4 pointers)."""
        p = self.profile
        ptr = p.pointer_size
        address = self.cursor
        size = p.align(p.object.min_object_size + ptr)
        body = b"\0" * p.object.header_size + (mt or self.class_mt).to_bytes(ptr, "little")
        self.heap += body + b"\0" * (size - len(body))
        return address

    def add_free(self, size: int) -> int:
        """A free object of ``size`` bytes (3 pointers of BaseSize, the rest as components)."""
        p = self.profile
        ptr = p.pointer_size
        address = self.cursor
        body = b"\0" * p.object.header_size + self.free_mt.to_bytes(ptr, "little") + (size - 3 * ptr).to_bytes(4, "little")
        self.heap += body + b"\0" * (size - len(body))
        return address

    def add_gap(self, size: int) -> None:
        """Zeroed bytes that hold no object (an allocation context)."""
        self.heap += b"\0" * size

    def add_raw(self, data: bytes) -> int:
        address = self.heap_base + len(self.heap)
        self.heap += data
        return address

    def segment(self, kind: str = "soh") -> Segment:
        hs = self.profile.object.header_size
        return Segment(start=self.heap_base + hs, end=self.heap_base + len(self.heap) + hs, kind=kind, ephemeral=True)

    def space(self) -> AddressSpace:
        hs = self.profile.object.header_size
        heap = bytes(self.heap) + b"\0" * hs
        blob = bytes(self.mts) + heap
        regions = [(self.mt_base, len(self.mts), 0), (self.heap_base, len(heap), len(self.mts))]
        return AddressSpace(BytesSource(blob), regions, self.profile.pointer_size)
