"""The heap as a leak hunter asks about it: references both ways, roots, what is reachable (live) and why,
and what each object retains (the dominator tree)."""

from __future__ import annotations

import hashlib

import numpy as np

from ..util.allocator import release_freed
from .build import HeapGraph, node_type
from .dominators import largest, releasing_dominator_tree, retained_sizes, reverse_graph, top_of_kind
from .reach import breadth_first, levels
from .roots import Roots

#: nodes summed (packed, unpacked) at a time
_CHUNK = 1 << 20
#: the largest retainers kept with the dominator tree (``retained --top``, the report's suspects ask for fewer)
LARGEST_KEPT = 4096


def pack_addresses(addresses: np.ndarray):
    """Sorted object addresses in 4 bytes each: (where each run of the same upper 32 bits starts, those bits,
    the lower 32 bits of each), a chunk at a time (no copy of 8 bytes a node). None for no address."""
    if not len(addresses):
        return None
    low = np.empty(len(addresses), dtype=np.uint32)
    starts, highs = [0], [int(addresses[0]) >> 32]
    for lo in range(0, len(addresses), _CHUNK):
        part = addresses[lo : lo + _CHUNK]
        low[lo : lo + len(part)] = part & np.uint64(0xFFFFFFFF)
        high = part >> np.uint64(32)
        for i in np.flatnonzero(np.diff(high, prepend=np.uint64(highs[-1]))).tolist():
            starts.append(lo + i)
            highs.append(int(high[i]))
    return starts + [len(addresses)], highs, low


def unpack_addresses(starts: list, highs: list, low: np.ndarray) -> np.ndarray:
    out = np.empty(len(low), dtype=np.uint64)
    for a, b, high in zip(starts, starts[1:], highs):
        for lo in range(a, b, _CHUNK):
            hi = min(lo + _CHUNK, b)
            out[lo:hi] = low[lo:hi].astype(np.uint64) | np.uint64(high << 32)
    return out


