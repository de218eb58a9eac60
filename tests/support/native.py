"""The native-heap target (sample_dumps/targets/native/mallocs.c) built with the C compiler, run, and dumped with
gdb's gcore while it waits; what it recorded at that moment (its ledger of blocks, ``mallinfo2()``,
``malloc_info()``) read back; and gdb with glibc's debug symbols (Debian's libc6-dbg) asked for the same state."""

from __future__ import annotations

import json
import re
import shutil
import signal
import subprocess
from dataclasses import dataclass
from pathlib import Path

SOURCE = Path(__file__).resolve().parents[2] / "sample_dumps" / "targets" / "native" / "mallocs.c"
TIMEOUT = 120


@dataclass
class NativeCore:
    path: Path
    executable: Path
    pid: int
    blocks: list
    mallinfo: dict
    #: malloc_info's per-heap totals, in its order (the ring of arenas from main_arena): {fast, rest, system}
    heaps: list
    #: OS thread id -> the thread's TLS pointer, as the thread itself read it
    thread_pointers: dict
    arch: str = "x64"
    #: whether the core holds the threads' TLS pointers
    tls: bool = True


def build(work: Path, arch: str = "x64") -> Path:
    """The target compiled for x86-64, i386 (gcc -m32: Debian's gcc-multilib) or arm64 (the cross compiler)."""
    if arch == "arm64":
        return build_cross(work, arch)
    cc = shutil.which("gcc") or shutil.which("cc")
    assert cc, "the native-heap tests need a C compiler (Debian: apt-get install gcc; .ci/run installs it)"
    exe = work / ("mallocs" if arch == "x64" else f"mallocs-{arch}")
    flags = ["-m32"] if arch == "x86" else []
    run = subprocess.run([cc, *flags, "-O1", "-pthread", "-o", str(exe), str(SOURCE)], capture_output=True, text=True,
                         timeout=TIMEOUT)
    assert run.returncode == 0, f"{cc} {' '.join(flags)} failed (i386: apt-get install gcc-N-multilib, N gcc's version; .ci/run " \
        f"installs it): {run.stderr[-500:]}"
    return exe


def make_core(exe: Path, work: Path, threads: int = 4) -> NativeCore:
    assert shutil.which("gcore"), "the native-heap tests dump with gdb's gcore (apt-get install gdb)"
    out = work / f"ledger-{threads}.txt"
    proc = subprocess.Popen([str(exe), str(out), str(threads)], stdout=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        assert line.startswith("ready "), line
        pid = int(line.split()[1])
        subprocess.run(["gcore", "-o", str(work / "native"), str(pid)], check=True, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, timeout=TIMEOUT)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    return NativeCore(work / f"native.{pid}", exe, pid, *read_ledger(out))


def read_ledger(out: Path) -> tuple[list, dict, list, dict]:
    """(blocks, mallinfo2, malloc_info's per-heap totals, OS thread id -> its TLS pointer) the target wrote."""
    text = out.read_text()
    lines, xml = text.split("malloc_info:\n", 1)
    records = [json.loads(line) for line in lines.splitlines() if line.strip()]
    blocks = [r for r in records if "block" in r]
    mallinfo = next(r["mallinfo2"] for r in records if "mallinfo2" in r)
    heaps = []
    for body in re.findall(r'<heap nr="\d+">(.*?)</heap>', xml, flags=re.S):
        total = {kind: (int(c), int(s)) for kind, c, s in
                 re.findall(r'<total type="(\w+)" count="(\d+)" size="(\d+)"/>', body)}
        system = int(re.search(r'<system type="current" size="(\d+)"/>', body).group(1))
        heaps.append({"fast": total["fast"], "rest": total["rest"], "system": system})
    pointers = {r["tid"]: r["thread_pointer"] for r in records if "thread_pointer" in r}
    return blocks, mallinfo, heaps, pointers


#: the cross compiler, QEMU's user-mode emulator and the target's libc directory of each other architecture
CROSS = {"arm64": ("aarch64-linux-gnu-gcc", "qemu-aarch64", "/usr/aarch64-linux-gnu")}


def build_cross(work: Path, arch: str) -> Path:
    cc, _, _ = CROSS[arch]
    assert shutil.which(cc), f"the {arch} native-heap test needs {cc} (Debian: apt-get install gcc-aarch64-linux-gnu " \
        "libc6-dev-arm64-cross qemu-user; .ci/run installs them)"
    exe = work / f"mallocs-{arch}"
    subprocess.run([cc, "-O1", "-pthread", "-o", str(exe), str(SOURCE)], check=True, timeout=TIMEOUT)
    return exe


def _dumped_on_sigquit(command: list, run: Path, out: Path, pattern: str) -> tuple[Path, int]:
    """Runs the target in ``run`` until it is ready, then SIGQUIT: (the core its dumper wrote there, matching
    ``pattern`` with the pid, and the pid).  Any other file the signal left there (the kernel's core of QEMU) is
    removed."""
    import resource

    def cores():
        resource.setrlimit(resource.RLIMIT_CORE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
        signal.signal(signal.SIGQUIT, signal.SIG_DFL)  # a background job's children inherit it ignored

    run.mkdir()
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, cwd=run, preexec_fn=cores)
    try:
        line = proc.stdout.readline()
        assert line.startswith("ready "), line
        pid = int(line.split()[1])
        proc.send_signal(signal.SIGQUIT)
        proc.wait(timeout=TIMEOUT)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    written = sorted(run.glob(pattern.format(pid=pid)))
    assert written, f"no core of the target in {run} ({sorted(p.name for p in run.iterdir())}; core_pattern " \
        f"{Path('/proc/sys/kernel/core_pattern').read_text()!r})"
    for other in run.iterdir():
        if other not in (written[0], out):
            other.unlink()
    return written[0], pid


def make_kernel_core(exe: Path, work: Path, threads: int = 4) -> NativeCore:
    """The target dumped by the kernel (SIGQUIT; core_pattern as Debian's: ``core`` in its folder): a crash dump
    with every thread's TLS note (NT_386_TLS for an i386 process), which gdb's gcore does not write."""
    run = work / "run-kernel"
    out = run / "ledger.txt"
    core, pid = _dumped_on_sigquit([str(exe), str(out), str(threads)], run, out, "core*")
    return NativeCore(core, exe, pid, *read_ledger(out))


def make_qemu_core(exe: Path, work: Path, arch: str, threads: int = 4) -> NativeCore:
    """The target run by QEMU's user-mode emulator, dumped by QEMU itself (SIGQUIT: the guest's core, every
    thread's NT_PRSTATUS and its memory, no NT_FILE note)."""
    _, qemu, root = CROSS[arch]
    assert shutil.which(qemu), f"the {arch} native-heap test runs its target with {qemu} (apt-get install qemu-user)"
    run = work / f"run-{arch}"
    out = run / "ledger.txt"
    core, pid = _dumped_on_sigquit([qemu, "-L", root, str(exe), str(out), str(threads)], run, out,
                                   "qemu_*_{pid}.core")
    return NativeCore(core, exe, pid, *read_ledger(out))


GDB_SCRIPT = """
import gdb
ma = gdb.parse_and_eval("&main_arena")
p, out = ma, []
while True:
    a = p.dereference()
    out.append([int(p), int(a["system_mem"]), int(a["top"])])
    p = a["next"]
    if int(p) == int(ma):
        break
mp = gdb.parse_and_eval("mp_")
print("ORACLE " + repr({"arenas": out, "mp": int(gdb.parse_and_eval("&mp_")), "n_mmaps": int(mp["n_mmaps"]),
                        "mmapped_mem": int(mp["mmapped_mem"]), "sbrk_base": int(mp["sbrk_base"])}))
"""


def gdb_oracle(core: NativeCore, work: Path) -> dict:
    """main_arena, the ring of arenas and mp_ as gdb reads them from the core with glibc's symbols."""
    script = work / "oracle.py"
    script.write_text(GDB_SCRIPT)
    run = subprocess.run(["gdb", "-batch", "-nx", "-q", str(core.executable), str(core.path), "-ex",
                          f"source {script}"], capture_output=True, text=True, timeout=TIMEOUT)
    line = next((line for line in run.stdout.splitlines() if line.startswith("ORACLE ")), None)
    assert line, f"gdb read no malloc state (is libc6-dbg installed?): {run.stderr[-500:]}"
    import ast

    return ast.literal_eval(line[len("ORACLE "):])


MALLINFO_FIELDS = ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks",
                   "keepcost")


