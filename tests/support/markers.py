"""``trim --redact`` checked as an attacker checks it: the markers target (sample_dumps/targets/markers) plants a
distinct marker in every place of a process where a secret can sit, it is dumped in every way a Linux process is
dumped (createdump's heap and full dumps, gdb's gcore, a kernel core, a core the runtime writes when it crashes),
and every marker is looked for in the redacted file: each of its forms (UTF-16LE and UTF-8 for text, the raw bytes
of a value) and every window of 8 bytes of a form (16 of a UTF-16 text: 8 characters), so that a part of a marker
left behind is found too.  The literals of the target's code are markers as well: the test reads them from the
source, where a comment ``marker: NAME`` names each."""

from __future__ import annotations

import json
import os
import re
import resource
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .scripts import script

make_dumps = script("make_dumps")
runtimes = script("runtimes")

SOURCE = make_dumps.TARGETS / "markers" / "Program.cs"
#: the ways a Linux process is dumped, as the tests name them
DUMP_KINDS = ("createdump-heap", "createdump-full", "gcore", "kernel", "crash")
#: how long a dump may take to be written
TIMEOUT = 300


def literal_markers() -> dict[str, dict]:
    """The markers that are literals of the target's code (name -> {"where", "forms"}), read from its source."""
    text = SOURCE.read_text(encoding="utf-8")
    out = {}
    for line in text.splitlines():
        m = re.search(r"//\s*marker:\s*(\w+)", line)
        if not m:
            continue
        name = m.group(1)
        s = re.search(r'"(mk[A-Za-z0-9]{30})"', line)
        if s:
            value = s.group(1)
            out[name] = {"where": "image", "forms": [value.encode("utf-16-le").hex(), value.encode().hex()]}
        elif name == "il_ldc":
            value = int(re.search(r"0x([0-9a-f]+)L", text[text.index(line):]).group(1), 16)
            out[name] = {"where": "image", "forms": [value.to_bytes(8, "little").hex()]}
        elif name == "field_rva":
            block = text[text.index(line):]
            block = block[block.index("{") + 1:block.index("}")]
            out[name] = {"where": "image", "forms": [bytes(int(b, 16) for b in re.findall(r"0x([0-9a-f]{2})", block)).hex()]}
    return out


@dataclass
class MarkedDump:
    """A dump of the markers target: its file, how it was made, and every marker planted (name -> where, forms)."""

    path: Path
    kind: str
    runtime: str
    markers: dict


def _text_marker(name: str, where: str, value: str) -> dict:
    return {"where": where, "forms": [value.encode("utf-16-le").hex(), value.encode().hex()]}


