"""Reachability over a graph in compressed sparse row form: breadth-first from a set of roots, a level at a
time with numpy (each level's neighbours gathered at once), keeping for each node the one that reached it
first, so that a path from the roots is a shortest one."""

from __future__ import annotations

import numpy as np


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
    while len(frontier):
        src, dst = gather(indptr, indices, frontier)
        new = parent[dst] < 0
        src, dst = src[new], dst[new]
        dst, first = np.unique(dst, return_index=True)  # the first edge to reach each (in frontier order)
        parent[dst] = src[first]
        frontier = dst
    return parent


def path_to(parent: np.ndarray, node: int) -> list[int]:
    """The nodes from the root that reached ``node`` down to it ([] when it is not reachable)."""
    if parent[node] < 0:
        return []
    out = [node]
    while parent[out[-1]] != out[-1] and len(out) <= len(parent):
        out.append(int(parent[out[-1]]))
    return out[::-1]
