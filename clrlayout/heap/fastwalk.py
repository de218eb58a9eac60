"""The heap walk, vectorised: the same objects as :class:`~clrlayout.heap.HeapWalker`, at numpy speed.

A walk is a chain (``next = o + Align(size(o))``) and cannot be computed in parallel directly.  But almost
every object starts with a MethodTable the walk has already seen.  So for a window of memory:

1. every word that is a known MethodTable is a *candidate* object start (a range test, then an exact
   ``searchsorted`` membership test);
2. each candidate's aligned size, and so its successor, is computed at once;
3. the chain is followed a *run* at a time: consecutive candidates whose successor is the next candidate
   are accepted together, and Python only steps in at the breaks -- a successor that is a later candidate
   (a MethodTable value held as data inside an object), a zeroed gap, a MethodTable not seen before
   (validated, learned, and the window recomputed), a bad object (a finding, then a resync), or the end of
   the window.

Memory is read one window at a time (``scan_window``), so the memory used stays bounded whatever the dump's
size.  Windows have fixed bounds in each segment (``start + k * window``), so that a window's walk can also
start from a *guess* of its first object (:meth:`FastWalker.guess`), which ``parallel.py`` checks against
the real cursor.  The reference walker (``heap.py``) stays the specification; tests compare the two object
by object.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np

from ..dump.addrspace import AddressSpace
from ..findings import FindingKind, Findings
from ..runtime.methodtable import MethodTables
from ..util.arrays import lookup, positions
from .segments import Segment

TAIL = 4096  # bytes read past a window, so that its last objects are in the buffer (their fixed fields
# must be; a string whose characters are not is read again on its own, see batches.batch_from_window)
LEARN_SPAN = 256 * 1024  # after learning a MethodTable, candidates are first recomputed this far
MAX_HIGHS = 4  # MethodTables in more loader-heap regions than this: a range test instead
GUESS_SPAN = 16 * 1024  # a guess walks from the first known MethodTable this far before the window


@dataclass
class WindowObjects:
    """The objects of one window: their offsets in ``data`` (which starts at address ``base``)."""

    base: int
    data: bytes
    offsets: np.ndarray  # int64, object pointer - base
    method_tables: np.ndarray  # uint64
    counts: np.ndarray  # int64, NumComponents (0 for types without components)
    aligned: np.ndarray  # int64, aligned sizes
    segment: Segment


class _Table:
    """The known MethodTables as sorted arrays.  A walk that meets a new MethodTable adds those learned since
    (each inserted at its place: an app with thousands of types learns them one by one, and a rebuild each time
    costs the square of their number)."""

    def __init__(self, mts: MethodTables):
        self.mts = mts
        self.addresses = np.zeros(0, dtype=np.uint64)
        self.base = np.zeros(0, dtype=np.int64)
        self.comp = np.zeros(0, dtype=np.int64)
        self._seen = 0  # how many of mts.learned are in the arrays
        self._highs: set[int] = set()
        self.refresh()

    def refresh(self) -> None:
        """Take in the MethodTables learned since the last call (all of them, where the cache keeps no order)."""
        mts = self.mts
        learned = getattr(mts, "learned", None)
        if learned is None:
            known = mts.known()
            new, self.addresses = sorted(known), np.zeros(0, dtype=np.uint64)
            self.base, self.comp, self._highs = np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64), set()
        else:
            new, self._seen = sorted(learned[self._seen:]), len(learned)
            known = {a: mts.get(a) for a in new}
        add = np.array(new, dtype=np.uint64)
        at = np.searchsorted(self.addresses, add)
        self.addresses = np.insert(self.addresses, at, add)
        self.base = np.insert(self.base, at, np.array([known[a].base_size for a in new], dtype=np.int64))
        self.comp = np.insert(self.comp, at, np.array([known[a].component_size for a in new], dtype=np.int64))
        self.size = len(self.addresses)
        self.lo = int(self.addresses[0]) if self.size else 1
        self.hi = int(self.addresses[-1]) if self.size else 0
        # the upper 32-bit halves of the MethodTable words (with their GC bits): MethodTables live in a
        # few loader-heap regions, so this is a short list, and an exact test of a word's upper half
        gc = mts.profile.object.method_table_unmask
        self._highs |= {a >> 32 for a in new} | {(a + gc) >> 32 for a in new}
        self.highs = sorted(self._highs)
        self.common: int | None = None  # the index of the MethodTable most candidates had last time

    def find(self, values: np.ndarray) -> tuple[np.ndarray, np.ndarray, int | None]:
        """:func:`~clrlayout.arrays.lookup` of ``values`` in ``addresses``, and the index all of them have
        when they are all that one MethodTable (else None).  Most objects of a heap region share one
        MethodTable (a string heap is nearly all strings), so those are told apart with one comparison and
        only the rest are searched."""
        c = self.common
        if c is not None:
            same = values == self.addresses[c]
            hits = int(np.count_nonzero(same))
            if 2 * hits > len(values):
                k = np.full(len(values), c, dtype=np.intp)
                if hits == len(values):
                    return k, same, c
                rest = np.flatnonzero(~same)  # few
                k[rest], same[rest] = lookup(self.addresses, values[rest])
                return k, same, None
        k, ok = lookup(self.addresses, values)
        counts = np.bincount(k[ok], minlength=self.size)
        self.common = int(counts.argmax()) if len(counts) and counts.max() else None
        return k, ok, None


Cursor = tuple  # (segment index, address of the object a step starts at)


class HeapSteps:
    """A whole heap's walk as steps from cursor to cursor, each step one window of :meth:`FastWalker.step`.

    A window is named by a key ``(segment index, k)``: the objects that start in
    ``[start + k * window, start + (k + 1) * window)`` of that segment."""

    def __init__(self, walker: FastWalker, segments):
        self.walker = walker
        self.segments = list(segments)
        self.size = walker.space.limits.window

    def first(self) -> Cursor | None:
        return self._normal(0, self.segments[0].start if self.segments else None)

    def run(self, cursor: Cursor, findings: Findings | None = None) -> tuple[WindowObjects | None, Cursor | None]:
        """One step: its objects (None: none) and the next cursor (None: the walk is over).  ``findings``
        receives the step's findings instead of the walker's own."""
        index, pos = cursor
        saved = self.walker.findings
        if findings is not None:
            self.walker.findings = findings
        try:
            win, nxt = self.walker.step(self.segments[index], pos)
        finally:
            self.walker.findings = saved
        return win, self._normal(index, nxt)

    def windows(self) -> Iterator[WindowObjects]:
        """Every window that holds objects, in heap order."""
        cursor = self.first()
        while cursor is not None:
            win, cursor = self.run(cursor)
            if win is not None:
                yield win

    # --- windows by key, for walks that start from a guess (parallel.py) --------------------------------

    def key(self, cursor: Cursor) -> tuple[int, int]:
        """The key of the window that a step from ``cursor`` walks."""
        index, pos = cursor
        return index, (pos - self.segments[index].start) // self.size

    def plan(self) -> Iterator[tuple[int, int]]:
        """The keys of the windows that hold dump memory, in heap order (a heap's walk can only find objects
        there; the rest it steps over)."""
        space = self.walker.space
        for index, seg in enumerate(self.segments):
            last = -1
            at = seg.start
            while at < seg.end:
                region = space.next_region(at)
                if region is None or region.start >= seg.end:
                    break
                at = max(at, region.start)
                end = min(space.mapped_end(at), seg.end)
                for k in range(max(last + 1, (at - seg.start) // self.size), (end - 1 - seg.start) // self.size + 1):
                    yield index, k
                    last = k
                at = end

    def guess(self, key: tuple[int, int]) -> Cursor | None:
        """Where the walk most likely enters window ``key`` (a segment's first window: exactly)."""
        index, k = key
        seg = self.segments[index]
        if k == 0:
            return index, seg.start
        pos = self.walker.guess(seg, seg.start + k * self.size)
        return None if pos is None else (index, pos)

    def _normal(self, index: int, pos: int | None) -> Cursor | None:
        while index < len(self.segments) and (pos is None or pos >= self.segments[index].end):
            index += 1
            pos = self.segments[index].start if index < len(self.segments) else None
        return None if index >= len(self.segments) else (index, pos)


class FastWalker:
    def __init__(self, space: AddressSpace, mts: MethodTables, findings: Findings | None = None,
                 progress: Callable[[int], None] | None = None):
        self.space = space
        self.mts = mts
        self.profile = mts.profile
        self.findings = findings if findings is not None else Findings(space.limits.max_findings)
        self.progress = progress
        ptr = space.pointer_size
        e = "<" if space.little_endian else ">"
        self.word = np.dtype(e + ("u8" if ptr == 8 else "u4"))
        self.u32 = np.dtype(e + "u4")
        self._table: _Table | None = None
        self._table_size = -1

    def table(self) -> _Table:
        if self._table is None:
            self._table = _Table(self.mts)
            self._table_size = self.mts.valid_count
        elif self._table_size != self.mts.valid_count:
            self._table.refresh()
            self._table_size = self.mts.valid_count
        return self._table

    # --- public ----------------------------------------------------------------------------------

    def iter_windows(self, segments) -> Iterator[WindowObjects]:
        return HeapSteps(self, segments).windows()

    def step(self, seg: Segment, pos: int) -> tuple[WindowObjects | None, int | None]:
        """Walk the rest of the window of ``seg`` that holds ``pos``, from the object at ``pos``: its objects
        (None: none), and where the walk goes on (None: the segment is done).  What a step finds depends
        only on ``(seg, pos)``, so a step may be walked by another process or ahead of time
        (``parallel.py``)."""
        p = self.profile
        hs = p.object.header_size
        ptr = p.pointer_size
        size = self.space.limits.window
        limit = min(seg.end, seg.start + ((pos - seg.start) // size + 1) * size)
        head = pos - hs  # where the first object's bytes begin
        # a copy, not a map of the file: copying 4 MiB from the page cache into memory that glibc reuses
        # (util.allocator) costs less than mapping its 1,024 pages, and leaves the bytes in the CPU's cache
        # for the passes that follow (`stats` 13% faster on the benchmark dumps)
        data = self.space.read_available(head, limit + TAIL - head)
        if len(data) < min(hs + 2 * ptr, seg.end - head):  # not even its fixed fields
            return None, self._missing(pos, seg)
        result, nxt = self._window(seg, head, data, pos, limit)
        if self.progress is not None:
            self.progress(min(nxt if nxt is not None else seg.end, seg.end) - pos)
        if result is None or not len(result.offsets):
            return None, nxt
        return result, nxt

    def guess(self, seg: Segment, lo: int) -> int | None:
        """The first object at or after ``lo`` (a window's bound), as a short walk finds it: from the first
        known MethodTable in the GUESS_SPAN bytes before ``lo``.  Only a guess (a MethodTable value held as
        data looks like an object too), which ``parallel.py`` checks; None: no guess."""
        p = self.profile
        hs, ptr = p.object.header_size, p.pointer_size
        start = max(seg.start, lo - GUESS_SPAN)
        base = start - hs
        data = self.space.read_available(base, min(seg.end, lo + GUESS_SPAN) + TAIL - base)
        usable = len(data) - len(data) % ptr
        t = self.table()
        if base % ptr or usable < hs + 2 * ptr or not t.size:
            return None
        words = np.frombuffer(data, dtype=self.word, count=usable // ptr)[hs // ptr :]
        m = words & self.word.type(~p.object.method_table_unmask & ((1 << (8 * ptr)) - 1))
        hits = np.flatnonzero(lookup(t.addresses, m)[1])
        if not len(hits):
            return None
        first = start + int(hits[0]) * ptr
        if first >= lo:
            return first
        saved, self.findings = self.findings, Findings(0)
        try:
            return self._window(seg, base, data, first, lo, far=False)[1]
        finally:
            self.findings = saved

    # --- one window ------------------------------------------------------------------------------

    def _window(self, seg: Segment, base: int, data: bytes, pos: int, limit: int, far: bool = True):
        """Objects starting in [pos, limit); returns them and where the walk goes on (None: segment done;
        also, without ``far``, when the next object is not in ``data``)."""
        p = self.profile
        ptr = p.pointer_size
        align = (p.object.large_object_alignment if seg.large else p.object.alignment) - 1
        min_size = p.object.min_object_size
        unmask = ~p.object.method_table_unmask & ((1 << (8 * ptr)) - 1)
        seg_end = seg.end - base
        stop = limit - base
        usable = len(data) - len(data) % ptr
        words = np.frombuffer(data, dtype=self.word, count=usable // ptr)
        u32 = np.frombuffer(data, dtype=self.u32, count=len(data) // 4)
        shift = (base % ptr)  # base is aligned whenever objects are (they are pointer-aligned)
        if shift:
            raise ValueError("unaligned window")
        # the chain so far, as slices of the candidate arrays (indices would go stale when a newly learned
        # MethodTable makes the arrays be recomputed)
        parts: list[tuple] = []

        def take(a: int, b: int) -> None:
            parts.append((offs[a : b + 1], mtv[a : b + 1], counts[a : b + 1], aligned[a : b + 1]))

        wtype = words.dtype.type
        gc_bits = p.object.method_table_unmask

        little = (words.dtype.byteorder in ("<", "=") and np.little_endian) or words.dtype.byteorder == "<"

        computed = 0  # candidates are known for the words before this byte offset

        def candidates(start: int = 0, span: int | None = None):
            """Candidate arrays for the words from byte offset ``start`` on (``span``: only that many bytes)."""
            nonlocal computed
            t = self.table()
            first = start // ptr
            last = len(words) if span is None else min(len(words), (start + span) // ptr)
            computed = last * ptr
            view = words[first:last]
            if not t.size:
                idx = np.zeros(0, dtype=np.int64)
            elif ptr == 8 and little and len(t.highs) <= MAX_HIGHS:
                # an exact test of the upper 32-bit half: one comparison per loader-heap region, over both
                # halves of every word (contiguous, which numpy does several times faster than every other
                # half); then each word's two flags read as one little-endian 16-bit number: > 1 when the
                # upper half matched
                halves = np.frombuffer(data, dtype=self.u32, count=2 * len(words))[2 * first : 2 * last]
                hit = halves == np.uint32(t.highs[0])
                for h in t.highs[1:]:
                    hit |= halves == np.uint32(h)
                idx = positions(hit.view("<u2") > 1)
            else:
                # words in [lo, hi + GC bits]: one subtraction and one unsigned comparison
                idx = positions((view - wtype(t.lo)) <= wtype(t.hi + gc_bits - t.lo))
            m = view.take(idx) & wtype(unmask)
            k, ok, single = t.find(m)
            if not ok.all():
                idx, k = idx[ok], k[ok]
            if first:
                idx = idx + first
            offs = idx.astype(np.int64) * ptr
            counts = u32.take((offs + ptr) >> 2, mode="clip").astype(np.int64)  # the length follows the MT
            if len(offs) and int(offs[-1]) + ptr + 4 > len(u32) * 4:  # a length past the buffer: none
                counts[offs + ptr + 4 > len(u32) * 4] = 0
            if single is None:
                comp = t.comp.take(k)
                counts[comp == 0] = 0
                size = t.base.take(k) + comp * counts
                mtv = t.addresses.take(k)
            else:  # every candidate has the one MethodTable (a window of a string heap)
                comp = int(t.comp[single])
                if not comp:
                    counts[:] = 0
                size = int(t.base[single]) + comp * counts
                mtv = np.full(len(offs), t.addresses[single])
            aligned = np.maximum((size + align) & ~align, min_size)
            nxt = offs + aligned
            # a run continues while each object ends where the next candidate starts
            consecutive = np.zeros(len(offs), dtype=bool)
            consecutive[:-1] = nxt[:-1] == offs[1:]
            breaks = np.flatnonzero(~consecutive)
            return offs, mtv, counts, aligned, nxt, breaks

        offs, mtv, counts, aligned, nxt, breaks = candidates()
        full = len(words) * ptr
        walkers = []  # the reference walker, made when an anomaly needs it

        def ref():
            if not walkers:
                walkers.append(self._reference())
            return walkers[0]

        def resync(start: int) -> int | None:
            """The next plausible object at or after byte offset ``start``, as an address (None: the segment
            is done; without ``far``, also when it is not in this window)."""
            found = ref().next_object(data, base, base + start, base + stop, seg)
            if found is None and far:
                found = ref()._resync(base + max(start, min(stop, full)), seg.end, seg)
            return found

        cur = pos - base
        while cur is not None and cur < stop:
            if cur >= computed and computed < full:  # past a short look-ahead: the rest of the window
                offs, mtv, counts, aligned, nxt, breaks = candidates(cur)
            i = int(np.searchsorted(offs, cur))
            if i < len(offs) and offs[i] == cur:
                b = int(breaks[np.searchsorted(breaks, i)])  # the last index has no successor: always a break
                # the run is cut first at the window's end (never past the segment's end): candidates
                # after it are the next window's, or stale bytes past the segment (the gen0 tail beyond
                # alloc_allocated often holds old objects back to back with the last live one)
                cut = int(np.searchsorted(offs, stop, side="left"))
                # objects that start in the window must end inside the segment: one that does not is
                # corrupt (a bad length); the walk resumes at the next plausible object
                over = np.flatnonzero(nxt[i : min(b, cut - 1) + 1] > seg_end)
                if len(over):
                    j = i + int(over[0])
                    if j > i:
                        take(i, j - 1)
                    found = resync(int(offs[j]) + ptr)
                    ref().past_end(base + int(offs[j]), int(aligned[j]), found, seg)
                    cur = None if found is None else found - base
                    if cur is not None and cur < stop and self.mts.valid_count != self._table_size:
                        offs, mtv, counts, aligned, nxt, breaks = candidates(cur)
                    continue
                if b >= cut:  # the run goes past this window: keep the part that starts in it
                    if cut > i:
                        take(i, cut - 1)
                    cur = int(offs[cut]) if cut < len(offs) else int(nxt[b])
                    break
                take(i, b)
                cur = int(nxt[b])
                continue
            # not a known object start: a gap, a new MethodTable, or a bad object
            if cur + ptr > len(data) - (len(data) % ptr):
                break  # past the buffer: the next window starts here
            raw = int(words[cur // ptr])
            if raw and self.mts.get(raw & unmask) is not None:
                # a valid MethodTable not seen before: learn it, recompute from here (a short look-ahead
                # first: the first windows learn dozens of MethodTables in a row)
                offs, mtv, counts, aligned, nxt, breaks = candidates(cur, LEARN_SPAN)
                continue
            found = resync(cur + ptr)
            if raw:
                ref().bad_object(base + cur, raw, found, seg)
            cur = None if found is None else found - base
            if cur is not None and cur < stop and self.mts.valid_count != self._table_size:
                offs, mtv, counts, aligned, nxt, breaks = candidates(cur)

        next_pos = None if cur is None else base + cur
        if next_pos is not None and next_pos >= seg.end:
            next_pos = None
        if not parts:
            return None, next_pos
        cat = parts[0] if len(parts) == 1 else [np.concatenate([x[n] for x in parts]) for n in range(4)]
        return WindowObjects(base, data, *cat, seg), next_pos

    def _reference(self):
        """The per-object walker over the same memory, MethodTables and findings: the one place that
        decides where a walk resumes after an anomaly, and how the anomaly is reported."""
        from .walk import HeapWalker

        return HeapWalker(self.space, self.mts, self.findings)

    def _missing(self, pos: int, seg: Segment) -> int | None:
        w = self._reference()
        nxt = w._next_mapped(pos, seg.end)
        self.findings.add(FindingKind.MEMORY_MISSING, pos,
                          f"heap memory {pos:#x}-{(nxt or seg.end):#x} is not in the dump")
        if nxt is None:
            return None
        return w._resync(nxt, seg.end, seg)
