#!/usr/bin/env python3
"""Benchmark: `clrlayout diff BEFORE AFTER` against the two `clrlayout stats` runs it replaces.

    python bench/bench_diff.py BEFORE AFTER [--runs 5] [--live]

Each round runs, in turn: `stats BEFORE --format json`, `stats AFTER --format json` and `diff BEFORE AFTER
--format json` (with `--live`: each with `--live --roots handles,finalizer`), output thrown away, both dumps'
pages in the page cache (each is read once first).  Reported: the median wall time of each, and diff's time as
a share of the two stats runs together.  The target (issue 35): diff costs no more than the two stats runs
plus 10% (a ratio of at most 1.10).
"""

from __future__ import annotations

import argparse
import statistics
import sys

from run_bench import CLRLAYOUT, alternate, machine, warm

TARGET = 1.10


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("before")
    ap.add_argument("after")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--live", action="store_true", help="compare the live objects (the object graph of each dump)")
    args = ap.parse_args()
    extra = ["--live", "--roots", "handles,finalizer"] if args.live else []
    for dump in (args.before, args.after):
        warm(dump)
    commands = {
        "stats BEFORE": CLRLAYOUT + ["stats", args.before, "--format", "json", "-q", *extra],
        "stats AFTER": CLRLAYOUT + ["stats", args.after, "--format", "json", "-q", *extra],
        "diff BEFORE AFTER": CLRLAYOUT + ["diff", args.before, args.after, "--format", "json", "-q", *extra],
    }
    times, peaks = alternate(commands, args.runs)
    print(machine())
    print(f"before: {args.before}\nafter:  {args.after}\n")
    print("| command | median s | runs (s) | peak RSS MiB |\n| --- | --- | --- | --- |")
    for name in commands:
        runs = " ".join(f"{t:.2f}" for t in times[name])
        print(f"| `{name}` | {statistics.median(times[name]):.2f} | {runs} | {peaks[name] // 1024} |")
    both = statistics.median(times["stats BEFORE"]) + statistics.median(times["stats AFTER"])
    ratio = statistics.median(times["diff BEFORE AFTER"]) / both
    print(f"\ndiff / (stats BEFORE + stats AFTER) = {ratio:.2f} (target at most {TARGET:.2f}): "
          f"{'met' if ratio <= TARGET else 'NOT met'}")
    return 0 if ratio <= TARGET else 1


if __name__ == "__main__":
    sys.exit(main())
