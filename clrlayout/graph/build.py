"""The object graph of a whole heap, built window by window from the vectorised walk: every object a node
(free space left out), every non-null reference slot an edge, in compressed sparse row form (numpy arrays:
``indptr``, ``indices``), so that reachability and dominators are array work, not Python objects.

Every reference must be null or the start of a heap object (the GC relies on it); a reference to anywhere
else is a finding (heap corruption, or memory the dump lacks), kept out of the graph, never a crash.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import numpy as np

from .compiled import jit
from .gcdesc import GcDesc, read_gcdesc

#: bad references kept for the report (all are counted)
MAX_BAD_KEPT = 100
#: the granule of the index from a reference to its object's node (a page: an object starts in the page its
#: address is in, so only that page's objects are searched)
_PAGE_SHIFT = 12
#: references looked up by this many threads (the compiled loop lets go of the GIL), from this many on
_THREADS = max(1, min(2, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1))
_THREADED = 1 << 20
#: slots outside a window are read in runs: a new run where the next slot is this far on, or a run this long
_RUN_GAP = 4096
_RUN_BYTES = 64 << 20


@dataclass
class BadReference:
    source: int  # the object holding the slot
    slot: int  # the slot's address
    value: int  # what it holds: not null, not an object's start


@dataclass
class HeapGraph:
    """Nodes (objects in address order) and their references."""

    addresses: np.ndarray  # uint64, sorted
    method_tables: np.ndarray  # uint64
    sizes: np.ndarray  # int64, SOS size
    aligned: np.ndarray  # int64, bytes on the heap
    indptr: np.ndarray  # int64, len n + 1
    indices: np.ndarray  # int32 (or int64), targets of each node's references, in slot order
    slots: np.ndarray  # uint64, the address of the slot of each reference (for fields and indexes)
    bad: list = field(default_factory=list)
    bad_count: int = 0
    #: references the graph does not follow (a description that could not be read), by MethodTable
    unreadable: dict = field(default_factory=dict)

    @property
    def count(self) -> int:
        return len(self.addresses)

    @property
    def edge_count(self) -> int:
        return len(self.indices)

    def node(self, address: int) -> int | None:
        """The node of the object that starts at ``address`` (None: no object starts there)."""
        i = int(np.searchsorted(self.addresses, np.uint64(address)))
        return i if i < len(self.addresses) and int(self.addresses[i]) == address else None

    def containing(self, address: int) -> int | None:
        """The node of the object whose bytes (from its pointer to its aligned end) hold ``address``."""
        i = int(np.searchsorted(self.addresses, np.uint64(address), side="right")) - 1
        if i >= 0 and address < int(self.addresses[i]) + int(self.aligned[i]):
            return i
        return None

    def references(self, node: int) -> np.ndarray:
        return self.indices[self.indptr[node] : self.indptr[node + 1]]


class _Descs:
    """The GC descriptions of the MethodTables met, each read once."""

    def __init__(self, space, mts):
        self.space, self.mts = space, mts
        self.flag = mts.profile.method_table.flags["ContainsPointers"]
        self._cache: dict[int, GcDesc | None] = {}

    def of(self, method_table: int) -> GcDesc | None:
        if method_table not in self._cache:
            mt = self.mts.get(method_table)
            desc = None
            if mt is not None and mt.flags & self.flag and mt.kind != "free":
                desc = read_gcdesc(self.space, method_table, mt.base_size)
            self._cache[method_table] = desc
        return self._cache[method_table]


def _ranges(starts: np.ndarray, lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For runs ``starts[i] + k`` (k < lengths[i]): (each element's run index, each element's k)."""
    total = int(lengths.sum())
    run = np.repeat(np.arange(len(starts), dtype=np.int64), lengths)
    first = np.cumsum(lengths) - lengths
    k = np.arange(total, dtype=np.int64) - np.repeat(first, lengths)
    return run, k


