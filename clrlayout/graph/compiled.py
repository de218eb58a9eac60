"""The graph's loops compiled by numba when it is installed, each once (and kept in numba's cache, which the
wheel ships compiled: hatch_build.py runs :func:`clrlayout.graph.dominators.warm_up`), else run as Python.
A small graph's loops run as Python in a process that has not loaded numba yet: loading numba and the
compiled loops takes about 0.4 s, more than the loops over a few thousand objects (a fleet analyses each
dump in a process of its own)."""

from __future__ import annotations

import sys

#: each loop compiled once, by its name
_compiled: dict = {}
#: a loop over fewer items than this (a graph's nodes, and its edges where the loop follows them) runs as
#: Python where numba is not loaded yet
INTERPRETED_BELOW = 20_000


def interpreted(size: int | None) -> bool:
    """Whether a loop over ``size`` items (nodes, edges) runs as Python though numba is installed."""
    return size is not None and size < INTERPRETED_BELOW and "numba" not in sys.modules


def jit(function, size: int | None = None):
    """``function`` compiled by numba when it is installed (once), else as it is; as it is too for a loop over
    ``size`` items that :func:`interpreted` runs as Python."""
    if interpreted(size):
        return function
    if function.__name__ not in _compiled:  # numba is a dependency: always there
        import numba

        _compiled[function.__name__] = numba.njit(cache=True, nogil=True)(function)
    return _compiled[function.__name__]
