"""The fallback when the GC heap cannot be walked exactly: a checked scan for string objects.

Used for .NET Framework dumps, Mono, and partial (triage, truncated) dumps.  A naive "MethodTable pointer
followed by a sane length" scan finds thousands of false strings in runtime data structures, module images
and the dead memory past the heap's end, so the scan keeps to where GC objects can be and checks each
candidate:

- inside the GC's own bounds wherever its bookkeeping could be read (``GcHeap.bounds``: the segments it
  read, the ephemeral segment up to ``alloc_allocated``): the dead objects a compacting GC leaves past the
  allocation end are out, and so is native memory;
- not in a module image or a mapped file (String MethodTable values sit in CoreLib's data too);
- whole in the dump, with a zero terminator (and a zero header-padding DWORD on 64-bit);
- followed, at its aligned end, by another valid object (a known MethodTable, or in a partial dump a
  pointer-aligned value outside the dump), a zero gap, or the end of the mapped memory;
- preceded by an object of a known MethodTable that ends exactly where it starts, or by a zeroed gap, or
  at the start of its memory run.  MethodTables are learned from the data: the most frequent words that
  pass the structural check, the successors of string candidates, and round by round the words where
  known objects end (the next object's MethodTable: a big array's is learned from the object before it);
- packed as the GC packs objects: zeros lie only at an allocation context's end, so a candidate with a
  zeroed gap on both sides is a String MethodTable pointer in other memory, and an empty string (the
  runtime makes every one String.Empty) needs an object on both sides.  On Mono, where only String has a
  known size, the predecessor checks are left out.

Dead strings inside free objects (what a GC leaves between survivors) are rejected: the free-object
MethodTable is learned too, and every candidate inside a free object's span is dropped.  Without any of
the GC's bookkeeping (.NET Framework), dead objects past the allocation end cannot be told from live ones;
results are marked heuristic.
"""

from __future__ import annotations

import bisect
from collections import Counter
from collections.abc import Iterator

import numpy as np

from ..dump import DumpFile
from ..findings import Findings
from ..runtime.methodtable import MethodTables
from ..util.arrays import lookup
from ..util.ranges import merged, without

#: the largest object header (a bound's first object has its header before it)
HEADER_ROOM = 8
#: strings shorter than this are used to learn the String MethodTable
LEARN_MAX_LENGTH = 256


def _dtype(ptr: int, little: bool) -> np.dtype:
    return np.dtype(("<" if little else ">") + ("u8" if ptr == 8 else "u4"))


def _mt_mask(profile, dt: np.dtype):
    """The word mask that clears the GC bits of a MethodTable pointer."""
    return dt.type(((1 << (8 * profile.pointer_size)) - 1) ^ profile.object.method_table_unmask)


def scan_ranges(dump: DumpFile, bounds: list | None = None) -> Iterator[tuple[int, int]]:
    """The memory the dump holds that can hold GC objects, in address order: not a module image or a mapped
    file (a minidump's MemoryInfoList says which ranges are), and inside ``bounds``, the ranges the GC's
    bookkeeping allows (``GcHeap.bounds``: end None = as far as the memory the dump holds goes)."""
    space = dump.memory
    excluded = dump.file_backed_ranges()
    runs = list(space.iter_runs())
    if bounds is not None:  # (the first object's header lies before the first object: HEADER_ROOM bytes)
        allowed = merged([(lo - HEADER_ROOM, hi if hi is not None else space.mapped_end(lo)) for lo, hi in bounds])
        runs = [(max(a, lo), min(b, hi)) for a, b in runs for lo, hi in allowed if max(a, lo) < min(b, hi)]
    yield from without(runs, excluded)


def iter_words(dump: DumpFile, min_words: int = 1, bounds: list | None = None):
    """(range low, range high, window address, window data, head, words) over the scanned memory, the
    words pointer-sized and pointer-aligned (``head`` bytes of the window come before the first)."""
    ptr = dump.memory.pointer_size
    dt = _dtype(ptr, dump.memory.little_endian)
    for lo, hi in scan_ranges(dump, bounds):
        for addr, data in dump.memory.iter_windows(lo, hi, record=False):
            head = (-addr) % ptr
            n = (len(data) - head) // ptr
            if n >= min_words:
                yield lo, hi, addr, data, head, np.frombuffer(data, dtype=dt, count=n, offset=head)