class ObjectGraph:
    """A :class:`~.build.HeapGraph` with its roots: dependent handles added as edges (primary -> secondary, as
    the GC treats them), reachability from the roots, and, when asked, dominators and retained sizes."""

    def __init__(self, graph: HeapGraph, roots: Roots, kinds: tuple, allocators: dict | None = None,
                 exclusive: bool = False):
        self.graph = graph
        self.roots = roots
        self.kinds = kinds
        #: the graph is this object's alone: its references may be freed (:meth:`dominators`)
        self.exclusive = exclusive
        dep = [(graph.node(p), graph.node(s)) for p, s in roots.dependent]
        dep = sorted((p, s) for p, s in dep if p is not None and s is not None)
        self.dependent = set(dep)
        #: MethodTable -> node of its LoaderAllocator object, for the collectible types (:mod:`.collectible`)
        self.allocators = {mt: node for mt, a in (allocators or {}).items() if (node := graph.node(a)) is not None}
        # the heap's references, then the edges no slot holds: a dependent handle's secondary as one more of its
        # primary's, a collectible type's LoaderAllocator as one more of each of its objects'
        self._indptr, self._indices = graph.indptr, graph.indices
        src, dst = [np.array([p for p, _ in dep], dtype=np.int64)], [np.array([s for _, s in dep], dtype=np.int64)]
        by_kind = np.full(len(graph.types), -1, dtype=np.int64)  # kind -> its LoaderAllocator's node
        for mt, node in self.allocators.items():
            if (kind := graph.kind_of(mt)) is not None:
                by_kind[kind] = node
        if (by_kind >= 0).any():
            which = np.flatnonzero(by_kind[graph.kinds] >= 0)
            src.append(which)
            dst.append(by_kind[graph.kinds[which]])
        src, dst = np.concatenate(src), np.concatenate(dst)
        self.root_nodes = np.array(sorted({graph.node(r.object) for r in roots.roots} - {None}), dtype=np.int64)
        #: what the graph's layers depend on besides the heap: the roots and the edges no slot holds
        self.roots_key = hashlib.sha256(b"".join(np.ascontiguousarray(a, dtype=np.int64).tobytes() for a in (
            self.root_nodes, [len(self.root_nodes)], src, dst))).hexdigest()[:32]
        #: where the layers computed from this graph are kept (:class:`~.index.Layers`; None: nowhere)
        self.layers = None
        #: the references with the added edges: made when first asked for (a command that its index's layers
        #: answer never copies the heap's references)
        self._added = (src, dst) if len(src) else None
        self.edge_count = len(graph.indices) + len(src)
        self._parent = None
        self._largest = None
        self._dominators = None
        self._reverse = None
        self._top = None

    @property
    def indptr(self) -> np.ndarray:
        """The row bounds of :attr:`indices` (CSR), the added edges included."""
        self._add_edges()
        return self._indptr

    @indptr.setter
    def indptr(self, value) -> None:
        self._indptr = value

    @property
    def indices(self) -> np.ndarray:
        """The targets of each node's references in slot order, then the edges no slot holds."""
        self._add_edges()
        return self._indices

    @indices.setter
    def indices(self, value) -> None:
        self._indices = value

    def _add_edges(self) -> None:
        if self._added is None:
            return
        src, dst = self._added
        self._added = None
        graph = self.graph
        order = np.argsort(src, kind="stable")
        src, dst = src[order], dst[order]
        self._indices = np.insert(graph.indices, graph.indptr[src + 1], dst.astype(graph.indices.dtype))
        indptr = graph.indptr + np.concatenate([[0], np.cumsum(np.bincount(src, minlength=graph.count))])
        self._indptr = indptr.astype(node_type(len(self._indices)))
        if self.exclusive:  # the graph's own copy is not needed: one copy of the references, not two
            graph.indptr, graph.indices = self._indptr, self._indices

    def unslotted(self, src: int, dst: int) -> list[str]:
        """What makes ``src`` reference ``dst`` besides its slots: ``(dependent handle)``, ``(loader allocator)``."""
        out = ["(dependent handle)"] if (src, dst) in self.dependent else []
        if self.allocators.get(self.graph.method_table(src)) == dst:
            out.append("(loader allocator)")
        return out

    @property
    def parent(self) -> np.ndarray:
        """Each node's parent in a breadth-first tree from the roots (-1: not reached), found when first asked
        for (``roots ADDR`` needs only the paths to one object)."""
        if self._parent is None:
            kept = self._layer("parent")
            if kept is not None:
                self._parent = kept["parent"]
            else:
                self._parent = breadth_first(self.indptr, self.indices, self.root_nodes)
                self._keep("parent", parent=self._parent.astype(self.graph.indices.dtype))
        return self._parent

    @property
    def live(self) -> np.ndarray:
        """Which nodes are reachable from the roots: those the dominator tree reaches, once it is built (the same
        set, with no breadth-first walk and its two arrays), else those a breadth-first walk reaches."""
        if self._dominators is not None and self._parent is None:
            return self._dominators[0] >= 0
        return self.parent >= 0

    @property
    def reverse(self) -> tuple[np.ndarray, np.ndarray]:
        """(rindptr, rindices): who references each node (dependent-handle primaries included), made once
        (``refs``, ``roots`` and the dominator tree share it)."""
        if self._reverse is None:
            kept = self._layer("reverse")
            if kept is not None:
                self._reverse = kept["rindptr"], kept["rindices"]
            else:
                self._reverse = reverse_graph(self.indptr, self.indices, self.graph.count)
                self._keep("reverse", rindptr=self._reverse[0], rindices=self._reverse[1])
        return self._reverse

    def _layer(self, name: str) -> dict | None:
        return self.layers.load(name) if self.layers is not None else None

    def _keep(self, name: str, **arrays) -> None:
        if self.layers is not None:
            self.layers.save(name, arrays)

    def referrers(self, node: int) -> np.ndarray:
        """The nodes that reference ``node`` (dependent-handle primaries included)."""
        rindptr, rindices = self.reverse
        return rindices[rindptr[node] : rindptr[node + 1]]

    def shortest_paths(self, target: int, limit: int = 100) -> list[tuple[int, list[int]]]:
        """For each root node that reaches ``target`` (at most ``limit`` of them, nearest first): a shortest
        chain of nodes from it to ``target`` (both included)."""
        n = self.graph.count
        rindptr, rindices = self.reverse
        # breadth-first from the target over the reversed edges: each node's next step towards it
        towards = np.full(n, -1, dtype=np.int64)
        dist = np.full(n, -1, dtype=np.int64)
        towards[target] = target
        levels(rindptr, rindices, towards, dist, np.array([target], dtype=np.int64))
        reached = [r for r in self.root_nodes.tolist() if dist[r] >= 0]
        reached.sort(key=lambda r: (dist[r], r))
        out = []
        for r in reached[:limit]:
            chain = [r]
            while chain[-1] != target:
                chain.append(int(towards[chain[-1]]))
            out.append((r, chain))
        return out

    def dominators(self, release: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(idom, retained bytes, retained objects) of every node (see :mod:`.dominators`). ``release`` (a graph
        that is this object's alone): the references are freed as soon as the dominator tree no longer needs
        them -- the object then answers about roots, liveness, dominators and types, no longer about references."""
        if self._dominators is None and (kept := self._layer("dominators")) is not None:
            self._dominators = (kept["idom"], kept["retained"], kept["count"])
            self._top, self._largest = kept["top"], kept["largest"]
        if self._dominators is None:
            release = release and self.exclusive and self._parent is None
            edges = [self.indptr, self.indices]
            packed = None
            if release:
                self.indptr = self.indices = self.graph.indptr = self.graph.indices = self._reverse = None
                packed = pack_addresses(self.graph.addresses)  # 4 bytes a node while the tree is made
                if packed is not None:
                    self.graph.addresses = None
                release_freed()
            idom, order = releasing_dominator_tree(edges, self.root_nodes, release)
            del edges
            if packed is not None:
                self.graph.addresses = unpack_addresses(*packed)
            release_freed()  # the algorithm's scratch
            retained, count = retained_sizes(idom, order, self.graph.aligned)
            self._dominators = (idom, retained, count)
            if self.layers is not None:
                self._keep("dominators", idom=idom, retained=retained, count=count, top=self.tops,
                           largest=self._largest_kept())
        return self._dominators

    def largest_retainers(self, top: int) -> list[int]:
        """The live nodes that retain the most, largest first (the lowest node first among equals): the first
        ``top`` of them.  The first :data:`LARGEST_KEPT` are found once and kept in the dominators' layer."""
        idom, retained, _ = self.dominators()
        nodes = self._largest_kept() if top <= LARGEST_KEPT else np.array(largest(retained, top), dtype=np.int64)
        return [node for node in nodes[:top].tolist() if idom[node] >= 0]  # (live: the dominator tree reaches it)

    def _largest_kept(self) -> np.ndarray:
        if self._largest is None:
            self._largest = np.array(largest(self.dominators()[1], LARGEST_KEPT), dtype=np.int64)
        return self._largest

    @property
    def tops(self) -> np.ndarray:
        """Which live nodes have no strict dominator of their own type (:func:`~.dominators.top_of_kind`)."""
        if self._top is None:
            self._top = top_of_kind(self.dominators()[0], self.graph.kinds)
        return self._top

    def by_type(self) -> dict:
        """MethodTable -> [live objects, their bytes, what they retain]: a type's retained bytes are what its
        objects retain that no other object of the type already counts (MAT's retained heap of a class)."""
        g = self.graph
        kept = self._layer("types")
        if kept is not None:
            counts, sizes, held = kept["counts"], kept["sizes"], kept["kept"]
            return {int(g.types[i]): [int(counts[i]), int(sizes[i]), int(held[i])] for i in np.flatnonzero(counts)}
        _, retained, _ = self.dominators()
        live = self.live
        top = self.tops
        k = len(g.types)
        counts, sizes, kept = (np.zeros(k, dtype=np.int64) for _ in range(3))
        for lo in range(0, g.count, _CHUNK):  # a chunk at a time: no copies as long as the nodes
            part = slice(lo, lo + _CHUNK)
            kinds, alive = g.kinds[part], live[part]
            on_top = top[part] & alive
            counts += np.bincount(kinds[alive], minlength=k)
            sizes += np.bincount(kinds[alive], weights=g.aligned[part][alive], minlength=k).astype(np.int64)
            kept += np.bincount(kinds[on_top], weights=retained[part][on_top], minlength=k).astype(np.int64)
        self._keep("types", counts=counts, sizes=sizes, kept=kept)
        return {int(g.types[i]): [int(counts[i]), int(sizes[i]), int(kept[i])] for i in np.flatnonzero(counts)}
