"""The fallback when the GC heap's bounds cannot be found: a checked scan for string objects.

Used for .NET Framework dumps, server GC, regions and partial (triage) dumps.  A naive "MethodTable pointer
followed by a sane length" scan finds hundreds of false strings in runtime data structures and module
images, so every candidate must also:

- lie in anonymous memory, not in a module image (String MethodTable values sit in CoreLib's data too);
- be whole in the dump, with a zero terminator (and a zero header-padding DWORD on 64-bit);
- be followed, at its aligned end, by another valid object (a known MethodTable, or in a partial dump a
  pointer-aligned value outside the dump), a zero gap, or the end of the mapped memory;
- be preceded by an object of a known MethodTable that ends exactly where it starts, or by a zeroed gap,
  or start its memory run (MethodTables are learned from the successors of string candidates; on Mono,
  where only String has a known size, this check is left out).

What this cannot tell apart is a dead string whose bytes survive past the heap's allocated end from a live
one; results are marked heuristic.  Dead strings inside free objects (what a GC leaves between survivors)
are rejected: the free-object MethodTable is learned too, and every candidate inside a free object's span
is dropped.  The MethodTables are learned from the data: the most frequent first word of self-consistent
string candidates that passes the structural check, and the most frequent pointer-sized value that is a
free-object MethodTable.
"""

from __future__ import annotations

import bisect
from collections import Counter
from typing import Iterator

import numpy as np

from ..util.arrays import lookup
from ..findings import Findings
from ..runtime.methodtable import MethodTables
from ..dump import Dump

#: strings shorter than this are used to learn the String MethodTable
LEARN_MAX_LENGTH = 256


def _dtype(ptr: int, little: bool) -> np.dtype:
    return np.dtype(("<" if little else ">") + ("u8" if ptr == 8 else "u4"))


def _mt_mask(profile, dt: np.dtype):
    """The word mask that clears the GC bits of a MethodTable pointer."""
    return dt.type(((1 << (8 * profile.pointer_size)) - 1) ^ profile.object.method_table_unmask)


def scan_ranges(dump: Dump) -> Iterator[tuple[int, int]]:
    """Mapped memory that is not part of a module image."""
    images = sorted((m.base, m.end) for m in dump.modules)
    for start, end in dump.memory.iter_runs():
        pos = start
        for lo, hi in images:
            if hi <= pos or lo >= end:
                continue
            if lo > pos:
                yield pos, lo
            pos = max(pos, hi)
        if pos < end:
            yield pos, end


def iter_words(dump: Dump, min_words: int = 1):
    """(range low, range high, window address, window data, head, words) over the scanned memory, the
    words pointer-sized and pointer-aligned (``head`` bytes of the window come before the first)."""
    ptr = dump.memory.pointer_size
    dt = _dtype(ptr, dump.memory.little_endian)
    for lo, hi in scan_ranges(dump):
        for addr, data in dump.memory.iter_windows(lo, hi, record=False):
            head = (-addr) % ptr
            n = (len(data) - head) // ptr
            if n >= min_words:
                yield lo, hi, addr, data, head, np.frombuffer(data, dtype=dt, count=n, offset=head)


def learn_string_method_table(dump: Dump, mts: MethodTables) -> int | None:
    p = mts.profile
    ptr = p.pointer_size
    dt = _dtype(ptr, dump.memory.little_endian)
    len_words = p.string.length_offset // 4
    counts: Counter = Counter()
    for _, _, addr, data, head, words in iter_words(dump, 4):
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


def learn_method_tables(dump: Dump, mts: MethodTables, top: int = 1024) -> int | None:
    """Validate the most frequent mapped, pointer-aligned words as MethodTables (they enter ``mts``);
    returns the free-object MethodTable if one of them is it."""
    p = mts.profile
    ptr = p.pointer_size
    starts = np.array([r.start for r in dump.memory.regions], dtype=np.uint64)
    ends = np.array([r.end for r in dump.memory.regions], dtype=np.uint64)
    counts: Counter = Counter()
    for _, _, _, _, _, words in iter_words(dump, 2):
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


def free_spans(dump: Dump, mts: MethodTables, free_mt: int) -> list[tuple[int, int]]:
    """Disjoint, sorted (start, end) ranges covered by free objects (found by their MethodTable): dead bytes."""
    p = mts.profile
    ptr = p.pointer_size
    space = dump.memory
    dt = _dtype(ptr, space.little_endian)
    spans = []
    for _, hi, addr, _, head, words in iter_words(dump):
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


