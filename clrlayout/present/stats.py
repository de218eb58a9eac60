"""``clrlayout stats``: the statistics as tables, JSON or CSV."""

from __future__ import annotations

from .results import Result
from .text import counted, display_value, table

LABELS = {"object_headers": "object headers", "method_table_pointers": "MethodTable pointers",
          "lock_words": "lock words (Mono)", "length_fields": "length fields", "field_gaps": "field gaps",
          "characters": "characters", "terminators": "terminators",
          "extra_bytes": "extra bytes counted in BaseSize", "alignment_padding": "alignment padding"}
LOSSES = ("field_gaps", "extra_bytes", "alignment_padding")


def _n(v: int) -> str:
    return f"{v:,}"


def _pct(part: int, whole: int) -> str:
    return f"{100.0 * part / whole:.1f}%" if whole else "-"


def result(about: dict, stats, duplicates, top: int) -> Result:
    """``stats --type System.String``'s answer (with ``duplicates``: ``--duplicates``'s).  ``about``: runtime
    (flavor, version), arch, profile, exact, header_size (``commands.stats._about``)."""
    data = stats.as_dict()
    data.update(runtime=about["runtime"], arch=about["arch"], profile=about["profile"], exact=about["exact"])
    if duplicates is not None:
        found, total = duplicates
        data["duplicates"] = [d.as_dict() for d in found[:top]] if top else [d.as_dict() for d in found]
        data["duplicated_values"] = len(found)
        data["total_wasted_bytes"] = total
        rows = [{"value": d.value, "count": d.count, "aligned_size": d.aligned_size,
                 "wasted_bytes": d.wasted_bytes, "first_address": f"{d.first_address:#x}"}
                for d in (found[:top] if top else found)]
        return Result(lambda: duplicate_lines(duplicates, top, stats), rows,
                      ("value", "count", "aligned_size", "wasted_bytes", "first_address"), document=data)
    return Result(lambda: stats_lines(about, stats), _csv_rows(stats), ("table", "name", "count", "bytes"),
                  document=data)


def stats_lines(about: dict, r) -> list[str]:
    how = "exact heap walk" if about["exact"] else "checked scan"
    runtime = f"{about['runtime']['flavor']} {about['runtime']['version'] or '?'} {about['arch']}"
    lines = [f"System.String: {counted(r.count, 'object')} ({runtime}, {how})",
             f"  SOS size:        {r.total_size:,} bytes (BaseSize + 2 x length, summed)",
             f"  on the heap:     {r.total_aligned_size:,} bytes (aligned)",
             f"  characters:      {r.total_length:,} UTF-16 units", "", "Where the bytes go:"]
    rows = [[LABELS[k], _n(v), _pct(v, r.total_aligned_size)] for k, v in r.breakdown.items() if v]
    rows.append(["total", _n(r.total_aligned_size), "100.0%"])
    lines += table(["PART", "BYTES", "%"], rows, "lrr", indent="  ")
    losses = sum(r.breakdown[k] for k in LOSSES) + r.breakdown["object_headers"] - 4 * r.count \
        if about["header_size"] > 4 else sum(r.breakdown[k] for k in LOSSES)
    lines.append(f"  space losses (header padding, gaps, extra bytes, alignment): {losses:,} bytes "
                 f"({_pct(losses, r.total_aligned_size)})")
    lines += ["", "Heaps:"]
    lines += table(["HEAP", "COUNT", "BYTES"],
                   [[k.upper() if k in ("soh", "loh", "poh") else k, _n(v["count"]), _n(v["aligned_bytes"])]
                    for k, v in r.heaps.items()], "lrr", indent="  ")
    if r.gc_heaps:
        lines += ["", "GC heaps (server GC):"]
        lines += table(["GC HEAP", "COUNT", "BYTES"],
                       [[str(g["heap"]), _n(g["count"]), _n(g["aligned_bytes"])] for g in r.gc_heaps], "rrr",
                       indent="  ")
    lines += ["", "Lengths:"]
    lines += table(["LENGTH", "COUNT", "BYTES"],
                   [[_range(h), _n(h["count"]), _n(h["aligned_bytes"])] for h in r.histogram], "lrr", indent="  ")
    lines += ["", "Largest:"]
    lines += table(["ADDRESS", "LENGTH", "SIZE", "VALUE"],
                   [[x["address"], _n(x["length"]), _n(x["size"]), display_value(x["value"], 60)] for x in r.largest],
                   "lrrl", indent="  ")
    return lines


def _range(h) -> str:
    return str(h["min_length"]) if h["min_length"] == h["max_length"] else f"{h['min_length']}-{h['max_length']}"


def duplicate_lines(duplicates, top: int, r) -> list[str]:
    found, total = duplicates
    shown = found[:top] if top else found
    copies = sum(d.count for d in found)
    lines = table(["COUNT", "ALIGNED", "WASTED", "FIRST ADDRESS", "VALUE"],
                  [[_n(d.count), _n(d.aligned_size), _n(d.wasted_bytes), f"{d.first_address:#x}",
                    display_value(d.value, 60)] for d in shown],
                  "rrrll")
    if len(shown) < len(found):
        lines.append(f"... {len(found) - len(shown):,} more duplicated values (--top 0 lists all)")
    lines.append(f"Total: {counted(len(found), 'duplicated value')} in {copies:,} of {counted(r.count, 'string')}; "
                 f"{total:,} bytes wasted ({_pct(total, r.total_aligned_size)} of {r.total_aligned_size:,})")
    return lines


def _csv_rows(r) -> list[dict]:
    """The string statistics as rows of one table (CSV): the totals, where the bytes go, heaps, lengths."""
    def row(table, name, count, size):
        return {"table": table, "name": name, "count": count, "bytes": size}

    return ([row("total", "strings", r.count, r.total_aligned_size)]
            + [row("breakdown", k, None, v) for k, v in r.breakdown.items()]
            + [row("heap", k, v["count"], v["aligned_bytes"]) for k, v in r.heaps.items()]
            + [row("gc_heap", g["heap"], g["count"], g["aligned_bytes"]) for g in r.gc_heaps]
            + [row("histogram", _range(h), h["count"], h["aligned_bytes"]) for h in r.histogram])
