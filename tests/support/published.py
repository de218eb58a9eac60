"""Dumps of other makers' published single-file apps (sample_dumps/runtimes.py PUBLISHED_SINGLE_FILE), taken as
a user takes one: the app downloaded from the npm registry and running, dumped by .NET 8.0.4's createdump --full
(a single-file app ships none).  Sarif.Multitool runs the strings target as its startup hook (whose truth file
names strings and their addresses); the two MCP servers, trimmed apps that run no startup hook, are dumped after
answering an MCP client's ``initialize`` and ``tools/list`` on their standard input (every tool's type loaded)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

SAMPLES = Path(__file__).resolve().parents[2] / "sample_dumps"
TIMEOUT = 300

#: what an MCP client says first (the Model Context Protocol's stdio transport: one JSON-RPC message a line)
MCP_REQUESTS = [
    {"jsonrpc": "2.0", "id": 1, "method": "initialize",
     "params": {"protocolVersion": "2024-11-05", "capabilities": {},
                "clientInfo": {"name": "clrlayout", "version": "1"}}},
    {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
]


def _samples():
    sys.path.insert(0, str(SAMPLES))
    import make_dumps
    import runtimes

    return make_dumps, runtimes


def dump_published(app: str, build: Path, work: Path) -> tuple[Path, Path | None, str]:
    """(the core, the strings target's truth file or None, the .NET version the app says it links)."""
    make_dumps, runtimes = _samples()
    exe = runtimes.single_file_app(app)
    version = runtimes.PUBLISHED_SINGLE_FILE[app][3]
    work.mkdir(parents=True, exist_ok=True)
    raw, truth = work / f"{app}.core", None
    env = dict(os.environ, DOTNET_SYSTEM_GLOBALIZATION_INVARIANT="1")
    if app == "sarif-multitool":
        truth = work / f"truth-{app}.json"
        env.update(DOTNET_STARTUP_HOOKS=str(build / "strings.dll"), CLRLAYOUT_TRUTH=str(truth),
                   CLRLAYOUT_STALE=make_dumps.STALE_COUNT)
        proc, pid = make_dumps.start_target([exe], env)
    else:
        proc = subprocess.Popen([str(exe), "server", "start"], env=env, cwd=exe.parent, stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        pid = proc.pid
        for request in MCP_REQUESTS:
            proc.stdin.write(json.dumps(request) + "\n")
            proc.stdin.flush()
            answer = json.loads(proc.stdout.readline())
            assert answer.get("id") == request["id"] and "result" in answer, answer
    try:
        subprocess.run([str(runtimes.get("8.0.4").createdump), "--full", "-f", str(raw), str(pid)], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=TIMEOUT)
    finally:
        proc.kill()
        proc.wait()
    return raw, truth, version


def published_exe(app: str) -> Path:
    """The app's executable (downloaded on first use)."""
    return _samples()[1].single_file_app(app)


def bundled_type_names(exe: Path, also: tuple[Path, ...] = ()) -> set[str]:
    """Every TypeDef's full name (``Namespace.Outer+Nested``, generic arity kept) in the assemblies bundled in a
    single-file app's executable and in ``also`` (a startup hook's), read by dnfile: the truth a type's name is
    checked against."""
    from clrlayout.types.bundle import ASSEMBLY, find_bundle

    with open(exe, "rb") as f:
        data = f.read()
    bundle = find_bundle(lambda o, n: data[o : o + n], len(data))
    assert bundle is not None, exe
    images = [bundle.contents(e, 1 << 30) for e in bundle.files if e.type == ASSEMBLY]
    return set().union(*(_type_names(image) for image in images + [p.read_bytes() for p in also]))


def _type_names(image: bytes) -> set[str]:
    import dnfile
    import pefile

    # only the CLR directory (pefile's others: relocations, resources, ... are not read) and of its tables only the
    # two read here
    pe = dnfile.dnPE(data=image, fast_load=True, clr_lazy_load=True)
    pe.parse_data_directories(directories=[pefile.DIRECTORY_ENTRY["IMAGE_DIRECTORY_ENTRY_COM_DESCRIPTOR"]])
    tables = {t.name: t for t in pe.net.mdtables.tables_list}  # (an absent table's attribute parses them all)
    rows = list(tables.get("TypeDef", []))
    # the raw row numbers (resolving a row's reference parses every table)
    nested = {r.struct.NestedClass_Index: r.struct.EnclosingClass_Index for r in tables.get("NestedClass", [])}

    def full(i: int, depth: int = 0) -> str:
        row = rows[i - 1]
        if i in nested and depth < 16:
            return f"{full(nested[i], depth + 1)}+{row.TypeName}"
        return f"{row.TypeNamespace}.{row.TypeName}" if str(row.TypeNamespace) else str(row.TypeName)

    return {full(i) for i in range(1, len(rows) + 1)}  # (no pe.close(): it runs gc.collect(), 30 ms an image)
