"""Which in-use native chunks nothing reaches (vmware/chap's "leaked"): the roots are every word of the process's
memory outside the native heap (modules' writable data, other mappings; a thread's stack only from its stack
pointer up) and every thread's registers; a chunk is reached when a root word or a word of a reached chunk points
into it (its user data, interior pointers included, at a word's boundary: a tagged value, odd, is not a pointer).
``outside``: address ranges whose words are not roots (the GC heap, whose live objects the caller gives as
``extra_roots`` instead).  All in numpy: the heap's words are read once, in windows, and the reach is a
breadth-first walk over the chunk graph, a bounded number of edges at a time."""

from __future__ import annotations

import numpy as np

from . import chunks as ch
from .arenas import NativeHeap

WINDOW = 1 << 20


class ChunkIndex:
    """The in-use chunks (their rows in the heap's arrays, 4 bytes a chunk) and a vectorized lookup of values into
    their user data, searched in the heap's own sorted addresses: no copy of them is kept."""

    def __init__(self, heap: NativeHeap):
        used = (heap.state == ch.IN_USE) | (heap.state == ch.MMAPPED)
        self._used = used  # 1 byte a chunk: whether a chunk found by address is one of the in-use ones
        self.rows = np.flatnonzero(used).astype(np.int32 if len(heap.state) < 2**31 else np.int64)
        self._heap = heap
        self.header = heap.layout.chunk["header"]  #: a chunk's header: its user data starts past it
        self.word = heap.layout.word
        #: the user data's bounds: no value outside them points into a chunk
        first, last = (int(self.rows[0]), int(self.rows[-1])) if len(self.rows) else (0, 0)
        self.lo = int(heap.address[first]) + self.header if len(self.rows) else 0
        self.hi = int(heap.address[last] + heap.size[last]) if len(self.rows) else 0

    def __len__(self) -> int:
        return len(self.rows)

    def lookup(self, values: np.ndarray) -> np.ndarray:
        """For each value, the index (into ``rows``) of the chunk whose user data it points into, else -1: the
        chunk's own bytes, from its header's end to its end (the word of the next chunk's prev_size that
        malloc_usable_size counts too is left out, as a pointer there is the allocator's pointer to the next
        chunk: a bin's, the top)."""
        h = self._heap
        if not len(self.rows) or not len(values):
            return np.full(len(values), -1, dtype=np.int64)
        i = np.searchsorted(h.address, values, side="right").astype(np.int64) - 1
        ok = i >= 0
        ok[ok] = self._used[i[ok]]
        at = i[ok]
        ok[ok] = (values[ok] >= h.address[at] + np.uint64(self.header)) & (values[ok] < h.address[at] + h.size[at])
        k = np.full(len(values), -1, dtype=np.int64)
        k[ok] = np.searchsorted(self.rows, i[ok])
        return k


def _words(memory, start: int, end: int, word: int = 8):
    """(addresses, values) of the aligned words of [start, end) the dump holds, a window at a time (values as
    64-bit numbers whatever the word)."""
    start = (start + word - 1) & ~(word - 1)
    at = start
    while at < end:
        data = memory.read_available(at, min(WINDOW, end - at))
        if not data:
            region = memory.next_region(at)
            if region is None or region.start >= end:
                return
            at = (max(region.start, at + word) + word - 1) & ~(word - 1)
            continue
        n = len(data) // word
        if not n:
            return
        values = np.frombuffer(data[: n * word], dtype=f"<u{word}")
        yield at + word * np.arange(n, dtype=np.uint64), values.astype(np.uint64, copy=False)
        at += n * word


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
    from ..util.allocator import release_freed

    release_freed()  # what reading the heap freed goes back to the kernel: the chunk graph is made next
    index = index if index is not None else ChunkIndex(heap)
    n = len(index)
    level = np.zeros(n, dtype=np.uint8)
    if not n:
        return index, level
    lo, hi, word = np.uint64(index.lo), np.uint64(index.hi), np.uint64(index.word)

    def mark_roots(values):
        values = values[(values >= lo) & (values < hi) & (values % word == 0)]
        k = index.lookup(values)
        level[k[k >= 0]] = 1

    for s, e in root_ranges(dump, heap, outside):
        for _, values in _words(dump.memory, s, e, index.word):
            mark_roots(values)
    for t in dump.threads:
        mark_roots(np.array(t.registers, dtype=np.uint64))
    if extra_roots is not None:
        mark_roots(np.asarray(extra_roots, dtype=np.uint64))
    starts, dst = _edges(dump, heap, index)
    # the frontier as a list of int32 arrays, made a slice of the chunks at a time: nothing as long as the heap
    frontier = [np.flatnonzero(level[at:at + BATCH_CHUNKS] == 1).astype(np.int32) + np.int32(at)
                for at in range(0, n, BATCH_CHUNKS)]
    while frontier:
        found = []
        for part in (p for piece in frontier for p in _batches(piece, starts)):  # bounded temporaries
            first, counts = starts[part].astype(np.int64), (starts[part + 1] - starts[part]).astype(np.int64)
            total = int(counts.sum())
            if not total:
                continue
            # every edge of the part at once: each row's first edge, then the offsets within the row
            offsets = np.arange(total, dtype=np.int64) - np.repeat(np.cumsum(counts) - counts, counts)
            offsets += np.repeat(first, counts)
            targets = np.unique(dst[offsets])
            del offsets
            new = targets[level[targets] == 0]
            level[new] = 2
            if len(new):
                found.append(new)
        frontier = found
    return index, level


