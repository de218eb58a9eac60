"""The heap as a leak hunter asks about it: references both ways, roots, what is reachable (live) and why,
and what each object retains (the dominator tree)."""

from __future__ import annotations

import numpy as np

from .build import HeapGraph
from .dominators import dominator_tree, retained_sizes, reverse_graph, top_of_kind
from .reach import breadth_first, levels
from .roots import Roots


class ObjectGraph:
    """A :class:`~.build.HeapGraph` with its roots: dependent handles added as edges (primary -> secondary, as
    the GC treats them), reachability from the roots, and, when asked, dominators and retained sizes."""

    def __init__(self, graph: HeapGraph, roots: Roots, kinds: tuple):
        self.graph = graph
        self.roots = roots
        self.kinds = kinds
        n = graph.count
        dep = [(graph.node(p), graph.node(s)) for p, s in roots.dependent]
        dep = sorted((p, s) for p, s in dep if p is not None and s is not None)
        self.dependent = set(dep)
        # the heap's references, and a dependent handle's secondary as one more of its primary's (after them)
        self.indptr, self.indices = graph.indptr, graph.indices
        if dep:
            primaries = np.array([p for p, _ in dep], dtype=np.int64)
            self.indices = np.insert(graph.indices, graph.indptr[primaries + 1],
                                     np.array([s for _, s in dep], dtype=graph.indices.dtype))
            self.indptr = graph.indptr + np.concatenate([[0], np.cumsum(np.bincount(primaries, minlength=n))])
        self.root_nodes = np.array(sorted({graph.node(r.object) for r in roots.roots} - {None}), dtype=np.int64)
        self._parent = None
        self._dominators = None
        self._reverse = None

    @property
    def parent(self) -> np.ndarray:
        """Each node's parent in a breadth-first tree from the roots (-1: not reached), found when first asked
        for (``roots ADDR`` needs only the paths to one object)."""
        if self._parent is None:
            self._parent = breadth_first(self.indptr, self.indices, self.root_nodes)
        return self._parent

    @property
    def live(self) -> np.ndarray:
        """Which nodes are reachable from the roots."""
        return self.parent >= 0

    def referrers(self, node: int) -> np.ndarray:
        """The nodes that reference ``node`` (dependent-handle primaries included)."""
        if self._reverse is None:
            self._reverse = reverse_graph(self.indptr, self.indices, self.graph.count)
        rindptr, rindices = self._reverse
        return rindices[rindptr[node] : rindptr[node + 1]]

    def shortest_paths(self, target: int, limit: int = 100) -> list[tuple[int, list[int]]]:
        """For each root node that reaches ``target`` (at most ``limit`` of them, nearest first): a shortest
        chain of nodes from it to ``target`` (both included)."""
        n = self.graph.count
        self.referrers(target)
        rindptr, rindices = self._reverse
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
            idom, order = dominator_tree(self.indptr, self.indices, self.root_nodes)
            retained, count = retained_sizes(idom, order, self.graph.aligned)
            self._dominators = (idom, retained, count)
        return self._dominators

    def by_type(self) -> dict:
        """MethodTable -> [live objects, their bytes, what they retain]: a type's retained bytes are what its
        objects retain that no other object of the type already counts (MAT's retained heap of a class)."""
        g = self.graph
        idom, retained, _ = self.dominators()
        live = self.live
        table, kinds = np.unique(g.method_tables, return_inverse=True)
        top = top_of_kind(idom, kinds) & live
        k = len(table)
        counts = np.bincount(kinds[live], minlength=k)
        sizes = np.bincount(kinds[live], weights=g.aligned[live], minlength=k)
        kept = np.bincount(kinds[top], weights=retained[top], minlength=k)
        return {int(table[i]): [int(counts[i]), int(sizes[i]), int(kept[i])] for i in np.flatnonzero(counts)}
