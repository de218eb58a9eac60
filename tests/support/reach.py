"""Reachability over an object graph the slow, obvious way, for tests to hold the graph code to: breadth first
from a set of nodes over the graph's edges (the heap's references and the edges no slot holds)."""

from __future__ import annotations

import numpy as np


def reached_from(og, nodes) -> np.ndarray:
    """Whether each node of ``og`` (an ObjectGraph) is reached from ``nodes`` (None among them is left out)."""
    frontier = sorted(set(nodes) - {None})
    reached = np.zeros(og.graph.count, dtype=bool)
    reached[frontier] = True
    while frontier:
        nxt = []
        for v in frontier:
            for w in og.indices[og.indptr[v]: og.indptr[v + 1]].tolist():
                if not reached[w]:
                    reached[w] = True
                    nxt.append(w)
        frontier = nxt
    return reached