def make_marked_dump(build: Path, work: Path, version: str, kind: str) -> MarkedDump:
    """The markers target on a Linux runtime, dumped the way ``kind`` names, with its markers: those it wrote to
    its truth file, the literals of its code, and those of its command line and environment (chosen here, at
    random)."""
    runtime = runtimes.get(version)
    work.mkdir(parents=True, exist_ok=True)
    tag = f"{version}-{kind}"
    truth = work / f"truth-{tag}.json"
    argv = "mk" + os.urandom(15).hex()[:30]
    environment = "mk" + os.urandom(15).hex()[:30]
    env = dict(runtime.environment(), MARKERS_TARGET_SECRET=environment)
    out = work / f"{tag}.core"
    if kind == "crash":
        env.update(DOTNET_DbgEnableMiniDump="1", DOTNET_DbgMiniDumpType="4", DOTNET_DbgMiniDumpName=str(out))
    cwd = work / tag  # the assembly and its runtimeconfig beside it, so that the command line is short: the
    cwd.mkdir(exist_ok=True)  # password is within the 80 bytes of it a core's NT_PRPSINFO holds
    shutil.copy(build / "markers.dll", cwd / "markers.dll")
    runtime.write_runtimeconfig(cwd / "markers.runtimeconfig.json")

    def core_limit():
        resource.setrlimit(resource.RLIMIT_CORE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
        # a job a shell started in the background inherits SIGQUIT ignored, and so would the target: the kernel
        # core needs its default action back
        signal.signal(signal.SIGQUIT, signal.SIG_DFL)

    proc = subprocess.Popen(["dotnet", "markers.dll", f"--password={argv}", str(truth)], executable=str(runtime.host),
                            env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            text=True, cwd=cwd, preexec_fn=core_limit if kind == "kernel" else None)
    try:
        line = proc.stdout.readline()
        assert line.startswith("READY "), f"the markers target did not get ready: {line!r}"
        pid = int(line.split()[1])
        if kind.startswith("createdump"):
            full = ["--full"] if kind == "createdump-full" else []
            subprocess.run([str(runtime.createdump), *full, "-f", str(out), str(pid)], check=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=TIMEOUT)
        elif kind == "gcore":
            subprocess.run(["gcore", "-o", str(work / tag), str(pid)], check=True, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, timeout=TIMEOUT)
            (work / f"{tag}.{pid}").rename(out)
        elif kind == "kernel":  # the kernel writes "core" in the process's folder (core_pattern as Debian's)
            os.kill(pid, signal.SIGQUIT)
            proc.wait(timeout=TIMEOUT)
            written = sorted(cwd.glob("core*"))
            assert written, f"no kernel core in {cwd} (core_pattern {Path('/proc/sys/kernel/core_pattern').read_text()!r})"
            written[0].rename(out)
        elif kind == "crash":
            proc.stdin.write("crash\n")
            proc.stdin.flush()
            proc.wait(timeout=TIMEOUT)
            deadline = time.time() + 30
            while not out.exists() and time.time() < deadline:
                time.sleep(0.2)
        else:
            raise ValueError(kind)
    finally:
        if proc.poll() is None:
            make_dumps.stop_target(proc)
    markers = json.loads(truth.read_text(encoding="utf-8"))["markers"]
    markers.update(literal_markers())
    markers["argv"] = _text_marker("argv", "argv", argv)
    markers["environment"] = _text_marker("environment", "environment", environment)
    return MarkedDump(out, kind, version, markers)


def windows(markers: dict) -> list[tuple[str, bytes]]:
    """(name, bytes) to look for: every form of every marker, and every window of 8 bytes of it (16 bytes of a
    UTF-16 text, 8 characters: 4 could be found by chance in other text)."""
    out = []
    for name, m in markers.items():
        for i, form in enumerate(bytes.fromhex(f) for f in m["forms"]):
            utf16 = len(form) >= 4 and form[1] == 0 and form[3] == 0
            width = 16 if utf16 else 8
            step = 2 if utf16 else 1
            if len(form) <= width:
                out.append((name, form))
                continue
            out += [(name, form[at:at + width]) for at in range(0, len(form) - width + 1, step)]
    return out


#: bytes of the file looked at a time, and the low bits of a word that index the first filter
CHUNK = 64 << 20
FILTER_BITS = 24


def survivors(markers: dict, data: bytes) -> dict[str, int]:
    """The markers of which a form or a window occurs in ``data``: name -> how many places.  The first 8 bytes of
    each window are looked for at every offset with numpy: a table of their low 24 bits first, the few words that
    pass it then compared whole (a 500 MB core in seconds)."""
    wanted = [(n, w) for n, w in windows(markers) if len(w) >= 8]
    short = [(n, w) for n, w in windows(markers) if len(w) < 8]
    firsts: dict[int, list] = {}
    for name, w in wanted:
        firsts.setdefault(int.from_bytes(w[:8], "little"), []).append((name, w))
    keys = np.array(sorted(firsts), dtype=np.uint64)
    table = np.zeros(1 << FILTER_BITS, dtype=bool)
    table[(keys & np.uint64((1 << FILTER_BITS) - 1)).astype(np.int64)] = True
    found: dict[str, set] = {}
    view = memoryview(data)
    for start in range(0, len(data), CHUNK):
        end = min(len(data), start + CHUNK + 64)  # windows that cross into the next chunk
        for k in range(8):
            count = (end - start - k) // 8
            if count <= 0:
                continue
            words = np.frombuffer(view, dtype="<u8", offset=start + k, count=count)
            maybe = np.flatnonzero(table[(words & np.uint64((1 << FILTER_BITS) - 1)).astype(np.int64)])
            hits = maybe[np.isin(words[maybe], keys)]
            for h in hits.tolist():
                at = start + k + 8 * h
                if at >= start + CHUNK:
                    continue  # the next chunk's
                for name, w in firsts[int(words[h])]:
                    if data[at:at + len(w)] == w:
                        found.setdefault(name, set()).add(at)
    for name, w in short:
        at = data.find(w)
        while at >= 0:
            found.setdefault(name, set()).add(at)
            at = data.find(w, at + 1)
    return {name: len(places) for name, places in found.items()}
