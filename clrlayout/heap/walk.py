"""Walking the GC heap: every object of a segment, back to back, as the GC itself lays them out.

``o_next = o + Align(BaseSize + ComponentSize * NumComponents)`` from the segment's first object to its end
(gc.cpp, SOS and ClrMD walk the same way).  Zeroed gaps (allocation contexts) are skipped to the next
object; an object whose MethodTable does not check out is recorded as a finding and the walk resumes at
the next word that is a known MethodTable (ClrMD's FindNextValidObject).  Memory is read in bounded
windows; nothing is read past a segment's end.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from ..dump.addrspace import AddressSpace
from ..findings import FindingKind, Findings
from ..runtime.methodtable import MethodTable, MethodTables
from .segments import Segment


@dataclass(frozen=True)
class WalkedObject:
    """One object of the GC heap as the walk finds it, as ``!dumpheap`` lists it (the engine's record; the model's
    :class:`~clrlayout.model.heap.HeapObject` is the object users get)."""

    address: int  #: the object pointer (the address of its MethodTable pointer)
    method_table: int  #: the MethodTable address, GC bits masked
    size: int  #: BaseSize + ComponentSize * count: the SOS size, unaligned
    aligned_size: int  #: the bytes the object takes on the heap
    count: int  #: NumComponents: characters of a string, elements of an array (0 for other types)
    type: MethodTable  #: the validated MethodTable record (base size, component size, kind)
    segment: Segment  #: the heap segment or region that holds it
    type_name: str | None = None  #: the type's name, where the session knows it

    @property
    def is_free(self) -> bool:
        return self.type.kind == "free"


class HeapWalker:
    def __init__(self, space: AddressSpace, mts: MethodTables, findings: Findings | None = None):
        self.space = space
        self.mts = mts
        self.profile = mts.profile
        self.findings = findings if findings is not None else Findings(space.limits.max_findings)
        ptr = space.pointer_size
        e = "<" if space.little_endian else ">"
        self._word = struct.Struct(e + ("Q" if ptr == 8 else "I"))
        self._u32 = struct.Struct(e + "I")
        self._np_word = np.dtype(e + ("u8" if ptr == 8 else "u4"))

    def iter_objects(self, segments) -> Iterator[WalkedObject]:
        for seg in segments:
            yield from self.iter_segment(seg)

    def iter_segment(self, seg: Segment) -> Iterator[WalkedObject]:
        p = self.profile
        ptr = p.pointer_size
        unmask = ~p.object.method_table_unmask
        align = (p.object.large_object_alignment if seg.large else p.object.alignment) - 1
        min_size = p.object.min_object_size
        window = self.space.limits.window
        word = self._word.unpack_from
        u32 = self._u32.unpack_from
        get_mt = self.mts.get
        pos, end = seg.start, seg.end
        buf, buf_start = b"", pos
        while pos < end:
            off = pos - buf_start
            if off < 0 or off + 2 * ptr > len(buf):
                buf_start = pos
                buf = self.space.read_available(pos, min(window, end - pos))
                off = 0
                if len(buf) < min(2 * ptr, end - pos):
                    nxt = self._next_mapped(pos, end)
                    self.findings.add(FindingKind.MEMORY_MISSING, pos,
                                      f"heap memory {pos:#x}-{(nxt or end):#x} is not in the dump")
                    if nxt is None:
                        return
                    pos = self._resync(nxt, end, seg)
                    if pos is None:
                        return
                    buf = b""
                    continue
            raw_mt = word(buf, off)[0]
            if raw_mt == 0:
                nxt = self._resync(pos + ptr, end, seg, buf, buf_start)
                if nxt is None:
                    return
                pos = nxt
                continue
            mt = get_mt(raw_mt & unmask)
            if mt is None:
                nxt = self._resync(pos + ptr, end, seg, buf, buf_start)
                self.bad_object(pos, raw_mt, nxt, seg)
                if nxt is None:
                    return
                pos = nxt
                continue
            # the length field is missing from the buffer only when the segment ends within it: the object
            # is then cut by the segment's end whatever its length (the check below)
            ncomp = u32(buf, off + ptr)[0] if mt.component_size and off + ptr + 4 <= len(buf) else 0
            size = mt.base_size + mt.component_size * ncomp
            aligned = max((size + align) & ~align, min_size)
            if pos + aligned > end:
                nxt = self._resync(pos + ptr, end, seg, buf, buf_start)
                self.past_end(pos, aligned, nxt, seg)
                if nxt is None:
                    return
                pos = nxt
                continue
            yield WalkedObject(pos, mt.address, size, aligned, ncomp, mt, seg)
            pos += aligned

    # --- anomalies, reported the same way by both walkers -------------------------------------------

    def bad_object(self, pos: int, raw_mt: int, nxt: int | None, seg: Segment) -> None:
        """The object at ``pos`` has no valid MethodTable: its memory is missing, or it is corrupt."""
        mt = raw_mt & ~self.profile.object.method_table_unmask
        if self.space.is_absent(mt):
            self.findings.add(FindingKind.METHOD_TABLE_MISSING, pos,
                              f"the MethodTable {mt:#x} is not in the dump{_skipped(pos, nxt, seg)}")
        else:
            self.findings.add(FindingKind.BAD_METHOD_TABLE, pos,
                              f"{raw_mt:#x} is not a valid MethodTable{_skipped(pos, nxt, seg)}")

    def past_end(self, pos: int, aligned: int, nxt: int | None, seg: Segment) -> None:
        self.findings.add(FindingKind.OBJECT_PAST_SEGMENT_END, pos,
                          f"object of {aligned:,} bytes runs past the segment end {seg.end:#x}"
                          f"{_skipped(pos, nxt, seg)}")

    # --- finding the next object ------------------------------------------------------------------

    def _next_mapped(self, pos: int, end: int) -> int | None:
        r = self.space.next_region(pos + 1)
        if r is None or r.start >= end:
            return None
        return max(r.start, pos + 1)

    def plausible(self, q: int, mt: MethodTable, seg: Segment, buf, buf_start: int) -> bool:
        """Whether a valid MethodTable at ``q`` starts a real object: it fits in the segment, and what
        follows it is the segment's end, memory the dump lacks, a zeroed gap or another valid object.
        (A MethodTable value held as data inside an object rarely passes: what follows its "end" is the
        rest of that object.)  ``buf`` holds memory from ``buf_start``; what it lacks is read."""
        p = self.profile
        ptr = p.pointer_size
        align = (p.object.large_object_alignment if seg.large else p.object.alignment) - 1
        count = 0
        if mt.component_size:
            at = q + ptr - buf_start
            data = buf[at : at + 4] if at >= 0 and at + 4 <= len(buf) else self.space.try_read(q + ptr, 4)
            if data is None:
                return True  # cannot be disproved
            count = self._u32.unpack_from(data)[0]
        nxt = q + max((mt.base_size + mt.component_size * count + align) & ~align, p.object.min_object_size)
        if nxt > seg.end:
            return False
        if nxt == seg.end:
            return True
        at = nxt - buf_start
        data = buf[at : at + ptr] if at + ptr <= len(buf) else self.space.try_read(nxt, ptr)
        if data is None:
            return True
        after = self._word.unpack_from(data)[0]
        return after == 0 or self.mts.get(after & ~p.object.method_table_unmask) is not None

    def next_object(self, buf, buf_start: int, start: int, stop: int, seg: Segment) -> int | None:
        """The first pointer-aligned address in [start, stop), inside ``buf`` (memory from ``buf_start``),
        where a plausible object starts; None if there is none there.

        Only the buffer's non-zero words are looked at (found by numpy), each value probed once as a
        MethodTable: a region full of garbage costs one probe per distinct word, not a copy per word."""
        ptr = self.profile.pointer_size
        unmask = ~self.profile.object.method_table_unmask
        start += (-start) % ptr
        first = (start - buf_start) // ptr
        last = min(stop - buf_start, len(buf)) // ptr
        if last <= first or (start - buf_start) % ptr:
            return None
        words = np.frombuffer(buf, dtype=self._np_word, count=last - first, offset=first * ptr)
        get_mt = self.mts.get
        for j in np.flatnonzero(words).tolist():
            q = start + j * ptr
            mt = get_mt(int(words[j]) & unmask)
            if mt is not None and self.plausible(q, mt, seg, buf, buf_start):
                return q
        return None

    def _resync(self, pos: int, end: int, seg: Segment, buf: bytes = b"", buf_start: int = 0) -> int | None:
        """The next address >= pos where a plausible object starts (None: the segment's end)."""
        ptr = self.profile.pointer_size
        pos += (-pos) % ptr
        while pos < end:
            off = pos - buf_start
            if off < 0 or off + ptr > len(buf):
                buf_start = pos
                buf = self.space.read_available(pos, min(self.space.limits.window, end - pos))
                if len(buf) < ptr:
                    nxt = self._next_mapped(pos, end)
                    if nxt is None:
                        return None
                    pos = nxt + (-nxt) % ptr
                    buf = b""
                    continue
            found = self.next_object(buf, buf_start, pos, end, seg)
            if found is not None:
                return found
            pos = buf_start + len(buf) - len(buf) % ptr
        return None


def _skipped(pos: int, nxt: int | None, seg: Segment) -> str:
    """How far a walk went to get past an anomaly at ``pos``."""
    if nxt is None:
        return f"; nothing valid follows: the rest of the segment ({seg.end - pos:,} bytes) is skipped"
    return f"; the walk resumes at {nxt:#x} ({nxt - pos:,} bytes skipped)"