def owners_core(build: Path, work: Path, version: str, full: bool, tries: int = 5):
    """The nativeowners target (sample_dumps/targets/nativeowners) on a Linux runtime, dumped by its createdump
    (``full``: every mapping); the target's mallinfo2() asked for before and after the dump, up to ``tries`` dumps
    until both agree (the runtime's own threads may allocate meanwhile).  (core, truth, mallinfo or None)."""
    import sys

    samples = Path(__file__).resolve().parents[2] / "sample_dumps"
    sys.path.insert(0, str(samples))
    import make_dumps
    import runtimes

    runtime = runtimes.get(version)
    work.mkdir(parents=True, exist_ok=True)
    config = runtime.write_runtimeconfig(build / f"nativeowners-{version}.runtimeconfig.json")
    truth, raw = work / "truth-nativeowners.json", work / f"nativeowners-{'full' if full else 'heap'}.core"
    # no tiered compilation: its background thread compiles (and allocates) for seconds after the start.  The
    # leaking thread's blocks come from memory the runtime never had (whose own blocks hold stale addresses of
    # chunks it freed): no tcache, as a chunk of the main arena the runtime freed on that thread went to its tcache
    # and was handed out as a leaked block (one CI run: that block was reached); and arenas enough for every
    # thread (glibc's default is 8 a core), so that its arena is a new one
    env = dict(runtime.environment(), DOTNET_TieredCompilation="0", COMPlus_TieredCompilation="0",
               GLIBC_TUNABLES="glibc.malloc.tcache_count=0:glibc.malloc.arena_max=64")
    proc, pid = make_dumps.start_target(runtime.command(build / "nativeowners.dll", config, truth), env)

    def measure() -> dict:
        proc.stdin.write("measure\n")
        proc.stdin.flush()
        words = proc.stdout.readline().split()
        assert words and words[0] == "MALLINFO", words
        return dict(zip(MALLINFO_FIELDS, map(int, words[1:])))

    mallinfo = None
    try:
        import time

        last, deadline = measure(), time.time() + 15
        while time.time() < deadline:  # settled: the same twice, half a second apart
            time.sleep(0.5)
            now = measure()
            if now == last:
                break
            last = now
        for _ in range(tries):
            before = measure()
            raw.unlink(missing_ok=True)
            subprocess.run([str(runtime.createdump), *(["--full"] if full else []), "-f", str(raw), str(pid)],
                           check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=TIMEOUT)
            if measure() == before:
                mallinfo = before
                break
    finally:
        make_dumps.stop_target(proc)
    return raw, json.loads(truth.read_text()), mallinfo
