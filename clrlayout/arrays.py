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
