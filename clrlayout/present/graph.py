"""``refs``, ``roots`` and ``retained`` as tables (their JSON is the record itself): a root's chain a link a line,
a run of links through one field of one type collapsed (a linked list's ``._next`` 598 times)."""

from __future__ import annotations

from typing import Any

from .results import Result

#: a run of links of one field of one type at least this long is one line of the table
RUN = 3


def _via(field: str) -> str:
    """How the table shows the field that holds a link: ``.name``, ``.[i]``; a static by its type's name."""
    return field if field.endswith("(static)") or "thread static" in field else f".{field}"


def chain_lines(chain: list[dict[str, Any]]) -> list[str]:
    """The table's lines of a root's chain: a link a line, a run of links through one field of one type (a linked
    list: ``._next`` 598 times) one line with its count and its last object."""
    lines, i = [], 0
    while i < len(chain):
        link = chain[i]
        if "omitted" in link:
            lines.append(f"  ... {link['omitted']:,} links left out (--max-length)")
            i += 1
            continue
        j = i
        while j + 1 < len(chain) and link["field"] and "omitted" not in chain[j + 1] \
                and (chain[j + 1]["type"], chain[j + 1]["field"]) == (link["type"], link["field"]):
            j += 1
        via = f"  {_via(link['field'])}" if link["field"] else ""
        if j - i + 1 >= RUN:
            lines.append(f"  -> {link['address']} {link['type']}{via} ×{j - i + 1:,} (to {chain[j]['address']})")
            i = j + 1
        else:
            lines.append(f"  -> {link['address']} {link['type']}{via}")
            i += 1
    return lines


def refs_result(record: dict[str, Any]) -> Result:
    """``refs``' answer: the record, and its table."""
    return Result(lambda: refs_lines(record), document=record)


def roots_result(record: dict[str, Any], kinds: tuple[str, ...]) -> Result:
    """``roots``' answer: the record, and a root's chain a few lines each."""
    return Result(lambda: roots_lines(record, kinds), document=record)


def retained_result(record: dict[str, Any], by: str, kinds: tuple[str, ...], with_native: bool) -> Result:
    """``retained``'s answer: the record; the table of the largest retainers by object or by type."""
    return Result(lambda: retained_lines(record, by, kinds, with_native), document=record)


def refs_lines(record: dict[str, Any]) -> list[str]:
    lines = [f"{record['type']} at {record['address']} (size {record['size']:,}, "
             f"{'live' if record['live'] else 'dead'}, retains {record['retained_size']:,} bytes in "
             f"{record['retained_count']:,} objects)"]
    sections = ((("References", record["references"]),) if "references" in record else ()) + \
        (("Referenced by", record["referenced_by"]),)
    for title, rows in sections:
        lines.append(f"{title} ({len(rows):,}):")
        lines += [f"  {r['address']:>18} {r['field']:<28} {r['type']}" for r in rows]
    return lines


def roots_lines(record: dict[str, Any], kinds: tuple[str, ...]) -> list[str]:
    paths = record["paths"]
    lines = []
    if not paths:
        lines.append(f"{record['type']} at {record['address']} is not reachable from the roots "
                     f"({', '.join(kinds)}): it is dead")
    for p in paths:
        root = p["root"]
        where = f" of thread {root['thread']}" if "thread" in root else ""
        if "slot" in root:
            method = root.get("method") or f"MethodDesc {root['method_desc']}"
            where += f", frame {method} slot {root['slot']}"
        lines.append(f"{root['kind']}{where}" + (f" at {root['address']}:" if root["address"] != "0x0" else ":"))
        lines += chain_lines(p["chain"])
    lines.append(f"Found {len(paths):,} {'path' if len(paths) == 1 else 'paths'}.")
    return lines


def retained_lines(record: dict[str, Any], by: str, kinds: tuple[str, ...], with_native: bool) -> list[str]:
    lines = [f"Live: {record['live_objects']:,} objects, {record['live_bytes']:,} bytes (roots: {', '.join(kinds)})"]
    if by == "object":
        lines.append(f"{'Address':>18} {'Size':>10} {'Retained':>12} {'Objects':>9}"
                     + (f" {'Native':>10}" if with_native else "") + "  Type")
        for r in record["objects"]:
            held = "" if "static" not in r else f"  ({r['static']})" if "(thread static" in r["static"] \
                else f"  (static {r['static']})"
            extra = f" {r['native_bytes']:>10,}" if with_native else ""
            lines.append(f"{r['address']:>18} {r['size']:>10,} {r['retained_size']:>12,} {r['retained_count']:>9,}"
                         f"{extra}  {r['type']}{held}")
    else:
        lines.append(f"{'Count':>9} {'Size':>12} {'Retained':>12}  Type")
        lines += [f"{r['count']:>9,} {r['size']:>12,} {r['retained_size']:>12,}  {r['name']}"
                  for r in record["types"]]
    return lines
