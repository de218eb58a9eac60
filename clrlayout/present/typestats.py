"""!dumpheap -stat as text, JSON and CSV: one row per MethodTable, smallest total first, and a total line."""

from __future__ import annotations

from .results import Result
from .text import counted, table

UNKNOWN = "<unknown type, MT {:#x}>"


def name_of(row) -> str:
    return row.name if row.name is not None else UNKNOWN.format(row.method_table)


def result(about: dict, rows, shown=None) -> Result:
    """``stats``' answer by type (``!dumpheap -stat``).  ``rows``: every type's; ``shown``: the ones to list
    (--top), all by default.  Totals count all.  ``about``: runtime (flavor, version), exact, pointer_size
    (``commands.stats._about``)."""
    shown = rows if shown is None else shown
    totals = {"type_count": len(rows), "count": sum(r.count for r in rows),
              "total_size": sum(r.total_size for r in rows),
              "total_aligned_size": sum(r.total_aligned_size for r in rows), "exact": about["exact"],
              "runtime": about["runtime"]}
    return Result(lambda: _lines(about, rows, shown, totals), [r.as_dict() for r in shown],
                  ("method_table", "name", "count", "total_size", "total_aligned_size"), "types", totals)


def _lines(about: dict, rows, shown, totals: dict) -> list[str]:
    count, size = totals["count"], totals["total_size"]
    width = 2 * about["pointer_size"]
    lines = ["Statistics:"]
    lines += table(["MT".rjust(width), "Count", "TotalSize", "Class Name"],
                   [[f"{r.method_table:0{width}x}", f"{r.count:,}", f"{r.total_size:,}", name_of(r)] for r in shown],
                   "rrrl")
    lines.append(f"Total {counted(count, 'object')}, {counted(size, 'byte')}"
                 + (f" in {counted(len(rows), 'type')} ({len(shown):,} shown)" if len(shown) < len(rows) else ""))
    return lines