def window_references(win, mts, descs: _Descs, space, ptr: int, kinds=None):
    """(object index in the window, slot address, value) of every reference slot of a window's objects;
    ``kinds``: the window's ``np.unique(method_tables, return_inverse=True)``, when already had."""
    kinds, which = kinds if kinds is not None else np.unique(win.method_tables, return_inverse=True)
    out_src, out_slot = [], []
    for i, mt in enumerate(kinds.tolist()):
        desc = descs.of(mt)
        if desc is None:
            continue
        t = mts.get(mt)
        idx = np.flatnonzero(which == i)
        starts = win.offsets[idx].astype(np.int64) + win.base
        sizes = t.base_size + t.component_size * win.counts[idx].astype(np.int64)
        if desc.repeating:
            for i, o, size in zip(idx.tolist(), starts.tolist(), sizes.tolist()):
                offs = desc.slot_offsets(size, ptr)
                out_src.append(np.full(len(offs), i, dtype=np.int64))
                out_slot.append(o + offs)
            continue
        for series_size, start in desc.series:
            lengths = (series_size + sizes) // ptr
            lengths = np.maximum(lengths, 0)
            if not lengths.any():
                continue
            run, k = _ranges(starts, lengths)
            out_src.append(idx[run])
            out_slot.append(starts[run] + start + k * ptr)
    if not out_src:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.uint64)
    src = np.concatenate(out_src)
    slots = np.concatenate(out_slot)
    return src, slots, _read_words(win, slots, space, ptr)


