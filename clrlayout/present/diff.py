"""``clrlayout diff`` as a table, JSON or CSV."""

from __future__ import annotations

import csv
import io

from .jsonout import dumps


def render(result, fmt: str, top: int | None) -> list[str]:
    rows = result.rows if top is None else [r for r in result.rows if r.status != "same"][:top]
    sides = result.dumps
    totals = {"count": [sum(v[0] for v in s.types.values()) for s in sides],
              "bytes": [sum(v[1] for v in s.types.values()) for s in sides]}
    if fmt == "json":
        data = {"before": sides[0].as_dict(), "after": sides[-1].as_dict()}
        if len(sides) > 2:
            data["dumps"] = [s.as_dict() for s in sides]
        data["types"] = [r.as_dict() for r in rows]
        data["totals"] = {"count_before": totals["count"][0], "count_after": totals["count"][-1],
                          "bytes_before": totals["bytes"][0], "bytes_after": totals["bytes"][-1],
                          "delta_count": totals["count"][-1] - totals["count"][0],
                          "delta_bytes": totals["bytes"][-1] - totals["bytes"][0]}
        if result.strings:
            data["strings"] = [{"value": v, "counts": c, "delta": c[-1] - c[0]} for v, c in result.strings[:top or 20]]
        data["warnings"] = result.warnings
        return [dumps(data)]
    if fmt == "csv":
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(["name", "status", *[f"count_{i}" for i in range(len(sides))],
                    *[f"bytes_{i}" for i in range(len(sides))], "delta_count", "delta_bytes"])
        for r in rows:
            w.writerow([r.name, r.status, *r.counts, *r.sizes, r.delta_count, r.delta_bytes])
        return buf.getvalue().rstrip("\n").split("\n")
    lines = [f"{i}: {s.path} ({s.runtime} {s.arch})" for i, s in enumerate(sides)]
    retained = bool(rows and rows[0].retained)
    head = [f"{'Count ' + str(i):>10}" for i in range(len(sides))] + \
        [f"{'Bytes ' + str(i):>12}" for i in range(len(sides))]
    lines.append("  ".join([*head, f"{'+Count':>9}", f"{'+Bytes':>12}", *([f"{'+Retained':>12}"] if retained else []),
                            "Type"]))
    for r in rows:
        mark = {"new": " (new)", "gone": " (gone)"}.get(r.status,
                                                        "") + (" (grew every step)" if r.grew_every_step else "")
        lines.append("  ".join([*(f"{c:>10,}" for c in r.counts), *(f"{b:>12,}" for b in r.sizes),
                                f"{r.delta_count:>+9,}", f"{r.delta_bytes:>+12,}",
                                *([f"{r.delta_retained:>+12,}"] if retained else []), r.name + mark]))
    lines.append("Total: " + ", ".join(f"{c:,} objects, {b:,} bytes" for c, b in zip(totals["count"], totals["bytes"]))
                 + f"; change {totals['count'][-1] - totals['count'][0]:+,} objects, "
                   f"{totals['bytes'][-1] - totals['bytes'][0]:+,} bytes")
    if result.strings:
        lines += ["", "Duplicated strings whose count grew most:"]
        for value, counts in result.strings[:top or 20]:
            lines.append(f"  {' -> '.join(f'{c:,}' for c in counts)}  {value[:80]!r}")
    return lines


def native_lines(rows: list, top: int | None) -> list[str]:
    """``diff --native``'s two tables: in-use chunks by size class, native bytes by owning type."""
    from .text import table

    lines = []
    for kind, title in (("size class", "Native heap, in-use chunks by size class (bytes):"),
                        ("owner", "Native bytes by the managed type that owns them:")):
        part = [r for r in rows if r["kind"] == kind][:top]
        if not part:
            continue
        n = len(part[0]["bytes"])
        lines += ["", title]
        lines += table([kind.capitalize()] + [f"Dump {i + 1}" for i in range(n)] + ["Change"],
                       [[r["key"]] + [f"{b:,}" for b in r["bytes"]] + [f"{r['delta_bytes']:+,}"] for r in part],
                       "l" + "r" * (n + 1), indent="  ")
    return lines
