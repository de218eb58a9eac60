"""Heap statistics by type, as SOS ``!dumpheap -stat`` gives them: count and bytes per MethodTable.

Each window of the vectorised walk is reduced with numpy (its distinct MethodTables, then one ``bincount``
per total), so the cost is per window, not per object; names are worked out once per MethodTable, at the end.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..util.arrays import distinct


@dataclass
class TypeRow:
    method_table: int
    name: str | None
    count: int
    total_size: int  # SOS: BaseSize + ComponentSize x count, summed, before alignment
    total_aligned_size: int  # the bytes the objects take on the heap

    def as_dict(self) -> dict:
        return {"method_table": f"{self.method_table:#x}", "name": self.name, "count": self.count,
                "total_size": self.total_size, "total_aligned_size": self.total_aligned_size}


@dataclass
class TypeStats:
    """Per-MethodTable totals of one or more windows (merge() adds another's, in any order)."""

    totals: dict = field(default_factory=dict)  # MethodTable -> [count, SOS size, aligned size]
    #: every MethodTable of the windows added, whether or not the filter kept any of its objects
    seen: set = field(default_factory=set)

    def add(self, win, mts, selected=None) -> None:
        """Adds the objects of a window that ``selected`` (an
        :class:`~clrlayout.analyses.filters.ObjectFilter`; None: all) accepts."""
        if not len(win.method_tables):
            return
        table = distinct(win.method_tables)
        self.seen.update(table.tolist())
        inverse = np.searchsorted(table, win.method_tables)
        base = np.empty(len(table), dtype=np.int64)
        comp = np.empty(len(table), dtype=np.int64)
        for i, mt in enumerate(table.tolist()):
            t = mts.get(mt)
            base[i], comp[i] = t.base_size, t.component_size
        sizes = base[inverse] + comp[inverse] * win.counts
        aligned = win.aligned
        keep = selected.mask(win, sizes) if selected is not None else None
        if keep is not None:
            inverse, sizes, aligned = inverse[keep], sizes[keep], aligned[keep]
        counts = np.bincount(inverse, minlength=len(table))
        size_sums = np.bincount(inverse, weights=sizes, minlength=len(table))
        aligned_sums = np.bincount(inverse, weights=aligned, minlength=len(table))
        for mt, n, sz, al in zip(table.tolist(), counts.tolist(), size_sums.tolist(), aligned_sums.tolist()):
            if n:
                self._add(mt, n, int(sz), int(al))

    def _add(self, mt: int, n: int, size: int, aligned: int) -> None:
        row = self.totals.get(mt)
        if row is None:
            self.totals[mt] = [n, size, aligned]
        else:
            row[0] += n
            row[1] += size
            row[2] += aligned

    def merge(self, other: TypeStats) -> None:
        self.seen |= other.seen
        for mt, (n, size, aligned) in other.totals.items():
            self._add(mt, n, size, aligned)

    def rows(self, name_of, contains: str | None = None, exact: bool = False, sort: str = "size") -> list[TypeRow]:
        """One row per MethodTable with names from ``name_of(mt)``, sorted as SOS sorts them (``size``: by
        total size, then count), by ``count`` (then size) or by ``name``; ``contains``: keep only the types
        whose name contains the text (SOS -type), or is it with ``exact``."""
        out = []
        for mt, (n, size, aligned) in self.totals.items():
            name = name_of(mt)
            if contains is not None and (name is None or (name != contains if exact else contains not in name)):
                continue
            out.append(TypeRow(mt, name, n, size, aligned))
        out.sort(key=SORT_KEYS[sort])
        return out


#: the orders of ``stats`` rows, smallest first as ``!dumpheap -stat`` prints them (the largest last)
SORT_KEYS = {
    "size": lambda r: (r.total_size, r.count, r.method_table),
    "count": lambda r: (r.count, r.total_size, r.method_table),
    "name": lambda r: (r.name is None, r.name or "", r.method_table),
}


def top_rows(rows: list[TypeRow], n: int | None, sort: str) -> list[TypeRow]:
    """The ``n`` rows that matter most in ``rows`` (sorted by ``sort``), in the same order: the largest
    (the last ones) by size or count, the first by name; all of them when ``n`` is None."""
    if n is None or n >= len(rows):
        return rows
    return rows[:n] if sort == "name" else rows[len(rows) - n:]
