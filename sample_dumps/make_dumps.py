#!/usr/bin/env python3
"""Regenerate the sample dumps of clrlayout from the project's own target programs.

    python sample_dumps/make_dumps.py                  # all of them
    python sample_dumps/make_dumps.py --only linux-x64  # one of linux-x64, linux-x64-svr, win-x64, win-x86, win-x86-svr

What it does, per dump:
1. compiles targets/strings/Program.cs (and targets/minidumper/Program.cs) with Mono's C# compiler (mcs);
2. runs the target on CoreCLR 3.1.23: on Linux with the dotnetcore2 runtime (pip install 'clrlayout[live]'),
   on Windows x64/x86 under Wine 8 with the Windows builds of the same runtime (pip download of the
   dotnetcore2 wheels for win_amd64 / win32);
3. waits for the target's "READY", then writes a dump of it: createdump (ELF core, --withheap) on Linux,
   dbghelp!MiniDumpWriteDump(MiniDumpWithFullMemory) from a second process under Wine;
4. trims the dump with `clrlayout trim` and stores it with the target's truth file (what the runtime itself
   said about its strings) and a MANIFEST.toml entry (sha256, format, arch, runtime, command).

Needs: mono-mcs; for Windows dumps wine, wine64, wine32:i386 (see ../shared/docs/windows-dumps-with-wine.md).
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
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import runtimes  # noqa: E402
from clrlayout.live import embedded  # noqa: E402
from clrlayout.trim import trim  # noqa: E402

TARGETS = HERE / "targets"
STALE_COUNT = "1000"
WINE_RUNTIME = {"win-x64": ("win_amd64", "Program Files"), "win-x86": ("win32", "Program Files (x86)")}
NAMES = {
    "linux-x64": "strings.coreclr-3.1.23.linux-x64.core",
    "linux-x64-svr": "strings.coreclr-3.1.23.linux-x64-svr.core",
    "win-x64": "strings.coreclr-3.1.23.win-x64.dmp",
    "win-x86": "strings.coreclr-3.1.23.win-x86.dmp",
    "win-x86-svr": "strings.coreclr-3.1.23.win-x86-svr.dmp",
}
PRODUCERS = {
    "linux-x64": "createdump --withheap (CoreCLR 3.1.23 from PyPI dotnetcore2), then clrlayout trim",
    "linux-x64-svr": "createdump --withheap of the same target under server GC (COMPlus_gcServer=1, one heap per CPU), then clrlayout trim",
    "win-x64": "Wine 8 dbghelp!MiniDumpWriteDump(MiniDumpWithFullMemory) of CoreCLR 3.1.23 win-x64, then clrlayout trim",
    "win-x86": "Wine 8 dbghelp!MiniDumpWriteDump(MiniDumpWithFullMemory) of CoreCLR 3.1.23 win-x86 (WoW64), then clrlayout trim",
    "win-x86-svr": "Wine 8 dbghelp!MiniDumpWriteDump(MiniDumpWithFullMemory) of CoreCLR 3.1.23 win-x86 (WoW64) under server GC (COMPlus_gcServer=1, one heap per CPU), then clrlayout trim",
}


def log(msg: str) -> None:
    print(f"make_dumps: {msg}", file=sys.stderr, flush=True)


def run(cmd, **kw) -> subprocess.CompletedProcess:
    log(" ".join(str(c) for c in cmd))
    return subprocess.run([str(c) for c in cmd], check=True, **kw)


def compile_targets(build: Path) -> None:
    run(["mcs", "-unsafe", "-target:exe", f"-out:{build / 'strings.dll'}", TARGETS / "strings" / "Program.cs"])
    run(["mcs", "-target:exe", f"-out:{build / 'minidumper.dll'}", TARGETS / "minidumper" / "Program.cs"])
    for name in ("strings", "minidumper"):
        embedded.write_runtimeconfig(build / f"{name}.runtimeconfig.json")


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


def make_linux(build: Path, work: Path, server: bool = False, runtime: runtimes.Runtime | None = None,
               target: str = "strings") -> tuple[Path, Path]:
    """The target on a Linux runtime (the embedded 3.1.23 by default), dumped by the runtime's createdump."""
    runtime = runtime or runtimes.embedded()
    kind = f"{runtime.version}-linux-x64" + ("-svr" if server else "")
    truth = work / f"truth-{target}-{kind}.json"
    raw = work / f"raw-{target}-{kind}.core"
    config = runtime.write_runtimeconfig(build / f"{target}-{runtime.version}.runtimeconfig.json")
    proc, pid = start_target(runtime.command(build / f"{target}.dll", config, truth, STALE_COUNT),
                             runtime.environment(server))
    try:
        run([runtime.createdump, "-f", raw, str(pid)], stdout=subprocess.DEVNULL)
    finally:
        stop_target(proc)
    return raw, truth


