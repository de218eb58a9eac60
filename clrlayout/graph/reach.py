"""Reachability over a graph in compressed sparse row form: breadth-first from a set of nodes, a level at a
time, keeping for each node the one that reached it first (the first edge of the level, in node order and
then slot order), so that a path from the roots is a shortest one.  Compiled by numba (a heap's lists make
thousands of levels); without it, each level's neighbours are gathered at once with numpy."""

from __future__ import annotations

import sys

import numpy as np

from .compiled import interpreted, jit


def gather(indptr: np.ndarray, indices: np.ndarray, nodes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(source, target) of every edge out of ``nodes``."""
    starts, ends = indptr[nodes], indptr[nodes + 1]
    lengths = ends - starts
    total = int(lengths.sum())
    if not total:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    run = np.repeat(np.arange(len(nodes), dtype=np.int64), lengths)
    first = np.cumsum(lengths) - lengths
    k = np.arange(total, dtype=np.int64) - np.repeat(first, lengths)
    return nodes[run], indices[starts[run] + k].astype(np.int64)


def breadth_first(indptr: np.ndarray, indices: np.ndarray, roots: np.ndarray) -> np.ndarray:
    """For every node: the node that reached it first (itself for a root; -1: not reachable)."""
    n = len(indptr) - 1
    parent = np.full(n, -1, dtype=np.int64)
    frontier = np.unique(roots.astype(np.int64))
    parent[frontier] = frontier
    levels(indptr, indices, parent, np.full(n, -1, dtype=np.int64), frontier)
    return parent


#: a level of more nodes than this is gathered with numpy (its random reads overlap); a smaller one, in the
#: compiled loop (a heap's long lists make levels of a few nodes, hundreds of thousands of them)
NUMPY_LEVEL = 256
#: edges the small levels follow as Python before numba is loaded for the rest (loading it takes about 0.5 s:
#: a search that ends sooner, as one from an object to its roots mostly does, never loads it)
PYTHON_EDGES = 200_000


def levels(indptr: np.ndarray, indices: np.ndarray, parent: np.ndarray, dist: np.ndarray,
           frontier: np.ndarray) -> None:
    """Breadth-first from ``frontier`` (sorted nodes, already in ``parent``): for each node reached, the node
    that reached it first (``parent``) and its level (``dist``: 1 for the frontier's neighbours)."""
    dist[frontier] = 0
    size = len(parent) + len(indices)
    small = jit(_small_levels, size) if "numba" in sys.modules or interpreted(size) else None
    budget = -1 if small is not None else PYTHON_EDGES  # -1: no limit
    level = 0
    while len(frontier):
        if len(frontier) <= NUMPY_LEVEL:
            if small is None and budget <= 0:
                small, budget = jit(_small_levels, size), -1
            frontier, level, spent = (small or _small_levels)(indptr, indices, parent, dist, frontier, level,
                                                              NUMPY_LEVEL, budget)
            budget = budget - spent if budget >= 0 else budget
            continue
        level += 1
        src, dst = gather(indptr, indices, frontier)
        new = dist[dst] < 0
        src, dst = src[new], dst[new]
        dst, first = np.unique(dst, return_index=True)  # the first edge to reach each (in frontier order)
        parent[dst], dist[dst] = src[first], level
        frontier = dst


def _small_levels(indptr, indices, parent, dist, frontier, level, limit, budget):  # pragma: no cover - compiled
    """The levels after ``level`` while they hold at most ``limit`` nodes and, ``budget`` not -1, fewer than
    ``budget`` edges were followed: (the next frontier, its level, the edges followed)."""
    spent = 0
    while 0 < len(frontier) <= limit and (budget < 0 or spent < budget):
        level += 1
        following = np.empty(0, dtype=np.int64)
        count = 0
        for u in frontier:
            spent += indptr[u + 1] - indptr[u]
            for e in range(indptr[u], indptr[u + 1]):
                v = indices[e]
                if dist[v] < 0:
                    dist[v] = level
                    parent[v] = u
                    if count == len(following):
                        grown = np.empty(max(16, 2 * count), dtype=np.int64)
                        grown[:count] = following[:count]
                        following = grown
                    following[count] = v
                    count += 1
        frontier = np.sort(following[:count])
    return frontier, level, spent
