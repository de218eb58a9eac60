"""Which in-use native chunks nothing reaches (vmware/chap's "leaked"): the roots are every word of the process's
memory outside the native heap (modules' writable data, other mappings; a thread's stack only from its stack
pointer up) and every thread's registers; a chunk is reached when a root word or a word of a reached chunk points
into it (its user data, interior pointers included, at an 8-byte boundary: a tagged value, odd, is not a pointer).  ``outside``: address ranges whose words are not roots
(the GC heap, whose live objects the caller gives as ``extra_roots`` instead).  All in numpy: the heap's words are
read once, in windows, and the reach is a breadth-first walk over the chunk graph."""

from __future__ import annotations

import numpy as np

from . import chunks as ch
from .arenas import NativeHeap

WINDOW = 1 << 20


class ChunkIndex:
    """The user-data ranges of the in-use chunks, sorted, and a vectorized lookup of values into them."""

    def __init__(self, heap: NativeHeap):
        used = np.flatnonzero((heap.state == ch.IN_USE) | (heap.state == ch.MMAPPED))
        self.rows = used.astype(np.int32 if len(heap.state) < 2**31 else np.int64)  # index into the heap's arrays
        # the chunk's own bytes: the 8 of the next chunk's prev_size that malloc_usable_size counts too are left
        # out, as a pointer there is the allocator's pointer to the next chunk (a bin's, the arena's top)
        self.end = heap.address[used]
        self.end += heap.size[used]
        self.start = heap.address[used]
        self.start += np.uint64(16)

    def __len__(self) -> int:
        return len(self.start)

    def lookup(self, values: np.ndarray) -> np.ndarray:
        """For each value, the index (into ``rows``) of the chunk whose user data it points into, else -1."""
        if not len(self.start) or not len(values):
            return np.full(len(values), -1, dtype=np.int64)
        k = np.searchsorted(self.start, values, side="right").astype(np.int64) - 1
        ok = k >= 0
        ok[ok] = values[ok] < self.end[k[ok]]
        return np.where(ok, k, -1)


def _words(memory, start: int, end: int):
    """(addresses, values) of the aligned words of [start, end) the dump holds, a window at a time."""
    start = (start + 7) & ~7
    at = start
    while at < end:
        data = memory.read_available(at, min(WINDOW, end - at))
        if not data:
            region = memory.next_region(at)
            if region is None or region.start >= end:
                return
            at = max(region.start, at + 8) & ~7
            continue
        n = len(data) // 8
        if not n:
            return
        yield at + 8 * np.arange(n, dtype=np.uint64), np.frombuffer(data[: n * 8], dtype="<u8")
        at += n * 8


def _subtract(ranges, holes):
    """[start, end) ranges minus the holes (both sorted lists)."""
    out = []
    for s, e in ranges:
        for hs, he in holes:
            if he <= s or hs >= e:
                continue
            if hs > s:
                out.append((s, hs))
            s = max(s, he)
            if s >= e:
                break
        if s < e:
            out.append((s, e))
    return out


def root_ranges(dump, heap: NativeHeap, outside=()) -> list[tuple[int, int]]:
    """The memory whose words are roots: the dump's memory less the native heap, ``outside`` and each thread's
    stack below its stack pointer."""
    holes = [(s, e) for a in heap.arenas for s, e in a.heaps]
    mm = heap.state == ch.MMAPPED
    holes += [(int(a), int(a + s)) for a, s in zip(heap.address[mm], heap.size[mm])]
    for t in dump.threads:
        if t.sp and t.stack_start is not None:
            holes.append((t.stack_start, t.sp))
    if heap.main_arena is not None:  # the allocator's own state: its bins and top point at chunks
        holes.append((heap.main_arena, heap.main_arena + heap.layout.arena["size"]))
    if heap.mp is not None:
        holes.append((heap.mp, heap.mp + heap.layout.par["size"]))
    holes += list(outside)
    runs = [(r.start, r.end) for r in dump.memory.iter_regions()]
    return _subtract(runs, sorted(holes))


def reached(dump, heap: NativeHeap, outside=(), extra_roots: np.ndarray | None = None,
            index: ChunkIndex | None = None) -> tuple[ChunkIndex, np.ndarray]:
    """The chunk index and, per in-use chunk, whether anything reaches it (0: leaked; 1: a root points into it;
    2: only other chunks do)."""
    index = index if index is not None else ChunkIndex(heap)
    n = len(index)
    level = np.zeros(n, dtype=np.uint8)
    if not n:
        return index, level
    lo, hi = index.start[0], index.end[-1]

    def mark_roots(values):
        values = values[(values >= lo) & (values < hi) & (values % np.uint64(8) == 0)]
        k = index.lookup(values)
        level[k[k >= 0]] = 1

    for s, e in root_ranges(dump, heap, outside):
        for _, values in _words(dump.memory, s, e):
            mark_roots(values)
    for t in dump.threads:
        mark_roots(np.array(t.registers, dtype=np.uint64))
    if extra_roots is not None:
        mark_roots(np.asarray(extra_roots, dtype=np.uint64))
    src, dst = _edges(dump, heap, index)
    if len(src) > 1 and (src[1:] < src[:-1]).any():  # the heaps are read in address order: sorted already
        order = np.argsort(src, kind="stable")
        src, dst = src[order], dst[order]
        del order
    starts = np.zeros(n + 1, dtype=np.int64)  # CSR row bounds: how many edges leave each chunk, summed
    np.cumsum(np.bincount(src, minlength=n), out=starts[1:])
    del src
    frontier = np.flatnonzero(level == 1)
    while len(frontier):
        first, counts = starts[frontier], starts[frontier + 1] - starts[frontier]
        total = int(counts.sum())
        if not total:
            break
        # every edge of the frontier at once: each row's first edge, then the offsets within the row
        offsets = np.arange(total, dtype=np.int64) - np.repeat(np.cumsum(counts) - counts, counts)
        targets = np.unique(dst[np.repeat(first, counts) + offsets])
        new = targets[level[targets] == 0]
        level[new] = 2
        frontier = new
    return index, level


def _edges(dump, heap: NativeHeap, index: ChunkIndex) -> tuple[np.ndarray, np.ndarray]:
    """(source, target) chunk pairs: a word in the user data of one in-use chunk pointing into another's."""
    srcs, dsts = [], []
    lo, hi = index.start[0], index.end[-1]
    spans = [(s, e) for a in heap.arenas for s, e in a.heaps]
    mm = heap.state == ch.MMAPPED
    spans += [(int(a), int(a + s)) for a, s in zip(heap.address[mm], heap.size[mm])]
    for s, e in sorted(spans):
        for addresses, values in _words(dump.memory, s, e):
            keep = (values >= lo) & (values < hi) & (values % np.uint64(8) == 0)
            if not keep.any():
                continue
            addresses, values = addresses[keep], values[keep]
            source, target = index.lookup(addresses), index.lookup(values)
            ok = (source >= 0) & (target >= 0) & (source != target)
            srcs.append(source[ok].astype(np.int32))
            dsts.append(target[ok].astype(np.int32))
    if not srcs:
        return np.zeros(0, dtype=np.int32), np.zeros(0, dtype=np.int32)
    return np.concatenate(srcs), np.concatenate(dsts)