def wine_prefix(prefix: Path, cache: Path) -> dict:
    env = dict(os.environ, WINEPREFIX=str(prefix), WINEDEBUG="-all", WINEDLLOVERRIDES="mscoree,mshtml=")
    if not (prefix / "drive_c").is_dir():
        run(["wineboot", "-i"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        run(["wineserver", "-w"], env=env)
    for platform, folder in WINE_RUNTIME.values():
        dest = prefix / "drive_c" / folder / "dotnet"
        if (dest / "dotnet.exe").exists():
            continue
        wheels = cache / platform
        if not list(wheels.glob("*.whl")):
            run([sys.executable, "-m", "pip", "download", f"dotnetcore2=={embedded.RUNTIME_VERSION}", "--no-deps",
                 "--only-binary=:all:", "--platform", platform, "-d", wheels])
        with zipfile.ZipFile(next(wheels.glob("*.whl"))) as z:
            for member in z.namelist():
                if member.startswith("dotnetcore2/bin/") and not member.endswith("/"):
                    target = dest / member[len("dotnetcore2/bin/"):]
                    target.parent.mkdir(parents=True, exist_ok=True)
                    target.write_bytes(z.read(member))
    return env


def make_windows(kind: str, build: Path, work: Path, prefix: Path, cache: Path) -> tuple[Path, Path]:
    env = wine_prefix(prefix, cache)
    if kind.endswith("-svr"):
        env.update(COMPlus_gcServer="1", DOTNET_gcServer="1")
    app = prefix / "drive_c" / "clrlayout"
    app.mkdir(parents=True, exist_ok=True)
    for f in build.iterdir():
        shutil.copy(f, app / f.name)
    folder = WINE_RUNTIME[kind.removesuffix("-svr")][1]
    dotnet = f"C:\\{folder}\\dotnet\\dotnet.exe"
    arch = kind.split("-")[1]
    proc, pid = start_target(["wine", dotnet, r"C:\clrlayout\strings.dll", f"C:\\clrlayout\\truth-{arch}.json",
                              STALE_COUNT], env)
    try:
        run(["wine", dotnet, r"C:\clrlayout\minidumper.dll", str(pid), f"C:\\clrlayout\\raw-{arch}.dmp"],
            env=env, stdout=subprocess.DEVNULL)
    finally:
        stop_target(proc)
    raw, truth = work / f"raw-{kind}.dmp", work / f"truth-{kind}.json"
    shutil.move(app / f"raw-{arch}.dmp", raw)
    shutil.move(app / f"truth-{arch}.json", truth)
    return raw, truth


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def manifest_entry(kind: str, path: Path, truth_path: Path, raw_bytes: int, strings: int) -> dict:
    truth = json.loads(truth_path.read_text(encoding="utf-8"))
    return {
        "file": path.name,
        "truth": truth_path.name,
        "sha256": sha256(path),
        "bytes": path.stat().st_size,
        "untrimmed_bytes": raw_bytes,
        "format": "elf-core" if path.suffix == ".core" else "minidump",
        "os": kind.split("-")[0].replace("win", "windows"),
        "gc": "server" if kind.endswith("-svr") else "workstation",
        "arch": kind.split("-")[1],
        "runtime": f"coreclr {truth['runtime_version']}",
        "producer": PRODUCERS[kind],
        "target": "targets/strings/Program.cs",
        "strings": strings,
        "holds": (f"{len(truth['strings'])} known strings (lengths 0-9, non-ASCII, surrogate pair, lone surrogates, "
                  f"embedded U+0000, a 50,000-char LOH string, duplicates, thin lock / nested lock / hash / sync block "
                  f"headers), {len(truth['dead_addresses'])} dead strings, {len(truth['stale_addresses'])} dead strings "
                  f"left inside free objects by a GC, every 8th of them pinned alive"),
        "command": f"python sample_dumps/make_dumps.py --only {kind}",
    }


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
    ap.add_argument("--only", default=",".join(NAMES))
    ap.add_argument("--wine-prefix", type=Path, default=Path.home() / ".cache" / "clrlayout" / "wine-prefix")
    ap.add_argument("--cache", type=Path, default=Path.home() / ".cache" / "clrlayout" / "wheels")
    ap.add_argument("--keep-raw", type=Path, default=None, help="also keep the untrimmed dumps in this folder")
    args = ap.parse_args()
    kinds = [k.strip() for k in args.only.split(",") if k.strip()]
    for k in kinds:
        if k not in NAMES:
            ap.error(f"unknown dump kind {k!r}")
    entries = {e["file"]: e for e in read_manifest()}
    with tempfile.TemporaryDirectory(prefix="clrlayout-dumps-") as tmp:
        build, work = Path(tmp) / "build", Path(tmp) / "work"
        build.mkdir()
        work.mkdir()
        compile_targets(build)
        for kind in kinds:
            if kind.startswith("linux-x64"):
                raw, truth = make_linux(build, work, server=kind.endswith("-svr"))
            else:
                raw, truth = make_windows(kind, build, work, args.wine_prefix, args.cache)
            out = HERE / NAMES[kind]
            result = trim(str(raw), str(out))
            truth_out = out.with_name(out.name.rsplit(".", 1)[0] + ".truth.json")
            shutil.copy(truth, truth_out)
            if args.keep_raw:
                args.keep_raw.mkdir(parents=True, exist_ok=True)
                shutil.copy(raw, args.keep_raw / raw.name)
            entries[out.name] = manifest_entry(kind, out, truth_out, result.input_bytes, result.strings)
            log(f"{out.name}: {result.output_bytes:,} bytes (from {result.input_bytes:,}), {result.strings:,} strings")
    write_manifest([entries[n] for n in NAMES.values() if n in entries])
    return 0


if __name__ == "__main__":
    sys.exit(main())
