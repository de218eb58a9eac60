#!/usr/bin/env python3
"""Benchmark: `clrlayout fleet` on a directory of dumps — its overhead per dump, and what a second worker gains.

    python bench/bench_fleet.py [DIRECTORY] [--runs 3]

DIRECTORY: the dumps (default: the repository's sample_dumps/).  Each round runs, in turn:

- the analysis itself: `clrlayout.fleet.analyse.analyse()` of every dump, one after another, in this one warm
  process (no process started, the imports and compiled kernels loaded once);
- `clrlayout fleet DIRECTORY --workers 1 --force` and `--workers 2 --force` (each dump in a process of its own).

Reported: median wall times; the overhead per dump, (fleet with 1 worker - the analysis itself) / dumps; and
the time with 2 workers as a share of 1 worker's.  Targets (issue 36): an overhead of at most 0.5 s per dump,
and 2 workers on 2 cores in at most 0.6 of 1 worker's time.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from run_bench import CLRLAYOUT, machine, timed

OVERHEAD_TARGET = 0.5
SPEEDUP_TARGET = 0.6


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("directory", nargs="?", default=str(Path(__file__).resolve().parents[1] / "sample_dumps"))
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    from clrlayout.fleet.analyse import analyse
    from clrlayout.fleet.inputs import expand

    dumps = [i.path for i in expand([args.directory]) if i.error_code is None]
    for d in dumps:  # in the page cache, and the kernels loaded, before the first round
        analyse(d)
    times: dict[str, list[float]] = {"analysis itself": [], "fleet --workers 1": [], "fleet --workers 2": []}
    with tempfile.TemporaryDirectory() as out:
        for _ in range(args.runs):
            t0 = time.perf_counter()
            for d in dumps:
                analyse(d)
            times["analysis itself"].append(time.perf_counter() - t0)
            for workers in (1, 2):
                seconds, _ = timed(CLRLAYOUT + ["fleet", args.directory, "--out", os.path.join(out, "t"), "--force",
                                                "--workers", str(workers)])
                times[f"fleet --workers {workers}"].append(seconds)
    median = {name: statistics.median(t) for name, t in times.items()}
    overhead = (median["fleet --workers 1"] - median["analysis itself"]) / len(dumps)
    share = median["fleet --workers 2"] / median["fleet --workers 1"]
    print(machine())
    print(f"{len(dumps)} dumps in {args.directory}; cores available: {len(os.sched_getaffinity(0))}\n")
    print("| run | median s | runs (s) |\n| --- | --- | --- |")
    for name, t in times.items():
        print(f"| {name} | {median[name]:.2f} | {' '.join(f'{x:.2f}' for x in t)} |")
    print(f"\noverhead per dump: {overhead:.3f} s (target <= {OVERHEAD_TARGET}: "
          f"{'met' if overhead <= OVERHEAD_TARGET else 'NOT met'})")
    print(f"2 workers / 1 worker: {share:.2f} (target <= {SPEEDUP_TARGET}: "
          f"{'met' if share <= SPEEDUP_TARGET else 'NOT met'})")
    return 0 if overhead <= OVERHEAD_TARGET and share <= SPEEDUP_TARGET else 1


if __name__ == "__main__":
    sys.exit(main())
