"""!dumpheap -stat as text, JSON and CSV: one row per MethodTable, smallest total first, and a total line."""

from __future__ import annotations

import csv
import io

from .jsonout import csv_value, dumps
from .text import counted, table

UNKNOWN = "<unknown type, MT {:#x}>"


def name_of(row) -> str:
    return row.name if row.name is not None else UNKNOWN.format(row.method_table)


def render(a, rows, fmt: str, shown=None) -> list[str]:
    """``rows``: every type's; ``shown``: the ones to list (--top), all by default.  Totals count all."""
    shown = rows if shown is None else shown
    count = sum(r.count for r in rows)
    size = sum(r.total_size for r in rows)
    aligned = sum(r.total_aligned_size for r in rows)
    if fmt == "json":
        return [dumps({"types": [r.as_dict() for r in shown], "type_count": len(rows), "count": count,
                       "total_size": size,
                       "total_aligned_size": aligned, "exact": a.heap.exact,
                       "runtime": {"flavor": a.runtime.flavor, "version": a.runtime.version}})]
    if fmt == "csv":
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(["method_table", "name", "count", "total_size", "total_aligned_size"])
        for r in shown:
            w.writerow([f"{r.method_table:#x}", csv_value(r.name) if r.name is not None else "", r.count,
                        r.total_size, r.total_aligned_size])
        return buf.getvalue().rstrip("\n").split("\n")
    width = 2 * a.profile.pointer_size
    lines = ["Statistics:"]
    lines += table(["MT".rjust(width), "Count", "TotalSize", "Class Name"],
                   [[f"{r.method_table:0{width}x}", f"{r.count:,}", f"{r.total_size:,}", name_of(r)] for r in shown],
                   "rrrl")
    lines.append(f"Total {counted(count, 'object')}, {counted(size, 'byte')}"
                 + (f" in {counted(len(rows), 'type')} ({len(shown):,} shown)" if len(shown) < len(rows) else ""))
    return lines
