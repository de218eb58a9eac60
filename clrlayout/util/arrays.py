"""Small numpy helpers shared by the scanners and the statistics."""

from __future__ import annotations

import numpy as np


def lookup(table: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For each of ``values``, its index in the sorted array ``table`` and whether it is there (where it is
    not, the index is only a valid index)."""
    if not len(table):
        return np.zeros(len(values), dtype=np.intp), np.zeros(len(values), dtype=bool)
    k = np.searchsorted(table, values)
    np.minimum(k, len(table) - 1, out=k)
    return k, table[k] == values


def positions(flags: np.ndarray) -> np.ndarray:
    """``np.flatnonzero(flags)`` for a 1-D bool array, about twice as fast when a few percent are set (a heap
    window's object starts).  numpy finds sparse flags one ``memchr`` at a time, about 13 ns each; here
    the flags are first read eight at a time as 64-bit blocks (``!= 0`` is then dense enough for numpy's
    branch-free loop), and only the blocks with a flag set are searched."""
    if not flags.flags.c_contiguous:
        return np.flatnonzero(flags)
    n = len(flags) - len(flags) % 8
    words = flags[:n].view(np.uint64)
    blocks = np.flatnonzero(words != 0)
    found = np.flatnonzero(words.take(blocks).view(np.bool_))  # in the picked blocks
    out = blocks.take(found >> 3) * 8 + (found & 7)
    if n < len(flags):
        out = np.concatenate((out, np.flatnonzero(flags[n:]) + n))
    return out


def distinct(values: np.ndarray) -> np.ndarray:
    """``np.unique(values)`` for an array of long runs of equal values (a heap window's MethodTables, 26,000
    of them in a few runs): only the first value of each run is sorted, not every value (a millisecond a
    window)."""
    if not len(values):
        return np.unique(values)
    return np.unique(np.concatenate((values[:1], values[1:][values[1:] != values[:-1]])))