def iter_string_addresses(dump: Dump, mts: MethodTables, string_mt: int, findings: Findings) -> Iterator[int]:
    """Addresses of string objects that pass the checks above, in address order."""
    p = mts.profile
    ptr = p.pointer_size
    space = dump.memory
    dt = _dtype(ptr, space.little_endian)
    unmask = ~p.object.method_table_unmask
    free_mt = mts.free_mt if mts.free_mt is not None else learn_method_tables(dump, mts)
    mts.free_mt = free_mt
    spans = free_spans(dump, mts, free_mt) if free_mt is not None else []
    span_starts = [s for s, _ in spans]
    # pass 1: candidates with a valid successor; the successors' MethodTables are learned on the way
    candidates = []
    for lo, hi, addr, _, head, words in iter_words(dump):
        for i in np.flatnonzero((words & _mt_mask(p, dt)) == string_mt):
            o = addr + head + int(i) * ptr
            if o - p.object.header_size < lo or _inside(spans, span_starts, o):
                continue
            if _check_candidate(space, mts, o, hi, unmask):
                candidates.append((o, lo))
    # pass 2: a real object starts its memory run, follows a zeroed gap, or starts where a known object ends
    if p.method_table is None:  # Mono: no type but String has a known size, so no predecessor can be checked
        yield from (o for o, _ in candidates)
        return
    ends = _object_ends(dump, mts, {o for o, _ in candidates})
    for o, lo in candidates:
        start = o - p.object.header_size
        if start == lo or o in ends:
            yield o
            continue
        before = space.try_read(start - ptr, ptr)
        if before == b"\0" * ptr or _preceded_by_object(space, mts, o, lo, unmask):
            yield o


#: how far back the predecessor of a string candidate is looked for
PREDECESSOR_SEARCH = 1024


def _preceded_by_object(space, mts: MethodTables, o: int, lo: int, unmask: int) -> bool:
    """Is there, up to PREDECESSOR_SEARCH bytes below ``o``, an object with a valid MethodTable that ends
    exactly at ``o``?  (Finds predecessors of types too rare to be learned by frequency.)"""
    p = mts.profile
    ptr = p.pointer_size
    align = p.object.alignment - 1
    start = max(lo + p.object.header_size, o - PREDECESSOR_SEARCH)
    data = space.try_read(start, o - start)
    if data is None:
        return False
    for off in range(len(data) - p.object.min_object_size + p.object.header_size, -1, -ptr):
        q = start + off
        if (q - start) % ptr:
            continue
        word = space.unpack_pointer(data, off) & unmask
        if not word:
            continue
        mt = mts.get(word)
        if mt is None or not mt.base_size:  # a type of unknown size (Mono) cannot end anywhere known
            continue
        n = int.from_bytes(data[off + ptr : off + ptr + 4], "little") if mt.component_size and off + ptr + 4 <= len(data) else 0
        size = max((mt.object_size(n) + align) & ~align, p.object.min_object_size)
        if q + size == o:
            return True
    return False


def _object_ends(dump: Dump, mts: MethodTables, wanted: set) -> set:
    """Addresses in ``wanted`` where an object of a known MethodTable ends (its successor's address)."""
    p = mts.profile
    ptr = p.pointer_size
    space = dump.memory
    dt = _dtype(ptr, space.little_endian)
    known = {a: mt for a, mt in mts.known().items() if mt.base_size}
    if not known or not wanted:
        return set()
    table = np.array(sorted(known), dtype=np.uint64)
    base = np.array([known[a].base_size for a in sorted(known)], dtype=np.int64)
    comp = np.array([known[a].component_size for a in sorted(known)], dtype=np.int64)
    want = np.array(sorted(wanted), dtype=np.uint64)
    align = p.object.alignment - 1
    found: set = set()
    end32 = "<u4" if space.little_endian else ">u4"
    for _, _, addr, data, head, raw in iter_words(dump, 2):
        n = len(raw)
        words = (raw & _mt_mask(p, dt)).astype(np.uint64)
        idx, hit = lookup(table, words)
        pos = np.flatnonzero(hit[:-1])
        if not len(pos):
            continue
        k = idx[pos]
        counts = np.frombuffer(data, dtype=end32, count=(n * ptr) // 4, offset=head)[(pos * ptr + ptr) // 4]
        size = base[k] + comp[k] * counts.astype(np.int64)
        size = np.maximum((size + align) & ~align, p.object.min_object_size)
        ends = np.uint64(addr + head) + (pos.astype(np.int64) * ptr + size).astype(np.uint64)  # addresses may not fit int64
        found.update(int(e) for e in ends[np.isin(ends, want)])
    return found


def _check_candidate(space, mts: MethodTables, o: int, region_end: int, unmask: int) -> bool:
    p = mts.profile
    ptr = p.pointer_size
    length = space.try_read_u32(o + p.string.length_offset)
    if length is None or length > space.limits.max_string_length:
        return False
    for large in (False, True):
        start = o - p.object.header_size
        size = p.string_aligned_size(length, large)
        if start + size > region_end:
            continue
        term = space.try_read(o + p.string.chars_offset + 2 * length, 2)
        if term != b"\0\0":
            return False
        if p.object.header_size == 8 and space.try_read_u32(start) != 0:
            return False
        nxt = o + size
        if nxt + ptr > region_end:  # the end of the mapped memory
            return True
        word = space.try_read_pointer(nxt)
        if word is None:
            return True
        if word == 0 or mts.get(word & unmask) is not None:
            return True
        if word % ptr == 0 and space.region_at(word & unmask) is None:
            return True  # a MethodTable that is not in the dump (partial dumps): cannot be disproved
        if not large and p.object.large_object_alignment == p.object.alignment:
            break
    return False
