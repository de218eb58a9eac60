"""``clrlayout native``: glibc's malloc state as a table, JSON, or (chunks, leaks) JSON Lines.  Addresses become
hex strings here; sizes stay numbers (docs/guide/native.md names every field)."""

from __future__ import annotations

from collections.abc import Iterable

from .results import Result
from .text import hexaddr, table

#: the fields whose values are addresses, wherever they sit in the JSON
ADDRESSES = {"address", "main_arena", "mp", "arena", "owner"}


def owner_rows(rows: list[dict]) -> list[str]:
    lines = ["Native bytes by the managed type that holds them (live objects):"]
    lines += table(["Type", "Objects", "Chunks", "Bytes"],
                   [[r["type"], f"{r['objects']:,}", f"{r['chunks']:,}", f"{r['bytes']:,}"] for r in rows],
                   "lrrr", indent="  ")
    return lines


def _hex(value):
    if isinstance(value, dict):
        return {k: (f"{v:#x}" if k in ADDRESSES and isinstance(v, int) else _hex(v)) for k, v in value.items()}
    if isinstance(value, list):
        return [_hex(v) for v in value]
    if isinstance(value, bytes):
        return value.hex()
    return value


def summary_result(summary: dict) -> Result:
    """``native``'s answer: the arenas, glibc's own figures, the size classes (JSON: addresses in hex)."""
    record = dict(summary)
    record["arenas"] = [dict(a, heap_ranges=[[f"{s:#x}", f"{e:#x}"] for s, e in a["heap_ranges"]])
                        for a in record["arenas"]]
    mallinfo = record.pop("mallinfo")  # glibc's own names: its "arena" is a byte count, not an address
    document = _hex(record)
    document["mallinfo"] = mallinfo
    return Result(lambda: summary_lines(summary), document=document)


def chunks_result(chunks: Iterable[dict], leaks: bool) -> Result:
    """``native --chunks`` or ``--leaks``: a chunk a row (JSON: addresses in hex, a leak's first bytes in hex);
    ``chunks`` is read once, by the one form asked for."""
    return Result(lambda: chunk_rows(chunks, leaks), (_chunk_record(c) for c in chunks), rows_key="chunks")


def owners_result(rows: list) -> Result:
    """``native --by owner``: native bytes per managed type."""
    return Result(lambda: owner_rows(rows), rows, rows_key="owners")


def _chunk_record(chunk: dict) -> dict:
    record = dict(chunk)
    if "preview" in record:
        record["preview"] = record["preview"].hex()
    return _hex(record)


def _cb(c: dict) -> str:
    return f"{c['count']:,} / {c['bytes']:,}"


def summary_lines(summary: dict, reach: dict | None = None) -> list[str]:
    libc = summary["libc"] or "no mapped file is libc: its data found in the dump's memory"
    lines = [f"glibc {summary['version']} malloc ({libc}; layout {summary['layout']}, version from "
             f"{summary['version_source']})"]
    rows = []
    for a in summary["arenas"]:
        rows.append([hexaddr(a["address"], 8), "main" if a["main"] else "thread",
                     ",".join(str(t) for t in a["threads"]) or "-", a["heaps"], f"{a['system_bytes']:,}",
                     _cb(a["in_use"]), _cb(a["tcache"]), _cb(a["fastbins"]), _cb(a["bins_only"]),
                     f"{a['top_bytes']:,}", f"{a['free']['trapped']:,}"])
    lines += ["", "Arenas (count / bytes):"]
    lines += table(["Arena", "Kind", "Threads", "Heaps", "System", "In use", "tcache", "Fastbins", "Bins", "Top",
                    "Trapped free"], rows, "llrrrrrrrrr", indent="  ")
    mm = summary["mmapped"]
    lines += ["", f"Mmapped chunks: {mm['count']:,} of {mm['bytes']:,} bytes"
              + (f" (glibc counts {mm['glibc_count']:,} of {mm['glibc_bytes']:,})" if "glibc_count" in mm else "")]
    if summary["size_classes"]:
        lines += ["", "Size classes (chunk bytes; count / bytes):"]
        lines += table(["From", "To", "In use", "Free"],
                       [[f"{r['from']:,}", f"{r['to']:,}", _cb(r["in_use"]), _cb(r["free"])]
                        for r in summary["size_classes"]], "rrrr", indent="  ")
    t = summary["totals"]
    lines += ["", f"Total: {t['arenas']} arenas, {t['chunks']:,} chunks, {t['system_bytes']:,} bytes from the system; "
                  f"in use {_cb(t['in_use'])}, tcache {_cb(t['tcache'])}, fastbins {_cb(t['fastbins'])}, "
                  f"bins {_cb(t['bins'])}, top {t['top_bytes']:,}, arena overhead {t['overhead_bytes']:,}"]
    if summary["mallinfo"] is not None:
        lines += ["mallinfo2: " + ", ".join(f"{k} {v:,}" for k, v in summary["mallinfo"].items())]
    if reach is not None:
        lines += [f"Reachability: leaked {_cb(reach['leaked'])}, held from roots {_cb(reach['from_roots'])}, held "
                  f"only through other chunks {_cb(reach['through_chunks'])}"]
    return lines


def chunk_rows(chunks, leaks: bool) -> list[str]:
    chunks = list(chunks)
    owned = any("owner" in c for c in chunks)
    headers = ["Address", "Size", "State", "Arena"] + (["Owner"] if owned and not leaks else []) \
        + (["Preview"] if leaks else [])
    rows = []
    for c in chunks:
        row = [hexaddr(c["address"], 8), f"{c['size']:,}", c["state"],
               hexaddr(c["arena"], 8) if c["arena"] is not None else "-"]
        if owned and not leaks:
            row.append(f"{hexaddr(c['owner'], 8)} {c['owner_type']}" if c.get("owner") else "-")
        if leaks:
            row.append(_preview(c["preview"]))
        rows.append(row)
    return table(headers, rows, "lrll" + ("l" if leaks else ""))


def _preview(data: bytes) -> str:
    text = "".join(chr(b) if 32 <= b < 127 else "." for b in data)
    return f"{data[:16].hex(' ')}  {text}"
