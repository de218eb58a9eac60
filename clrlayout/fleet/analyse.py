"""One dump's rows of the fleet's tables, computed in this process: ``info``, ``stats`` by type, ``memory``
and, when the object graph can be built, ``retained --by type``.  :mod:`clrlayout.fleet.worker` runs it in a
process of its own; an error of the dump becomes the row's error (its code, message and exit code)."""

from __future__ import annotations

import hashlib
import time

from ..errors import ClrLayoutError, as_flags
from ..model.heap import ROOT_KINDS

HASH_BLOCK = 1 << 20


def sha256_of(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(HASH_BLOCK):
            digest.update(block)
    return digest.hexdigest()


def analyse(path: str, roots=ROOT_KINDS, retained: bool = True) -> dict:
    """``{"dump": {...}, "types": [...], "memory": [...], "native": [...]}`` for the dump at ``path`` (one row of
    ``dumps``; the dump's rows of ``types``, ``memory`` and ``native``, without the path, which the writer adds)."""
    from ..limits import limits_from_env
    from ..model import open as open_dump

    started = time.monotonic()
    row: dict = {"exact": None, "error_code": None, "exit_code": None, "error": None, "warnings": []}
    types: list = []
    memory: list = []
    native: list = []
    try:
        with open_dump(path, limits=limits_from_env()) as dump:
            rt = dump.runtime
            row.update(format=dump.format, arch=dump.arch, os=dump.os, runtime=rt.flavor, version=rt.version,
                       gc_mode=rt.heap.gc_mode, exact=bool(rt.heap.exact))
            memory = _memory_rows(dump)
            native = _native_rows(dump)
            types = _type_rows(dump, roots if retained else None, row)
            row.update(objects=sum(t["count"] for t in types), object_bytes=sum(t["bytes"] for t in types))
            unnamed = rt.unnamed_warning([t["method_table"] for t in types])
            findings = dump.findings
            row["warnings"] = [*dump.warnings, *([unnamed] if unnamed else []), *(str(f) for f in findings)]
            if findings.count > len(findings.items):
                row["warnings"].append(f"... and {findings.count - len(findings.items)} more findings")
    except ClrLayoutError as e:
        types = []  # an answer cut short is no answer: the row says why
        row.update(error_code=e.code, exit_code=int(e.exit_code), error=str(e))
    except MemoryError:
        types = []
        row.update(error_code="memory-limit", error="the analysis ran out of memory (over the memory limit)")
    row["seconds"] = round(time.monotonic() - started, 3)
    # the messages as the command line says them (--assemblies DIR, not assemblies=DIR): fleet is a command's
    for name in ("error", "graph_error"):
        if row.get(name) is not None:
            row[name] = as_flags(row[name])
    row["warnings"] = [as_flags(w) for w in row["warnings"]]
    return {"dump": row, "types": types, "memory": memory, "native": native}


def _native_rows(dump) -> list:
    """A row per arena and per size class of glibc's malloc, where the dump has it to read (else none)."""
    from ..model.native import figures

    view = dump.native_heap_if_any()
    if view is None:
        return []
    rows = []
    for a in figures.arena_rows(view.heap):
        free = a["tcache"]["count"] + a["fastbins"]["count"] + a["bins_only"]["count"]
        rows.append({"row": "arena", "arena": f"{a['address']:#x}" if a["address"] else None, "main": a["main"],
                     "threads": len(a["threads"]), "system_bytes": a["system_bytes"],
                     "in_use_count": a["in_use"]["count"], "in_use_bytes": a["in_use"]["bytes"],
                     "free_count": free, "free_bytes": a["free"]["at_top"] + a["free"]["trapped"]})
    for c in figures.size_classes(view.heap):
        rows.append({"row": "size_class", "in_use_count": c["in_use"]["count"], "in_use_bytes": c["in_use"]["bytes"],
                     "free_count": c["free"]["count"], "free_bytes": c["free"]["bytes"], "from_bytes": c["from"],
                     "to_bytes": c["to"]})
    return rows


def _memory_rows(dump) -> list:
    return [{"kind": kind, "ranges": n, "bytes": size} for kind, (n, size) in dump.memory_map(jobs=1).kinds().items()]


def _type_rows(dump, roots, row: dict) -> list:
    """``stats --format json``'s rows, with each type's retained bytes when the object graph is built."""
    from ..model.graphanswers import object_graph

    dump.require_exact("statistics by type")  # as `stats`: no exact walk, no types (the row says why)
    totals = dump.runtime.heap.type_totals(jobs=1).totals
    retained: dict | None = None
    if roots is not None:
        try:
            graph = object_graph(dump, tuple(roots))
            retained = {mt: kept for mt, (_, _, kept) in graph.by_type().items()}
            row.update(live_objects=int(graph.live.sum()), live_bytes=int(graph.graph.aligned[graph.live].sum()))
        except ClrLayoutError as e:  # the dump lacks what the roots are read from: no retained sizes, said why
            row["graph_error"] = str(e)
    out = []
    for mt, (count, size, aligned) in sorted(totals.items(), key=lambda kv: (kv[1][1], kv[0])):
        out.append({"method_table": mt, "name": dump.runtime.type_name(mt), "count": count, "bytes": size,
                    "aligned_bytes": aligned, "retained": None if retained is None else retained.get(mt, 0)})
    return out


