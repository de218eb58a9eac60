"""What glibc itself would report of a native heap, computed from the chunks and lists found: ``mallinfo2()``
(``int_mallinfo`` summed over arenas), each arena's ``malloc_info`` totals, and what clrlayout adds: per arena the
chunks in use and in the tcache, what is free at the top (returnable) and under live chunks (trapped), size
classes, the mmapped chunks.  Numbers only; the presenters format them."""

from __future__ import annotations

import numpy as np

from . import chunks as ch
from .arenas import NativeHeap

MALLINFO = ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks",
            "keepcost")
PAGE = 4096


def _count(mask: np.ndarray, sizes: np.ndarray) -> dict:
    return {"count": int(mask.sum()), "bytes": int(sizes[mask].sum())}


def mallinfo(heap: NativeHeap) -> dict | None:
    """``mallinfo2()``'s ten fields, or None when the dump lacks what they need (main_arena, mp_)."""
    if heap.main_arena is None or heap.mp is None:
        return None
    m = dict.fromkeys(MALLINFO, 0)
    for a in heap.arenas:
        top = _top_size(heap, a)
        avail = top + a.fast[1] + a.bins[1]
        m["arena"] += a.system_mem
        m["ordblks"] += 1 + a.bins[0]
        m["smblks"] += a.fast[0]
        m["fsmblks"] += a.fast[1]
        m["fordblks"] += avail
        m["uordblks"] += a.system_mem - avail
        if a.main:
            m["keepcost"] = top
    m["hblks"] = heap.par.get("n_mmaps", 0)
    m["hblkhd"] = heap.par.get("mmapped_mem", 0)
    return m


def _top_size(heap: NativeHeap, arena) -> int:
    hit = (heap.state == ch.TOP) & (heap.arena == arena.index)
    return int(heap.size[hit].sum())


def arena_rows(heap: NativeHeap) -> list[dict]:
    rows = []
    for a in heap.arenas:
        mine = heap.arena == a.index
        size = heap.size
        top = _top_size(heap, a)
        state = heap.state
        free_lists = mine & np.isin(state, (ch.TCACHE, ch.FASTBIN, ch.BIN))
        bins = mine & (state == ch.BIN)
        # whole pages inside free bin chunks: what malloc_trim can give back without moving anything
        starts = (heap.address[bins] + np.uint64(32) + np.uint64(PAGE - 1)) // np.uint64(PAGE) * np.uint64(PAGE)
        ends = (heap.address[bins] + size[bins]) // np.uint64(PAGE) * np.uint64(PAGE)
        trim = int(np.where(ends > starts, ends - starts, 0).sum())
        rows.append({
            "address": a.address, "main": a.main, "threads": list(a.threads), "heaps": len(a.heaps),
            "heap_ranges": [[s, e] for s, e in a.heaps],
            "system_bytes": a.system_mem, "max_system_bytes": a.max_system_mem,
            "in_use": _count(mine & (state == ch.IN_USE), size),
            "tcache": _count(mine & (state == ch.TCACHE), size),
            "fastbins": {"count": a.fast[0], "bytes": a.fast[1]},
            "bins": {"count": 1 + a.bins[0], "bytes": top + a.bins[2]},
            "bins_only": {"count": a.bins[0], "bytes": a.bins[1]},
            "top_bytes": top,
            "overhead_bytes": int(size[mine & (state == ch.ARENA)].sum()),
            "free": {"at_top": top, "trapped": int(size[free_lists].sum()), "trim_releasable": trim},
            "readable": a.readable,
        })
    return rows


#: chunks looked at a time where a figure needs temporaries per chunk (bounded memory)
SLICE = 1 << 18
_POWERS = np.uint64(1) << np.arange(64, dtype=np.uint64)


def size_classes(heap: NativeHeap, arena: int | None = None) -> list[dict]:
    """Chunks by size class (powers of two of the chunk size), in use and free (tcache, fastbins, bins), counted a
    slice of the chunks at a time."""
    counts = np.zeros(128, dtype=np.int64)
    sums = np.zeros(128, dtype=np.int64)
    for at in range(0, len(heap.size), SLICE):
        state = heap.state[at:at + SLICE]
        mask = np.isin(state, (ch.IN_USE, ch.TCACHE, ch.FASTBIN, ch.BIN, ch.MMAPPED))
        if arena is not None:
            mask &= heap.arena[at:at + SLICE] == arena
        size = heap.size[at:at + SLICE][mask]
        bucket = np.searchsorted(_POWERS, np.maximum(size, np.uint64(1)), side="right") - 1
        key = bucket * 2 + np.isin(state[mask], (ch.IN_USE, ch.MMAPPED))
        counts += np.bincount(key, minlength=128)
        for k in np.flatnonzero(np.bincount(key, minlength=128)):  # exact sums (no float weights)
            sums[k] += int(size[key == k].sum())
    rows = []
    for b in range(64):
        if counts[2 * b] or counts[2 * b + 1]:
            rows.append({"from": 1 << b, "to": (1 << (b + 1)) - 1,
                         "in_use": {"count": int(counts[2 * b + 1]), "bytes": int(sums[2 * b + 1])},
                         "free": {"count": int(counts[2 * b]), "bytes": int(sums[2 * b])}})
    return rows


def mmapped(heap: NativeHeap) -> dict:
    mask = heap.state == ch.MMAPPED
    out = _count(mask, heap.size)
    out["bytes"] += heap.mmapped_leads  # the whole mappings, as glibc's mmapped_mem counts them
    if heap.mp is not None:
        out["glibc_count"] = heap.par.get("n_mmaps", 0)
        out["glibc_bytes"] = heap.par.get("mmapped_mem", 0)
    return out


def totals(heap: NativeHeap) -> dict:
    state, size = heap.state, heap.size
    return {"arenas": len(heap.arenas), "chunks": len(size),
            "system_bytes": sum(a.system_mem for a in heap.arenas),
            "in_use": _count(state == ch.IN_USE, size), "tcache": _count(state == ch.TCACHE, size),
            "fastbins": _count(state == ch.FASTBIN, size), "bins": _count(state == ch.BIN, size),
            "top_bytes": int(size[state == ch.TOP].sum()), "overhead_bytes": int(size[state == ch.ARENA].sum()),
            "mmapped": mmapped(heap)}


def check(heap: NativeHeap) -> None:
    """glibc's own counters against what was found: each arena's chunks cover its system_mem; the mmapped
    chunks are mp_'s count and bytes.  A difference is a finding (the answer is then not exact)."""
    from ..findings import FindingKind

    for a in heap.arenas:
        if not a.readable or not a.heaps:
            continue
        covered = int(heap.size[(heap.arena == a.index) & (heap.state != ch.MMAPPED)].sum())
        if covered != a.system_mem:
            heap.findings.add(FindingKind.NATIVE_MISMATCH, a.address, f"the arena's chunks cover {covered:,} bytes, "
                                                                      f"its system_mem says {a.system_mem:,}")
    if heap.mp is not None:
        found = mmapped(heap)
        if (found["count"], found["bytes"]) != (found["glibc_count"], found["glibc_bytes"]):
            heap.findings.add(FindingKind.NATIVE_MISMATCH, heap.mp,
                              f"{found['count']} mmapped chunks of {found['bytes']:,} bytes found, glibc counts "
                              f"{found['glibc_count']} of {found['glibc_bytes']:,}")
