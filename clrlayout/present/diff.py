"""``clrlayout diff`` as a table, JSON or CSV."""

from __future__ import annotations

from .results import Result


def result(diff, top: int | None, native: list | None = None) -> Result:
    """``diff``'s answer: a row per type (the largest growth first; ``top``: only that many, and none unchanged),
    totals, the strings whose count grew; ``native``: ``--native``'s rows (size classes and owners)."""
    rows = diff.rows if top is None else [r for r in diff.rows if r.status != "same"][:top]
    sides = diff.dumps
    totals = {"count": [sum(v[0] for v in s.types.values()) for s in sides],
              "bytes": [sum(v[1] for v in s.types.values()) for s in sides]}
    data = {"before": sides[0].as_dict(), "after": sides[-1].as_dict()}
    if len(sides) > 2:
        data["dumps"] = [s.as_dict() for s in sides]
    data["types"] = [r.as_dict() for r in rows]
    data["totals"] = {"count_before": totals["count"][0], "count_after": totals["count"][-1],
                      "bytes_before": totals["bytes"][0], "bytes_after": totals["bytes"][-1],
                      "delta_count": totals["count"][-1] - totals["count"][0],
                      "delta_bytes": totals["bytes"][-1] - totals["bytes"][0]}
    if diff.strings:
        data["strings"] = [{"value": v, "counts": c, "delta": c[-1] - c[0]} for v, c in diff.strings[:top or 20]]
    data["warnings"] = diff.warnings
    if native is not None:
        data["native"] = native
    n = len(sides)
    columns = ("name", "status", *[f"count_{i}" for i in range(n)], *[f"bytes_{i}" for i in range(n)], "delta_count",
               "delta_bytes")
    csv_rows = [dict(zip(columns, [r.name, r.status, *r.counts, *r.sizes, r.delta_count, r.delta_bytes]))
                for r in rows]

    def text() -> list[str]:
        lines = _lines(diff, rows, totals, top)
        return lines + (native_lines(native, top) if native is not None else [])

    return Result(text, None if native is not None else csv_rows, columns, document=data)


def _lines(diff, rows, totals, top) -> list[str]:
    sides = diff.dumps
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
    if diff.strings:
        lines += ["", "Duplicated strings whose count grew most:"]
        for value, counts in diff.strings[:top or 20]:
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
