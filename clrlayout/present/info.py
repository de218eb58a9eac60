"""``clrlayout info``: the session's ``info`` dict as aligned text."""

from __future__ import annotations

from ..runtime.profiles import parse_version
from .text import table


def reasons(why: dict[str, int]) -> str:
    """Reasons and their counts (most first, as Session.why_unnamed gives them): "105 runtime Module not in
    the dump; 10 unreadable MethodTable"."""
    return "; ".join(f"{n:,} {reason}" for reason, n in why.items())


def contract_line(data: dict) -> str | None:
    """The contract descriptor's row: where it is, what it holds, what agrees; None for runtimes older than
    .NET 9 (none has one)."""
    d = data.get("contract_descriptor")
    rt = data["runtime"]
    version = parse_version(rt["version"])
    if d is None or rt["flavor"] != "coreclr" or (not d["found"] and version and version < (9,)):
        return None
    if not d["found"]:
        return f"none ({d['reason']})"
    text = f"{d['json_bytes']:,}-byte JSON at {d['address']} (from {d['where']}), {d['types']} types, " \
           f"{d['globals']} globals"
    if "layout_values_checked" in d:
        text += f"; {d['layout_values_checked']} layout values agree with the profiles"
        if d["mismatches"]:
            text += f", {len(d['mismatches'])} differ (see the warnings)"
    tables = d.get("method_tables", {})
    label = {"string": "String", "free": "free-object"}
    agree = [label.get(e["expected"], e["expected"]) for e in tables.values() if e["agrees"]]
    if agree:
        text += f"; its {', '.join(agree)} MethodTables are the ones clrlayout finds"
    differ = [n for n, e in tables.items() if e["agrees"] is False]
    if differ:
        text += f"; {', '.join(differ)} differ (see the warnings)"
    unchecked = [label.get(e["expected"], e["expected"]) for e in tables.values() if e["agrees"] is None]
    if unchecked:
        text += f"; {', '.join(unchecked)} not checked (not in the dump, or unnamed)"
    return text


def info_record(info: dict) -> dict:
    """``info --format json``: the model's :class:`~clrlayout.model.DumpInfo` with its addresses in hex."""
    def hexed(value):
        return None if value is None else f"{value:#x}"

    data = dict(info)
    rt = data["runtime"]
    if rt["module"] is not None:
        data["runtime"] = dict(rt, module=dict(rt["module"], base=hexed(rt["module"]["base"])))
    data["other_streams"] = [hexed(t) for t in data["other_streams"]]
    heap = dict(data["gc_heap"])
    if heap["gc_dac_vars"] is not None:
        heap["gc_dac_vars"] = dict(heap["gc_dac_vars"], address=hexed(heap["gc_dac_vars"]["address"]))
    heap["segments"] = [dict(s, start=hexed(s["start"]), end=hexed(s["end"])) for s in heap["segments"]]
    data["gc_heap"] = heap
    data["string_method_table"] = hexed(data["string_method_table"])
    contract = data["contract_descriptor"]
    if contract.get("found"):
        data["contract_descriptor"] = dict(contract, address=hexed(contract["address"]), method_tables={
            name: dict(m, method_table=hexed(m["method_table"])) for name, m in contract["method_tables"].items()})
    return data


def info_lines(data: dict) -> list[str]:
    """The table of :func:`info_record`'s record."""
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
        ("Runtime", f"{rt['flavor']} {rt['version'] or '(version unknown)'} (from {rt['version_source']})"),
    ]
    crash = data.get("crash")
    if crash:
        why = f"signal {crash['signal']}" + (f" ({crash['signal_name']})" if crash.get("signal_name") else "") \
            if "signal" in crash else f"exception {crash['code']:#010x} at {crash['address']:#x}"
        text = f"thread {crash['thread']} ({crash['thread']:#x})" + \
            (f", managed thread {crash['managed_id']}" if crash.get("managed_id") is not None else "") + f": {why}"
        exception = crash.get("exception")
        if exception:
            text += f"; in flight: {exception['type']} at {exception['address']:#x}" + \
                (f": {exception['message']}" if exception.get("message") else "")
        rows.append(("Crash", text))
    if data.get("redaction"):
        from ..dump.redaction import describe
        from ..errors import as_flags

        rows.append(("Redacted", as_flags(describe(data["redaction"])[len("redacted "):])))
    if rt["module"]:
        rows.append(("Runtime module", f"{rt['module']['path']} at {rt['module']['base']}"))
    prof = data["profile"]
    rows.append(("Layout profile", prof["name"] + (f" with overrides {', '.join(prof['overrides'])}"
                                                  if prof["overrides"] else "")))
    rows.append(("Memory", f"{data['memory']['ranges']:,} ranges, {data['memory']['bytes']:,} bytes"))
    if data.get("other_streams"):
        rows.append(("Other streams", ", ".join(data["other_streams"]) + " (not read)"))
    how = "exact heap walk from GcDacVars" if heap["exact"] else "checked object scan (heuristic)"
    how += f", {heap['gc_mode']} GC" if heap["gc_mode"] else ""
    if heap["exact"] and heap.get("missing_bytes"):
        how += f"; incomplete: {heap['missing_bytes']:,} bytes of the heap are not in the dump"
    rows.append(("GC heap", how))
    if heap["gc_dac_vars"]:
        dv = heap["gc_dac_vars"]
        rows.append(("GcDacVars", f"version {dv['version']} at {dv['address']}"))
    mt = data.get("string_method_table")
    rows.append(("String MethodTable", f"{mt} (BaseSize {data.get('string_method_table_base_size')})" if mt
                 else "not found"))
    types = data.get("types")
    if types:
        text = f"{types['method_tables']:,} MethodTables on the heap, {types['named']:,} named"
        if types["unnamed"]:
            text += f", {types['unnamed']:,} without a name ({reasons(types['why_unnamed'])})"
        rows.append(("Types", text))
    contract = contract_line(data)
    if contract:
        rows.append(("Contract descriptor", contract))
    width = max(len(k) for k, _ in rows) + 1
    lines = [f"{k + ':':<{width}} {v}" for k, v in rows]
    if heap["segments"]:
        lines.append("")
        lines.append("GC heap segments:")
        seg_rows = [[s["kind"] + (" (ephemeral)" if s["ephemeral"] else ""), s["start"], s["end"], s["size"]]
                    for s in heap["segments"]]
        lines += table(["kind", "start", "end", "bytes"], seg_rows, "lllr", indent="  ")
    return lines