def learn_string_method_table(dump: DumpFile, mts: MethodTables, bounds: list | None = None) -> int | None:
    p = mts.profile
    ptr = p.pointer_size
    dt = _dtype(ptr, dump.memory.little_endian)
    len_words = p.string.length_offset // 4
    counts: Counter = Counter()
    for _, _, _addr, data, head, words in iter_words(dump, 4, bounds):
        n = len(words)
        end = "<" if dump.memory.little_endian else ">"
        u32 = np.frombuffer(data, dtype=end + "u4", count=(n * ptr) // 4, offset=head)
        u16 = np.frombuffer(data, dtype=end + "u2", count=(n * ptr) // 2, offset=head)
        idx = np.arange(n - 2)
        length = u32[idx * (ptr // 4) + len_words]
        ok = (words[idx] != 0) & (words[idx] % ptr == 0) & (length > 0) & (length < LEARN_MAX_LENGTH)
        term = (idx * ptr + p.string.chars_offset) // 2 + length.astype(np.int64)
        ok &= term < len(u16)
        cand = idx[ok]
        term = term[ok]
        hit = u16[term] == 0
        # the first character is non-zero (most strings), which cuts out zero-filled structures
        first = u16[(cand * ptr + p.string.chars_offset) // 2]
        hit &= first != 0
        values = words[cand[hit]] & _mt_mask(p, dt)
        if len(values):
            uniq, cnt = np.unique(values, return_counts=True)
            top = np.argsort(cnt)[-64:]
            for v, c in zip(uniq[top], cnt[top]):
                counts[int(v)] += int(c)
    for value, _ in counts.most_common(64):
        if mts.is_string_method_table(value):
            return value
    return None


def learn_method_tables(dump: DumpFile, mts: MethodTables, top: int = 1024, bounds: list | None = None) -> int | None:
    """Validate the most frequent mapped, pointer-aligned words as MethodTables (they enter ``mts``);
    returns the free-object MethodTable if one of them is it."""
    p = mts.profile
    ptr = p.pointer_size
    starts = np.array([r.start for r in dump.memory.regions], dtype=np.uint64)
    ends = np.array([r.end for r in dump.memory.regions], dtype=np.uint64)
    counts: Counter = Counter()
    for _, _, _, _, _, words in iter_words(dump, 2, bounds):
        words = words.astype(np.uint64)
        words = words[(words != 0) & (words % ptr == 0)]
        i = np.searchsorted(starts, words, side="right") - 1
        mapped = (i >= 0) & (words < ends[np.maximum(i, 0)])
        uniq, cnt = np.unique(words[mapped], return_counts=True)
        order = np.argsort(cnt)[-top:]
        for v, c in zip(uniq[order], cnt[order]):
            counts[int(v)] += int(c)
    free = None
    for value, c in counts.most_common(top):
        if c < 2:
            break
        mt = mts.get(value)
        if mt is not None and mt.kind == "free" and free is None:
            free = value
    return free


def free_spans(dump: DumpFile, mts: MethodTables, free_mt: int, bounds: list | None = None) -> list[tuple[int, int]]:
    """Disjoint, sorted (start, end) ranges covered by free objects (found by their MethodTable): dead bytes."""
    p = mts.profile
    ptr = p.pointer_size
    space = dump.memory
    dt = _dtype(ptr, space.little_endian)
    spans = []
    for _, hi, addr, _, head, words in iter_words(dump, 1, bounds):
        for i in np.flatnonzero((words & _mt_mask(p, dt)) == free_mt):
            o = addr + head + int(i) * ptr
            ncomp = space.try_read_u32(o + ptr)
            if ncomp is None:
                continue
            end = o + p.align(3 * ptr + ncomp)
            if end <= hi:
                spans.append((o, end))
    # merge: stale free objects can lie inside live ones
    merged: list[tuple[int, int]] = []
    for lo, hi in sorted(spans):
        if merged and lo < merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], hi))
        else:
            merged.append((lo, hi))
    return merged


def _inside(spans: list, starts: list, address: int) -> bool:
    i = bisect.bisect_right(starts, address) - 1
    return i >= 0 and spans[i][0] < address < spans[i][1]


def iter_string_addresses(dump: DumpFile, mts: MethodTables, string_mt: int, findings: Findings,
                          bounds: list | None = None) -> Iterator[int]:
    """Addresses of string objects that pass the checks above, in address order (inside ``bounds``, the
    GC's ranges, where its bookkeeping could be read)."""
    p = mts.profile
    ptr = p.pointer_size
    space = dump.memory
    dt = _dtype(ptr, space.little_endian)
    unmask = ~p.object.method_table_unmask
    free_mt = mts.free_mt if mts.free_mt is not None else learn_method_tables(dump, mts, bounds=bounds)
    mts.free_mt = free_mt
    spans = free_spans(dump, mts, free_mt, bounds) if free_mt is not None else []
    span_starts = [s for s, _ in spans]
    # pass 1: candidates with a valid successor; the successors' MethodTables are learned on the way
    candidates = []
    for lo, hi, addr, _, head, words in iter_words(dump, 1, bounds):
        for i in np.flatnonzero((words & _mt_mask(p, dt)) == string_mt):
            o = addr + head + int(i) * ptr
            if o - p.object.header_size < lo or _inside(spans, span_starts, o):
                continue
            successor = _check_candidate(space, mts, o, hi, unmask, space.mapped_end(o))
            if successor is not None:
                candidates.append((o, lo, successor))
    # pass 2: a real object starts its memory run, follows a zeroed gap, or starts where a known object ends
    if p.method_table is None:  # Mono: no type but String has a known size, so no predecessor can be checked
        yield from (o for o, _, _ in candidates)
        return
    ends = _object_ends(dump, mts, {o for o, _, _ in candidates}, bounds)
    zero = b"\0" * ptr
    for o, lo, successor in candidates:
        start = o - p.object.header_size
        if start == lo or o in ends:
            before = "object"  # (or the start of the memory the dump holds: what came before is unknown)
        elif space.try_read(start - ptr, ptr) == zero:
            before = "object" if _preceded_by_object(space, mts, o, lo, unmask) else "zero"
        elif _preceded_by_object(space, mts, o, lo, unmask):
            before = "object"
        else:
            continue
        # the GC packs objects back to back: zeros lie only at the end of an allocation context, so a real
        # object has an object (or the unknown) on at least one side.  A string between two zeroed gaps is
        # a String MethodTable pointer in other memory (native structures hold them by the thousand).  And
        # the runtime makes every empty string String.Empty, one object among objects: an empty "string"
        # with a gap on either side is not a string.
        length = space.try_read_u32(o + p.string.length_offset)
        if before == "zero" and successor == "zero":
            continue
        if length == 0 and (before == "zero" or successor == "zero"):
            continue
        yield o


#: how far back the predecessor of a string candidate is looked for (_object_ends learns the MethodTables
#: of bigger predecessors from the objects before them)
PREDECESSOR_SEARCH = 4096
#: MethodTables probed at most while looking for one candidate's predecessor
PREDECESSOR_PROBES = 32


def _preceded_by_object(space, mts: MethodTables, o: int, lo: int, unmask: int) -> bool:
    """Is there, up to PREDECESSOR_SEARCH bytes below ``o``, an object with a valid MethodTable that ends
    exactly at ``o``?  (Finds predecessors of types too rare to be learned by frequency, a big array
    among them.)  Only values that could be MethodTables are probed (pointer-aligned and in the dump), the
    nearest first, at most PREDECESSOR_PROBES of them."""
    p = mts.profile
    ptr = p.pointer_size
    hs = p.object.header_size
    align = p.object.alignment - 1
    start = max(lo + hs, o - PREDECESSOR_SEARCH, space.mapped_start(o - 1))
    start += (-start) % ptr
    data = space.try_read(start, o - start) if o > start else None
    if data is None or len(data) < p.object.min_object_size - hs:
        return False
    dt = _dtype(ptr, space.little_endian)
    words = np.frombuffer(data, dtype=dt, count=len(data) // ptr) & dt.type(unmask & ((1 << 8 * ptr) - 1))
    maybe = np.flatnonzero((words != 0) & (words % ptr == 0))[::-1]  # nearest first
    values, first = np.unique(words[maybe], return_index=True)
    table = []
    for v in values[np.argsort(first, kind="stable")][:PREDECESSOR_PROBES].tolist():
        if space.region_at(v) is None:
            continue
        mt = mts.get(v)
        if mt is not None and mt.base_size:  # a type of unknown size (Mono) cannot end anywhere known
            table.append((v, mt))
    u32 = np.frombuffer(data, dtype=("<" if space.little_endian else ">") + "u4", count=len(data) // 4)
    for v, mt in table:
        at = np.flatnonzero(words == dt.type(v)).astype(np.int64)
        counts = u32.take((at * ptr + ptr) >> 2, mode="clip").astype(np.int64) if mt.component_size else 0
        size = np.maximum((mt.base_size + mt.component_size * counts + align) & ~align, p.object.min_object_size)
        if np.any(start + at * ptr + size == o):
            return True
    return False


#: rounds of learning MethodTables at object ends (each a pass over the scanned memory)
LEARN_ROUNDS = 4


def _object_ends(dump: DumpFile, mts: MethodTables, wanted: set, bounds: list | None = None) -> set:
    """Addresses in ``wanted`` where an object of a known MethodTable ends (its successor's address).

    Objects lie back to back, so the word where an object ends is the next object's MethodTable: each round
    validates the new values found there (a MethodTable too rare to be learned by frequency, such as a big
    array's, is learned from its predecessor) and goes again while it learned one."""
    p = mts.profile
    ptr = p.pointer_size
    space = dump.memory
    dt = _dtype(ptr, space.little_endian)
    want = np.array(sorted(wanted), dtype=np.uint64)
    align = p.object.alignment - 1
    end32 = "<u4" if space.little_endian else ">u4"
    found: set = set()
    for _ in range(LEARN_ROUNDS):
        known = {a: mt for a, mt in mts.known().items() if mt.base_size}
        if not known or not wanted:
            return set()
        table = np.array(sorted(known), dtype=np.uint64)
        base = np.array([known[a].base_size for a in sorted(known)], dtype=np.int64)
        comp = np.array([known[a].component_size for a in sorted(known)], dtype=np.int64)
        found = set()
        successors: set = set()
        for _, _, addr, data, head, raw in iter_words(dump, 2, bounds):
            n = len(raw)
            words = (raw & _mt_mask(p, dt)).astype(np.uint64)
            idx, hit = lookup(table, words)
            pos = np.flatnonzero(hit[:-1])
            if not len(pos):
                continue
            k = idx[pos]
            counts = np.frombuffer(data, dtype=end32, count=(n * ptr) // 4, offset=head)[(pos * ptr + ptr) // 4]
            size = base[k] + comp[k] * counts.astype(np.int64)
            offsets = pos.astype(np.int64) * ptr + np.maximum((size + align) & ~align, p.object.min_object_size)
            ends = np.uint64(addr + head) + offsets.astype(np.uint64)  # addresses may not fit int64
            found.update(ends[lookup(want, ends)[1]].tolist())
            inside = offsets[offsets < n * ptr] // ptr  # the successors' first words, in this window
            successors.update(np.unique(words[inside]).tolist())
        learned = False
        for value in sorted(successors - set(known)):
            if value and value % ptr == 0 and space.region_at(value) is not None and mts.get(value) is not None:
                learned = True
        if not learned:
            break
    return found


def _check_candidate(space, mts: MethodTables, o: int, region_end: int, unmask: int,
                     memory_end: int | None = None) -> str | None:
    """What follows a whole, terminated string candidate at its aligned end: "object" (a valid MethodTable,
    or in a partial dump one that is not in the dump), "zero" (a zeroed gap), "end" (the end of the range
    scanned); None when the candidate is not a plausible string.  ``memory_end``: how far the memory the
    candidate may take goes (the last object of a heap segment can start before the GC's recorded end and
    end after it, when the dump was taken in the middle of an allocation; default ``region_end``)."""
    memory_end = region_end if memory_end is None else max(region_end, memory_end)
    p = mts.profile
    ptr = p.pointer_size
    length = space.try_read_u32(o + p.string.length_offset)
    if length is None or length > space.limits.max_string_length:
        return None
    for large in (False, True):
        start = o - p.object.header_size
        size = p.string_aligned_size(length, large)
        if start + size > memory_end:
            continue
        term = space.try_read(o + p.string.chars_offset + 2 * length, 2)
        if term != b"\0\0":
            return None
        if p.object.header_size == 8 and space.try_read_u32(start) != 0:
            return None
        nxt = o + size
        if nxt + ptr > region_end:  # the end of the mapped memory
            return "end"
        word = space.try_read_pointer(nxt)
        if word is None:
            return "end"
        if word == 0:
            return "zero"
        if mts.get(word & unmask) is not None:
            return "object"
        if word % ptr == 0 and space.region_at(word & unmask) is None:
            return "object"  # a MethodTable that is not in the dump (partial dumps): cannot be disproved
        if not large and p.object.large_object_alignment == p.object.alignment:
            break
    return None
