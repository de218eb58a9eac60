"""The object graph of a whole heap, built window by window from the vectorised walk: every object a node
(free space left out), every non-null reference slot an edge, in compressed sparse row form (numpy arrays:
``indptr``, ``indices``), so that reachability and dominators are array work, not Python objects.

A node keeps only what a whole-heap answer needs, in the narrowest integers that hold it: its address, its
type (an index into the MethodTables met), its size on the heap, its references. What is shown for a few
objects (the SOS size, which slot holds a reference) is read again from the dump for them
(:class:`~.references.GcDescs`).

Every reference must be null or the start of a heap object (the GC relies on it); a reference to anywhere
else is a finding (heap corruption, or memory the dump lacks), kept out of the graph, never a crash.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np

from ..util.allocator import release_freed
from .lookup import _THREADS, PageIndex
from .references import GcDescs, window_references

#: bad references kept for the report (all are counted)
MAX_BAD_KEPT = 100
#: windows' arrays freed between two returns of free memory to the kernel (glibc keeps arrays of under 32 MB
#: for reuse: util/allocator.py; the graph's own arrays are made meanwhile)
_RELEASE_EVERY = 16


@dataclass
class BadReference:
    source: int  # the object holding the slot
    slot: int  # the slot's address
    value: int  # what it holds: not null, not an object's start


def node_type(count: int):
    """The integer type of node numbers (and of a CSR's row bounds) for ``count`` of them."""
    return np.int32 if count < 2**31 else np.int64


@dataclass
class HeapGraph:
    """Nodes (objects in address order) and their references."""

    addresses: np.ndarray  # uint64, sorted
    kinds: np.ndarray  # uint16 (uint32 past 65,535 types): each node's type, an index into ``types``
    types: np.ndarray  # uint64: the MethodTable of each kind
    aligned: np.ndarray  # uint32 (int64 where an object takes 4 GB or more): bytes on the heap
    indptr: np.ndarray  # int32 (int64 past 2**31 references), len n + 1
    indices: np.ndarray  # int32 (int64 past 2**31 nodes), targets of each node's references, in slot order
    descs: GcDescs | None = None  # where an object's slots are, for the few shown
    bad: list = field(default_factory=list)
    bad_count: int = 0

    @property
    def count(self) -> int:
        return len(self.addresses)

    @property
    def edge_count(self) -> int:
        return len(self.indices)

    @property
    def method_tables(self) -> np.ndarray:
        """Each node's MethodTable (a new array of 8 bytes a node: for small graphs and tests)."""
        return self.types[self.kinds]

    def method_table(self, node: int) -> int:
        return int(self.types[self.kinds[node]])

    def kind_of(self, method_table: int) -> int | None:
        """The kind of the MethodTable (None: no node has it)."""
        hit = np.flatnonzero(self.types == np.uint64(method_table))
        return int(hit[0]) if len(hit) else None

    def size(self, node: int) -> int:
        """The SOS size of a node's object (read again from the dump)."""
        size = self.descs.size(int(self.addresses[node]), self.method_table(node)) if self.descs else None
        return int(self.aligned[node]) if size is None else size

    def reference_slots(self, node: int) -> list[tuple[int, int]]:
        """(slot address, target node) of each reference a node's object holds, in slot order (read again from
        the dump: the slots the graph's edges came from)."""
        slots, words = self._held(node)
        at = np.minimum(np.searchsorted(self.addresses, words), max(self.count - 1, 0))  # a few: no page index
        hit = self.addresses[at] == words if self.count else np.zeros(len(words), dtype=bool)
        return [(int(s), int(t)) for s, t in zip(slots[hit].tolist(), at[hit].tolist())]

    def _held(self, node: int) -> tuple[np.ndarray, np.ndarray]:
        """(slot address, word) of each non-null reference slot of a node's object, in slot order: the slots
        its edges came from, the k-th edge from the k-th (read again from the dump)."""
        if self.descs is None:
            return np.zeros(0, dtype=np.uint64), np.zeros(0, dtype=np.uint64)
        slots, words = self.descs.slots(int(self.addresses[node]), self.method_table(node))
        held = words != 0
        return slots[held], words[held]

    def node(self, address: int) -> int | None:
        """The node of the object that starts at ``address`` (None: no object starts there)."""
        if not 0 <= address < 1 << 64:
            return None
        i = int(self.addresses.searchsorted(np.uint64(address)))
        return i if i < len(self.addresses) and int(self.addresses[i]) == address else None

    def containing(self, address: int) -> int | None:
        """The node of the object whose bytes (from its pointer to its aligned end) hold ``address``."""
        i = int(np.searchsorted(self.addresses, np.uint64(address), side="right")) - 1
        if i >= 0 and address < int(self.addresses[i]) + int(self.aligned[i]):
            return i
        return None

    def references(self, node: int) -> np.ndarray:
        return self.indices[self.indptr[node] : self.indptr[node + 1]]


@dataclass
class _Window:
    """What the build keeps of a window until every window is walked: its objects and their references'
    values (each object's in slot order)."""

    base: int
    addresses: np.ndarray  # uint64
    kinds: np.ndarray  # uint16 or uint32, global kinds
    aligned: np.ndarray  # uint32 or int64
    counts: np.ndarray  # uint32: non-null references of each object
    values: np.ndarray  # uint64


def _window(win, mts, descs, space, ptr: int, type_index: dict) -> _Window:
    kinds, which = np.unique(win.method_tables, return_inverse=True)
    records = [mts.get(m) for m in kinds.tolist()]
    free = np.array([r.kind == "free" for r in records], dtype=bool)
    keep = ~free[which]
    src, slots, values = window_references(win, mts, descs, space, ptr, (kinds, which))
    nonnull = values != 0
    src, slots, values = src[nonnull], slots[nonnull], values[nonnull]
    by = np.argsort(slots, kind="stable")  # slot order is object order, then slot order within each
    del slots
    kept = np.flatnonzero(keep)
    local = (np.cumsum(keep) - 1)[src[by]]  # window index -> index among the window's kept objects
    used = np.unique(which[kept])
    table = np.zeros(len(kinds), dtype=np.uint32 if len(type_index) + len(kinds) > 2**16 else np.uint16)
    table[used] = [type_index.setdefault(m, len(type_index)) for m in kinds[used].tolist()]
    aligned = win.aligned[kept]
    return _Window(win.base, win.offsets[kept].astype(np.uint64) + np.uint64(win.base), table[which[kept]],
                   aligned.astype(np.uint32 if not len(aligned) or aligned.max() < 2**32 else np.int64),
                   np.bincount(local, minlength=len(kept)).astype(np.uint32), values[by])


def build_graph(windows, mts, space, findings_limit: int = MAX_BAD_KEPT) -> HeapGraph:
    """The graph of the objects of ``windows`` (the exact walk's), free space left out.

    Each window's references are put in slot order there, and the windows in address order: no sort of the
    whole heap's references (one, when windows overlap, which a sane heap's do not). Each window's values
    become node numbers once every object is known, a window at a time (two at once), into the one array of
    targets: the peak is the values and the graph, not two copies of either."""
    ptr = space.pointer_size
    descs = GcDescs(space, mts)
    type_index: dict[int, int] = {}
    parts = sorted((_window(win, mts, descs, space, ptr, type_index) for win in windows), key=lambda p: p.base)
    n = sum(len(p.addresses) for p in parts)
    types = np.array(list(type_index), dtype=np.uint64)
    wide = any(p.aligned.dtype == np.int64 for p in parts)
    addresses, counts = np.empty(n, np.uint64), np.empty(n, np.uint32)
    kinds = np.empty(n, np.uint16 if len(types) <= 2**16 else np.uint32)
    aligned = np.empty(n, np.int64 if wide else np.uint32)
    at = 0
    release_freed()  # the walk's scratch, which glibc keeps for reuse (the next phases want other sizes)
    for i, p in enumerate(parts):  # each window's own freed as it goes, and given back every few windows
        k = len(p.addresses)
        addresses[at : at + k], kinds[at : at + k] = p.addresses, p.kinds
        aligned[at : at + k], counts[at : at + k] = p.aligned, p.counts
        p.addresses = p.kinds = p.aligned = p.counts = None
        at += k
        if i % _RELEASE_EVERY == _RELEASE_EVERY - 1:
            release_freed()
    values = None
    if n > 1 and not (addresses[1:] > addresses[:-1]).all():  # overlapping windows: sort it all
        values = np.concatenate([p.values for p in parts])
        order = np.argsort(addresses, kind="stable")
        edge_src = np.repeat(np.arange(n, dtype=np.int64), counts)
        rank = np.empty(n, dtype=np.int64)
        rank[order] = np.arange(n, dtype=np.int64)
        by = np.argsort(rank[edge_src], kind="stable")
        values = values[by]
        addresses, kinds, aligned, counts = addresses[order], kinds[order], aligned[order], counts[order]
        parts = []
    release_freed()  # the windows' arrays (glibc keeps them for reuse: the next phase wants other sizes)
    index = PageIndex(addresses)
    itype = node_type(n)
    chunks = [p.values for p in parts] if values is None else [values]
    for p in parts:  # the chunks hold the values now: each freed once converted
        p.values = None
    values = None
    edges = sum(len(c) for c in chunks)
    indices = np.empty(edges, dtype=itype)
    firsts = np.cumsum([0] + [len(c) for c in chunks])

    def convert(k):  # a window's values into its part of the targets, the values freed
        index.nodes(chunks[k], itype, indices[firsts[k] : firsts[k + 1]])
        missed = np.flatnonzero(indices[firsts[k] : firsts[k + 1]] < 0)
        bad = (missed + firsts[k], chunks[k][missed]) if len(missed) else None
        chunks[k] = None
        return bad

    missed = []
    with ThreadPoolExecutor(_THREADS) as pool:  # the compiled lookup lets go of the GIL
        for lo in range(0, len(chunks), _RELEASE_EVERY):  # the values given back every few windows
            missed += [m for m in pool.map(convert, range(lo, min(lo + _RELEASE_EVERY, len(chunks)))) if m]
            release_freed()
    del parts
    indptr = np.zeros(n + 1, dtype=node_type(edges))
    np.cumsum(counts, out=indptr[1:], dtype=indptr.dtype)
    del counts
    graph = HeapGraph(addresses, kinds, types, aligned, indptr, indices, descs)
    if missed:
        graph = _without_bad(graph, np.concatenate([m[0] for m in missed]),
                             np.concatenate([m[1] for m in missed]), findings_limit)
    return graph


def _without_bad(graph: HeapGraph, at: np.ndarray, values: np.ndarray, limit: int) -> HeapGraph:
    """The graph without the edges at ``at`` (references to no object's start, holding ``values``), each
    counted and the first ``limit`` kept as findings, with the slot that holds it."""
    sources = np.searchsorted(graph.indptr, at, side="right") - 1
    bad = []
    for e, s, v in zip(at[:limit].tolist(), sources[:limit].tolist(), values[:limit].tolist()):
        slots, _ = graph._held(s)
        k = e - int(graph.indptr[s])  # the edge's place among its object's, and so its slot's
        bad.append(BadReference(int(graph.addresses[s]), int(slots[k]) if k < len(slots) else 0, int(v)))
    keep = np.ones(len(graph.indices), dtype=bool)
    keep[at] = False
    lost = np.bincount(sources, minlength=graph.count)
    graph.indices = graph.indices[keep]
    graph.indptr = graph.indptr - np.concatenate([[0], np.cumsum(lost)]).astype(graph.indptr.dtype)
    graph.bad, graph.bad_count = bad, len(at)
    return graph
