"""``clrlayout info``: the analysis as a JSON-ready dict, and that dict as aligned text."""

from __future__ import annotations

from ..errors import ClrLayoutError
from .text import table


def info_dict(a) -> dict:
    d = a.dump
    ptr = d.pointer_size
    data = {
        "path": d.path,
        "format": d.format,
        "os": d.os,
        "os_version": d.os_version,
        "arch": d.arch,
        "pointer_size": ptr,
        "process": {"pid": d.pid, "name": d.process_name, "threads": d.threads},
        "runtime": {
            "flavor": a.runtime.flavor,
            "version": a.runtime.version,
            "version_source": a.runtime.version_source,
            "module": None if a.runtime.module is None else {
                "path": a.runtime.module.path, "base": f"{a.runtime.module.base:#x}", "size": a.runtime.module.size},
        },
        "profile": {"name": a.profile.name, "overrides": list(a.profile.applied_overrides),
                    "string_base_size": a.profile.string.base_size},
        "memory": {"ranges": len(d.memory.regions), "bytes": d.memory.total_bytes},
        "gc_heap": {
            "method": a.heap.method,
            "exact": a.heap.exact,
            "gc_mode": a.heap.gc_mode,
            "gc_dac_vars": None if a.heap.dac_vars is None else {
                "address": f"{a.heap.dac_vars.address:#x}",
                "version": f"{a.heap.dac_vars.major}.{a.heap.dac_vars.minor}",
                "generation_size": a.heap.dac_vars.generation_size},
            "segments": [{"kind": s.kind, "start": f"{s.start:#x}", "end": f"{s.end:#x}", "size": s.size,
                          "ephemeral": s.ephemeral} for s in a.heap.segments],
        },
    }
    try:
        mt = a.string_method_table()
        m = a.mts.get(mt)
        data["string_method_table"] = f"{mt:#x}"
        data["string_method_table_base_size"] = m.base_size if m else None
    except ClrLayoutError as e:
        data["string_method_table"] = None
        a.warnings.append(str(e))
    data["warnings"] = list(a.warnings)
    return data


def info_lines(data: dict) -> list[str]:
    ptr = data["pointer_size"]
    rt = data["runtime"]
    proc = data["process"]
    heap = data["gc_heap"]
    rows = [
        ("File", data["path"]),
        ("Format", f"{data['format']} ({data['arch']}, {ptr}-byte pointers)"),
        ("OS", data["os"] + (f" {data['os_version']}" if data["os_version"] else "")),
        ("Process", ", ".join(x for x in (proc["name"], proc["pid"] and f"pid {proc['pid']}",
                                           f"{proc['threads']} threads") if x)),
        ("Runtime", f"{rt['flavor']} {rt['version'] or '(version unknown)'} (from the {rt['version_source']})"),
    ]
    if rt["module"]:
        rows.append(("Runtime module", f"{rt['module']['path']} at {rt['module']['base']}"))
    prof = data["profile"]
    rows.append(("Layout profile", prof["name"] + (f" with overrides {', '.join(prof['overrides'])}"
                                                  if prof["overrides"] else "")))
    rows.append(("Memory", f"{data['memory']['ranges']:,} ranges, {data['memory']['bytes']:,} bytes"))
    how = "exact heap walk from GcDacVars" if heap["exact"] else "checked object scan (heuristic)"
    rows.append(("GC heap", how + (f", {heap['gc_mode']} GC" if heap["gc_mode"] else "")))
    if heap["gc_dac_vars"]:
        dv = heap["gc_dac_vars"]
        rows.append(("GcDacVars", f"version {dv['version']} at {dv['address']}"))
    mt = data.get("string_method_table")
    rows.append(("String MethodTable", f"{mt} (BaseSize {data.get('string_method_table_base_size')})" if mt
                 else "not found"))
    width = max(len(k) for k, _ in rows) + 1
    lines = [f"{k + ':':<{width}} {v}" for k, v in rows]
    if heap["segments"]:
        lines.append("")
        lines.append("GC heap segments:")
        seg_rows = [[s["kind"] + (" (ephemeral)" if s["ephemeral"] else ""), s["start"], s["end"], s["size"]]
                    for s in heap["segments"]]
        lines += table(["kind", "start", "end", "bytes"], seg_rows, "lllr", indent="  ")
    return lines