def _read_words(win, slots: np.ndarray, space, ptr: int) -> np.ndarray:
    """The words at ``slots``: from the window's own bytes, else (an object running past them) the dump."""
    dtype = np.dtype("<u8" if ptr == 8 else "<u4")
    words = np.frombuffer(win.data, dtype=dtype, count=len(win.data) // ptr)
    pos = (slots - win.base) // ptr
    inside = (pos >= 0) & (pos < len(words))
    out = np.zeros(len(slots), dtype=np.uint64)
    out[inside] = words[pos[inside]]
    outside = np.flatnonzero(~inside)
    if len(outside):  # objects that run past the window (large arrays): their slots read a run at a time
        order = np.argsort(slots[outside], kind="stable")
        at = slots[outside][order].astype(np.int64)
        breaks = np.flatnonzero(np.diff(at) > _RUN_GAP) + 1
        for run in np.split(np.arange(len(at)), breaks):
            lo, hi = int(at[run[0]]), int(at[run[-1]]) + ptr
            data = space.try_read(lo, hi - lo) if hi - lo <= _RUN_BYTES else None
            which = outside[order[run]]
            if data is not None:
                out[which] = np.frombuffer(data, dtype=dtype)[(at[run] - lo) // ptr]
                continue
            for j in which.tolist():  # a run the dump does not wholly hold: slot by slot
                out[j] = space.try_read_pointer(int(slots[j])) or 0
    return out


def nodes_of(addresses: np.ndarray, values: np.ndarray, itype=np.int64) -> np.ndarray:
    """The node of the object that starts at each of ``values`` (-1: none does), of type ``itype``: by the
    page each value is in (a search among the pages that hold objects, small enough to stay in the cache),
    then among that page's objects -- not a search of all ``addresses`` (sorted) for each of millions."""
    out = np.empty(len(values), dtype=itype)
    if not len(addresses):
        out[:] = -1
        return out
    pages = addresses >> np.uint64(_PAGE_SHIFT)
    starts = np.flatnonzero(np.concatenate([[True], pages[1:] != pages[:-1]]))
    bounds = np.append(starts, len(addresses)).astype(np.int64)
    pages, shift, kernel = pages[starts], np.uint64(_PAGE_SHIFT), jit(_nodes_of)
    parts = _THREADS if len(values) >= _THREADED else 1
    if parts == 1:
        kernel(addresses, pages, bounds, values, shift, out)
        return out
    from concurrent.futures import ThreadPoolExecutor

    cut = np.linspace(0, len(values), parts + 1).astype(np.int64)

    with ThreadPoolExecutor(parts) as pool:  # the compiled loop lets go of the GIL: the halves run at once
        list(pool.map(lambda k: kernel(addresses, pages, bounds, values[cut[k] : cut[k + 1]], shift,
                                       out[cut[k] : cut[k + 1]]), range(parts)))
    return out


def _nodes_of(addresses, pages, bounds, values, shift, out):  # pragma: no cover - also compiled
    for i in range(len(values)):
        v = values[i]
        page = v >> shift
        lo, hi = 0, len(pages)
        while lo < hi:  # the first page at or after v's
            mid = (lo + hi) >> 1
            if pages[mid] < page:
                lo = mid + 1
            else:
                hi = mid
        out[i] = -1
        if lo == len(pages) or pages[lo] != page:
            continue
        a, b = bounds[lo], bounds[lo + 1]
        while a < b:  # the first of the page's objects at or after v
            mid = (a + b) >> 1
            if addresses[mid] < v:
                a = mid + 1
            else:
                b = mid
        if a < bounds[lo + 1] and addresses[a] == v:
            out[i] = a


def build_graph(windows, mts, space, findings_limit: int = MAX_BAD_KEPT) -> HeapGraph:
    """The graph of the objects of ``windows`` (the exact walk's), free space left out.

    Each window's references are put in slot order there (a slot lies inside its object, so slot order is object
    order, then slot order within each), and the windows in address order: no sort of the whole heap's
    references (one, when windows overlap, which a sane heap's do not)."""
    ptr = space.pointer_size
    descs = _Descs(space, mts)
    parts = []
    for win in windows:
        # the window's MethodTables once: which are free space, and the sizes (gathered, not looked up per object)
        kinds, which = np.unique(win.method_tables, return_inverse=True)
        records = [mts.get(m) for m in kinds.tolist()]
        free = np.array([r.kind == "free" for r in records], dtype=bool)
        keep = ~free[which]
        src, slots, values = window_references(win, mts, descs, space, ptr, (kinds, which))
        nonnull = values != 0
        local = (np.cumsum(keep) - 1)[src[nonnull]]  # window index -> index among the window's kept objects
        slots, values = slots[nonnull].astype(np.uint64), values[nonnull]
        by = np.argsort(slots, kind="stable")
        kept = np.flatnonzero(keep)
        base = np.array([r.base_size for r in records], dtype=np.int64)
        comp = np.array([r.component_size for r in records], dtype=np.int64)
        which = which[kept]
        parts.append([win.base, win.offsets[kept].astype(np.uint64) + np.uint64(win.base), win.method_tables[kept],
                      base[which] + comp[which] * win.counts[kept].astype(np.int64),
                      win.aligned[kept].astype(np.int64), local[by], slots[by], values[by]])
    parts.sort(key=lambda part: part[0])  # the windows in address order
    first = np.cumsum([0] + [len(part[1]) for part in parts])
    for i, part in enumerate(parts):
        part[5] = part[5] + first[i]  # window-local object index -> node index

    def joined(k, dtype):
        """Field ``k`` of every window, one array; each window's own freed as it goes (the peak is one copy)."""
        if not parts:
            return np.zeros(0, dtype=dtype)
        out = np.concatenate([part[k] for part in parts])
        for part in parts:
            part[k] = None
        return out

    addresses, method_tables = joined(1, np.uint64), joined(2, np.uint64)
    sizes, aligned = joined(3, np.int64), joined(4, np.int64)
    src, slots, values = joined(5, np.int64), joined(6, np.uint64), joined(7, np.uint64)
    parts.clear()
    if len(addresses) > 1 and not (addresses[1:] > addresses[:-1]).all():  # overlapping windows: sort it all
        order = np.argsort(addresses, kind="stable")
        rank = np.empty(len(order), dtype=np.int64)
        rank[order] = np.arange(len(order), dtype=np.int64)
        addresses, method_tables, sizes, aligned = addresses[order], method_tables[order], sizes[order], aligned[order]
        src = rank[src]
        by = np.lexsort((slots, src))
        src, slots, values = src[by], slots[by], values[by]
    n = len(addresses)
    itype = np.int32 if n < 2**31 else np.int64
    target = nodes_of(addresses, values, itype)
    found = target >= 0
    missed = int((~found).sum())
    bad = [BadReference(int(addresses[s]), int(sl), int(v)) for s, sl, v in
           zip(src[~found][:findings_limit].tolist(), slots[~found][:findings_limit].tolist(),
               values[~found][:findings_limit].tolist())] if missed else []
    del values
    if missed:
        src, slots, target = src[found], slots[found], target[found]
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(src, minlength=n), out=indptr[1:])
    del src
    return HeapGraph(addresses, method_tables, sizes, aligned, indptr, target, slots, bad, missed)
