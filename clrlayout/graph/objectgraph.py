"""The heap as a leak hunter asks about it: references both ways, roots, what is reachable (live) and why,
and what each object retains (the dominator tree)."""

from __future__ import annotations

import numpy as np

from ..util.allocator import release_freed
from .build import HeapGraph
from .dominators import dominator_tree, retained_sizes, reverse_graph, top_of_kind
from .reach import breadth_first, levels
from .roots import Roots


class ObjectGraph:
    """A :class:`~.build.HeapGraph` with its roots: dependent handles added as edges (primary -> secondary, as
    the GC treats them), reachability from the roots, and, when asked, dominators and retained sizes."""

    def __init__(self, graph: HeapGraph, roots: Roots, kinds: tuple, allocators: dict | None = None):
        self.graph = graph
        self.roots = roots
        self.kinds = kinds
        n = graph.count
        dep = [(graph.node(p), graph.node(s)) for p, s in roots.dependent]
        dep = sorted((p, s) for p, s in dep if p is not None and s is not None)
        self.dependent = set(dep)
        #: MethodTable -> node of its LoaderAllocator object, for the collectible types (:mod:`.collectible`)
        self.allocators = {mt: node for mt, a in (allocators or {}).items() if (node := graph.node(a)) is not None}
        # the heap's references, then the edges no slot holds: a dependent handle's secondary as one more of its
        # primary's, a collectible type's LoaderAllocator as one more of each of its objects'
        self.indptr, self.indices = graph.indptr, graph.indices
        src, dst = [np.array([p for p, _ in dep], dtype=np.int64)], [np.array([s for _, s in dep], dtype=np.int64)]
        if self.allocators:
            keys = np.array(sorted(self.allocators), dtype=np.uint64)
            which = np.flatnonzero(np.isin(graph.method_tables, keys))
            src.append(which)
            dst.append(np.array([self.allocators[m] for m in sorted(self.allocators)],
                                dtype=np.int64)[np.searchsorted(keys, graph.method_tables[which])])
        src, dst = np.concatenate(src), np.concatenate(dst)
        if len(src):
            order = np.argsort(src, kind="stable")
            src, dst = src[order], dst[order]
            self.indices = np.insert(graph.indices, graph.indptr[src + 1], dst.astype(graph.indices.dtype))
            self.indptr = graph.indptr + np.concatenate([[0], np.cumsum(np.bincount(src, minlength=n))])
        self.root_nodes = np.array(sorted({graph.node(r.object) for r in roots.roots} - {None}), dtype=np.int64)
        self._parent = None
        self._dominators = None
        self._reverse = None

    def unslotted(self, src: int, dst: int) -> list[str]:
        """What makes ``src`` reference ``dst`` besides its slots: ``(dependent handle)``, ``(loader allocator)``."""
        out = ["(dependent handle)"] if (src, dst) in self.dependent else []
        if self.allocators.get(int(self.graph.method_tables[src])) == dst:
            out.append("(loader allocator)")
        return out

    @property
    def parent(self) -> np.ndarray:
        """Each node's parent in a breadth-first tree from the roots (-1: not reached), found when first asked
        for (``roots ADDR`` needs only the paths to one object)."""
        if self._parent is None:
            self._parent = breadth_first(self.indptr, self.indices, self.root_nodes)
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
            self._reverse = reverse_graph(self.indptr, self.indices, self.graph.count)
        return self._reverse

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

    def dominators(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(idom, retained bytes, retained objects) of every node (see :mod:`.dominators`)."""
        if self._dominators is None:
            idom, order = dominator_tree(self.indptr, self.indices, self.root_nodes, self.reverse)
            release_freed()  # the algorithm's scratch
            retained, count = retained_sizes(idom, order, self.graph.aligned)
            self._dominators = (idom, retained, count)
        return self._dominators

    def by_type(self) -> dict:
        """MethodTable -> [live objects, their bytes, what they retain]: a type's retained bytes are what its
        objects retain that no other object of the type already counts (MAT's retained heap of a class)."""
        g = self.graph
        idom, retained, _ = self.dominators()
        live = self.live
        table = np.unique(g.method_tables)  # (by hashing: no sort of every node's)
        kinds = np.searchsorted(table, g.method_tables).astype(np.int32)  # 4 bytes a node (types are few)
        top = top_of_kind(idom, kinds) & live
        k = len(table)
        counts = np.bincount(kinds[live], minlength=k)
        sizes = np.bincount(kinds[live], weights=g.aligned[live], minlength=k)
        kept = np.bincount(kinds[top], weights=retained[top], minlength=k)
        return {int(table[i]): [int(counts[i]), int(sizes[i]), int(kept[i])] for i in np.flatnonzero(counts)}