#: edges followed at once in the breadth-first walk (its temporaries are about 24 bytes an edge), and chunks
#: looked at a time (about 30 bytes a chunk)
BATCH_EDGES, BATCH_CHUNKS = 1 << 17, 1 << 16


def _batches(frontier: np.ndarray, starts: np.ndarray):
    """The frontier in parts of about BATCH_EDGES edges each (a chunk with more is a part of its own), looked at
    BATCH_CHUNKS chunks at a time: nothing the size of the whole frontier is made."""
    for at in range(0, len(frontier), BATCH_CHUNKS):
        piece = frontier[at:at + BATCH_CHUNKS]
        if not len(piece):
            continue
        edges = np.cumsum((starts[piece + 1] - starts[piece]).astype(np.int64))
        if int(edges[-1]) <= BATCH_EDGES or len(piece) == 1:
            yield piece
            continue
        cuts = np.searchsorted(edges, np.arange(BATCH_EDGES, int(edges[-1]), BATCH_EDGES), side="left") + 1
        for part in np.split(piece, np.unique(cuts)):
            if len(part):
                yield part


def _edges(dump, heap: NativeHeap, index: ChunkIndex) -> tuple[np.ndarray, np.ndarray]:
    """The chunk graph as rows: (starts, targets) — chunk k's edges are ``targets[starts[k]:starts[k + 1]]``, the
    chunks a word of its user data points into (int32 both where they fit: 4 bytes a chunk and an edge)."""
    srcs, dsts = [], []
    lo, hi, word = np.uint64(index.lo), np.uint64(index.hi), np.uint64(index.word)
    spans = [(s, e) for a in heap.arenas for s, e in a.heaps]
    mm = heap.state == ch.MMAPPED
    spans += [(int(a), int(a + s)) for a, s in zip(heap.address[mm], heap.size[mm])]
    for s, e in sorted(spans):
        for addresses, values in _words(dump.memory, s, e, index.word):
            keep = (values >= lo) & (values < hi) & (values % word == 0)
            if not keep.any():
                continue
            addresses, values = addresses[keep], values[keep]
            source, target = index.lookup(addresses), index.lookup(values)
            ok = (source >= 0) & (target >= 0) & (source != target)
            srcs.append(source[ok].astype(np.int32))
            dsts.append(target[ok].astype(np.int32))
    from ..util.allocator import release_freed

    release_freed()  # the windows' temporaries: the rows are made next
    n = len(index)
    src = np.concatenate(srcs) if srcs else np.zeros(0, dtype=np.int32)
    del srcs
    order = None
    if len(src) > 1 and (src[1:] < src[:-1]).any():  # the spans are read in address order: sorted already
        order = np.argsort(src, kind="stable")
        src = src[order]
    # CSR row bounds from the sorted sources, a slice of rows at a time (no count array as long as the heap)
    starts = np.zeros(n + 1, dtype=np.int32 if len(src) < 2**31 else np.int64)
    for lo in range(0, n + 1, 1 << 16):
        hi = min(n + 1, lo + (1 << 16))
        starts[lo:hi] = np.searchsorted(src, np.arange(lo, hi, dtype=src.dtype), side="left")
    del src
    dst = np.concatenate(dsts) if dsts else np.zeros(0, dtype=np.int32)
    del dsts
    if order is not None:
        dst = dst[order]
    release_freed()  # the lists the rows were made from
    return starts, dst
