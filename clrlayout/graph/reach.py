"""Reachability over a graph in compressed sparse row form: breadth-first from a set of nodes, a level at a
time, keeping for each node the one that reached it first (the first edge of the level, in node order and
then slot order), so that a path from the roots is a shortest one.  Compiled by numba (a heap's lists make
thousands of levels); without it, each level's neighbours are gathered at once with numpy."""

from __future__ import annotations

import numpy as np

from .compiled import jit


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


def levels(indptr: np.ndarray, indices: np.ndarray, parent: np.ndarray, dist: np.ndarray,
           frontier: np.ndarray) -> None:
    """Breadth-first from ``frontier`` (sorted nodes, already in ``parent``): for each node reached, the node
    that reached it first (``parent``) and its level (``dist``: 1 for the frontier's neighbours)."""
    dist[frontier] = 0
    small = jit(_small_levels, len(parent) + len(indices))
    if small is _small_levels:  # run as Python: a level at a time with numpy instead
        small = None
    level = 0
    while len(frontier):
        if small is not None and len(frontier) <= NUMPY_LEVEL:
            frontier, level = small(indptr, indices, parent, dist, frontier, level, NUMPY_LEVEL)
            continue
        level += 1
        src, dst = gather(indptr, indices, frontier)
        new = dist[dst] < 0
        src, dst = src[new], dst[new]
        dst, first = np.unique(dst, return_index=True)  # the first edge to reach each (in frontier order)
        parent[dst], dist[dst] = src[first], level
        frontier = dst


def _small_levels(indptr, indices, parent, dist, frontier, level, limit):  # pragma: no cover - compiled
    """The levels after ``level`` while they hold at most ``limit`` nodes: (the next frontier, its level)."""
    while 0 < len(frontier) <= limit:
        level += 1
        following = np.empty(0, dtype=np.int64)
        count = 0
        for u in frontier:
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
    return frontier, level

