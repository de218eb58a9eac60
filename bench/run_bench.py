#!/usr/bin/env python3
"""Benchmark: clrlayout against `strings -el` on the same dump, in one run, alternating.

    python bench/run_bench.py DUMP [--runs 5] [--verify]

Each round runs, in turn: `strings -el DUMP > /dev/null`, `clrlayout stats DUMP --type System.String`,
and `clrlayout dump DUMP --type System.String --format jsonl > /dev/null`, the clrlayout commands both as
they run by default (two processes on a big heap) and with --jobs 1.  Reported: median wall time, ratio to
strings -el, strings/s, bytes/s (of the dump file), and peak RSS of each command (from wait4, which counts
the second process too).  With --verify it also checks that the string count and a digest of every value
agree between runs, with --jobs 1, and with the per-object reference walker (CLRLAYOUT_WALKER=reference).
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
    ap.add_argument("dump")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--verify", action="store_true")
    args = ap.parse_args()
    size = os.path.getsize(args.dump)
    stats = json.loads(subprocess.run(CLRLAYOUT + ["stats", args.dump, "--type", "System.String", "--format", "json",
                                                   "-q"], capture_output=True, check=True).stdout)
    count = stats["count"]
    commands = {
        "strings -el": ["strings", "-el", args.dump],
        "clrlayout stats": CLRLAYOUT + ["stats", args.dump, "--type", "System.String", "-q"],
        "clrlayout dump --format jsonl": CLRLAYOUT + ["dump", args.dump, "--type", "System.String", "--format",
                                                      "jsonl", "-q"],
    }
    commands["clrlayout stats --jobs 1"] = commands["clrlayout stats"] + ["--jobs", "1"]
    commands["clrlayout dump --format jsonl --jobs 1"] = commands["clrlayout dump --format jsonl"] + ["--jobs", "1"]
    times: dict = {k: [] for k in commands}
    rss: dict = {k: 0 for k in commands}
    subprocess.run(["cat", args.dump], stdout=subprocess.DEVNULL, check=True)  # the same warm page cache for all
    for _ in range(args.runs):
        for name, cmd in commands.items():
            t, r = timed(cmd)
            times[name].append(t)
            rss[name] = max(rss[name], r)
    print(f"dump: {args.dump}, {size:,} bytes, {count:,} strings")
    print(f"machine: {machine()}")
    print(f"{args.runs} alternating rounds, median wall time:\n")
    base = statistics.median(times["strings -el"])
    print("| command | median s | runs (s) | vs strings -el | strings/s | MB/s | peak RSS MiB |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for name in commands:
        m = statistics.median(times[name])
        runs = " ".join(f"{t:.2f}" for t in times[name])
        print(f"| `{name}` | {m:.2f} | {runs} | {base / m:.2f}x faster | {count / m / 1e6:.1f} M | "
              f"{size / m / 1e6:.0f} | {rss[name] / 1024:.0f} |")
    if args.verify:
        first = digest(args.dump)
        again = digest(args.dump)
        alone = digest(args.dump, extra=["--jobs", "1"])
        reference = digest(args.dump, env={**os.environ, "CLRLAYOUT_WALKER": "reference"})
        print(f"\nverify: vectorised walker {first[0]:,} strings sha256 {first[1][:16]}; second run "
              f"{'same' if again == first else 'DIFFERENT'}; --jobs 1 {'same' if alone == first else 'DIFFERENT'}; "
              f"reference walker {'same' if reference == first else 'DIFFERENT'}; stats count "
              f"{'same' if count == first[0] else 'DIFFERENT'}")
        if not (again == first == alone == reference and count == first[0]):
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
