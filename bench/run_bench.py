#!/usr/bin/env python3
"""Benchmark: clrlayout against `strings -el` on the same dump, in one run, alternating.

    python bench/run_bench.py DUMP [DUMP ...] [--runs 5] [--verify]
    python bench/run_bench.py DUMP --jobs-scaling 1,2,3,4     # how the shared walk scales with --jobs

For each dump, each round runs, in turn: `cat DUMP > /dev/null` (the machine's read speed, so that figures
from two machines compare), `strings -el DUMP > /dev/null`, `clrlayout stats DUMP --type System.String`, `clrlayout stats DUMP`
(every type, !dumpheap -stat), and `clrlayout dump DUMP --type System.String` in each format (jsonl, table, csv) `> /dev/null`; `stats`
and `dump --format jsonl` also with --jobs 1 (the others run as they run by default: two processes on a
big heap).  Reported: median wall time, ratio to strings -el, strings/s, bytes/s (of the dump file), and
peak RSS of each command (from wait4, which counts the second process too).  With --verify it also checks
that the string count and a digest of every value agree between runs, with --jobs 1, and with the
per-object reference walker (CLRLAYOUT_WALKER=reference).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import statistics
import subprocess
import sys
import time

CLRLAYOUT = [sys.executable, "-m", "clrlayout"]
DUMPS: list[str] = []  # every dump given, so that each dump's rounds run with only its own pages cached


def timed(cmd, env=None) -> tuple[float, int]:
    """Wall seconds and peak RSS (KiB) of one command, its stdout thrown away."""
    with open(os.devnull, "wb") as null:
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=null, stderr=subprocess.DEVNULL, env=env)
        _, status, usage = os.wait4(proc.pid, 0)
        elapsed = time.perf_counter() - t0
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{' '.join(cmd)} failed")
    return elapsed, usage.ru_maxrss


def alternate(commands: dict, runs: int) -> tuple[dict, dict]:
    """Each command RUNS times, one after the other in turn: (name -> its wall seconds, name -> its peak RSS KiB)."""
    times: dict[str, list[float]] = {name: [] for name in commands}
    peaks: dict[str, int] = {name: 0 for name in commands}
    for _ in range(runs):
        for name, cmd in commands.items():
            seconds, rss = timed(cmd)
            times[name].append(seconds)
            peaks[name] = max(peaks[name], rss)
    return times, peaks


def digest(dump: str, env=None, extra=()) -> tuple[int, str]:
    """Count and SHA-256 of every value (in heap order) from `dump --format jsonl`."""
    h = hashlib.sha256()
    n = 0
    proc = subprocess.Popen(CLRLAYOUT + ["dump", dump, "--type", "System.String", "--format", "jsonl", "-q", *extra],
                            stdout=subprocess.PIPE, env=env)
    for line in proc.stdout:
        rec = json.loads(line)
        h.update(rec["address"].encode() + b"\0" + rec["value"].encode("utf-8", "surrogatepass") + b"\0")
        n += 1
    if proc.wait():
        raise SystemExit("dump failed")
    return n, h.hexdigest()


def machine() -> str:
    cpu = "unknown CPU"
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return f"{cpu}, {os.cpu_count()} cores, {mem:.0f} GiB RAM, Python {platform.python_version()}, {platform.platform()}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dumps", nargs="+", metavar="DUMP")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--verify", action="store_true")
    ap.add_argument("--jobs-scaling", metavar="N,N,...", default=None,
                    help="instead: time stats and dump --format jsonl with each --jobs N (and check that every N "
                         "gives the same output)")
    args = ap.parse_args()
    print(f"machine: {machine()}")
    DUMPS[:] = args.dumps
    failed = 0
    for dump in args.dumps:
        if args.jobs_scaling:
            failed += scaling(dump, args.runs, [int(n) for n in args.jobs_scaling.split(",")])
        else:
            failed += bench(dump, args.runs, args.verify)
    return 1 if failed else 0


def rounds(dump: str, commands: dict, runs: int) -> tuple[dict, dict]:
    """``runs`` alternating rounds of every command on a warm page cache: wall times and peak RSS by key."""
    warm(dump)
    return alternate(commands, runs)


def warm(dump: str) -> None:
    """The same warm page cache for every command: the other dumps given are dropped from the cache, and this
    one is read twice.  A machine whose page cache holds less than every dump given (seen here: about 3 GB
    of 24 GiB) otherwise keeps the pages of the dump measured before, which it has read many times, and
    evicts the pages of this one, read once: its commands then read parts of it from disk, one run more
    than another."""
    for other in DUMPS:
        if other != dump and hasattr(os, "posix_fadvise"):
            fd = os.open(other, os.O_RDONLY)
            try:
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)
    for _ in range(2):  # a page read a second time goes on the kernel's active list
        subprocess.run(["cat", dump], stdout=subprocess.DEVNULL, check=True)


def scaling(dump: str, runs: int, jobs: list[int]) -> int:
    """How the shared walk scales with the number of processes: median wall time of `stats --type
    System.String` and `dump --format jsonl` per --jobs N, alternating, and the output digest of each N."""
    commands = {}
    for n in jobs:
        commands[("stats", n)] = CLRLAYOUT + ["stats", dump, "--type", "System.String", "-q", "--jobs", str(n)]
        commands[("dump --format jsonl", n)] = CLRLAYOUT + ["dump", dump, "-q", "--format", "jsonl", "--jobs", str(n)]
    times, rss = rounds(dump, commands, runs)
    print(f"\ndump: {dump}, {os.path.getsize(dump):,} bytes; {runs} alternating rounds, median wall time:\n")
    print("| command | --jobs | median s | runs (s) | vs --jobs 1 | peak RSS MiB (largest process) |")
    print("| --- | --- | --- | --- | --- | --- |")
    for name in ("stats", "dump --format jsonl"):
        one = statistics.median(times[(name, jobs[0])])
        for n in jobs:
            m = statistics.median(times[(name, n)])
            print(f"| `{name}` | {n} | {m:.2f} | {' '.join(f'{t:.2f}' for t in times[(name, n)])} | "
                  f"{one / m:.2f}x | {rss[(name, n)] / 1024:.0f} |")
    digests = {n: digest(dump, extra=["--jobs", str(n)]) for n in jobs}
    same = len(set(digests.values())) == 1
    print(f"\nverify: {next(iter(digests.values()))[0]:,} strings; output of every --jobs "
          f"{'the same' if same else 'DIFFERENT'}")
    return 0 if same else 1


def bench(dump: str, runs: int, verify: bool) -> int:
    size = os.path.getsize(dump)
    stats = json.loads(subprocess.run(CLRLAYOUT + ["stats", dump, "--type", "System.String", "--format", "json",
                                                   "-q"], capture_output=True, check=True).stdout)
    count = stats["count"]
    objects = json.loads(subprocess.run(CLRLAYOUT + ["stats", dump, "--format", "json", "-q"], capture_output=True,
                                        check=True).stdout)["count"]
    listing = CLRLAYOUT + ["dump", dump, "--type", "System.String", "-q", "--format"]
    commands = {
        "cat": ["cat", dump],
        "strings -el": ["strings", "-el", dump],
        "clrlayout stats": CLRLAYOUT + ["stats", dump, "--type", "System.String", "-q"],
        "clrlayout stats (every type)": CLRLAYOUT + ["stats", dump, "-q"],
        "clrlayout dump --format jsonl": listing + ["jsonl"],
        "clrlayout dump (table)": listing + ["table"],
        "clrlayout dump --format csv": listing + ["csv"],
    }
    commands["clrlayout stats --jobs 1"] = commands["clrlayout stats"] + ["--jobs", "1"]
    commands["clrlayout dump --format jsonl --jobs 1"] = commands["clrlayout dump --format jsonl"] + ["--jobs", "1"]
    times, rss = rounds(dump, commands, runs)
    print(f"\ndump: {dump}, {size:,} bytes, {count:,} strings")
    print(f"{runs} alternating rounds, median wall time:\n")
    base = statistics.median(times["strings -el"])
    print("| command | median s | runs (s) | vs strings -el | strings/s | MB/s | peak RSS MiB |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for name in commands:
        m = statistics.median(times[name])
        runs_text = " ".join(f"{t:.2f}" for t in times[name])
        print(f"| `{name}` | {m:.2f} | {runs_text} | {base / m:.2f}x faster | {count / m / 1e6:.1f} M | "
              f"{size / m / 1e6:.0f} | {rss[name] / 1024:.0f} |")
    by_type = statistics.median(times["clrlayout stats (every type)"])
    print(f"\nstats by type: {objects:,} objects (free ones included) in {by_type:.2f} s: "
          f"{objects / by_type / 1e6:.1f} M objects/s, {by_type / statistics.median(times['clrlayout stats']):.2f}x "
          f"the time of the strings-only statistics")
    if verify:
        first = digest(dump)
        again = digest(dump)
        alone = digest(dump, extra=["--jobs", "1"])
        reference = digest(dump, env={**os.environ, "CLRLAYOUT_WALKER": "reference"})
        print(f"\nverify: vectorised walker {first[0]:,} strings sha256 {first[1][:16]}; second run "
              f"{'same' if again == first else 'DIFFERENT'}; --jobs 1 {'same' if alone == first else 'DIFFERENT'}; "
              f"reference walker {'same' if reference == first else 'DIFFERENT'}; stats count "
              f"{'same' if count == first[0] else 'DIFFERENT'}")
        if not (again == first == alone == reference and count == first[0]):
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
