"""``clrlayout report`` against ``clrlayout retained`` on one dump (issue 50, item 5: the report within 1.5x of
`retained`), each command in a fresh process, alternately, RUNS times; medians, the ratio, each one's peak RSS
(from ``wait4``) and the HTML file's size.

    python bench/make_big_dump.py /tmp/big-graph.core --content graph     # the 10.6 M-object benchmark core
    python bench/bench_report.py /tmp/big-graph.core [--runs 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TARGET = 1.5


def timed(cmd: list[str]) -> tuple[float, int]:
    """Wall seconds and peak RSS bytes of the command (stdout dropped)."""
    with open(os.devnull, "wb") as null:
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=null)
        _, status, usage = os.wait4(proc.pid, 0)
        elapsed = time.perf_counter() - t0
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{' '.join(cmd)} exited with {os.waitstatus_to_exitcode(status)}")
    return elapsed, usage.ru_maxrss * 1024


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("dump")
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    cli = [sys.executable, "-m", "clrlayout"]
    with tempfile.TemporaryDirectory() as tmp:
        html = Path(tmp) / "report.html"
        commands = {"retained": cli + ["retained", args.dump, "--top", "5"],
                    "report": cli + ["report", args.dump, "-o", str(html)]}
        for cmd in commands.values():  # the dump's pages into the page cache, numba's caches loaded once
            timed(cmd)
        times: dict[str, list[float]] = {k: [] for k in commands}
        peaks: dict[str, int] = {k: 0 for k in commands}
        for _ in range(args.runs):
            for name, cmd in commands.items():
                elapsed, peak = timed(cmd)
                times[name].append(elapsed)
                peaks[name] = max(peaks[name], peak)
        size = html.stat().st_size
    medians = {k: statistics.median(v) for k, v in times.items()}
    ratio = medians["report"] / medians["retained"]
    for name in commands:
        print(f"{name:9} median {medians[name]:6.2f} s  (runs {', '.join(f'{t:.2f}' for t in times[name])})  "
              f"peak RSS {peaks[name] / 2**30:.2f} GiB")
    print(f"report / retained: {ratio:.2f}x (target <= {TARGET}x: {'met' if ratio <= TARGET else 'NOT met'}); "
          f"HTML {size:,} bytes (target < 5 MB)")


if __name__ == "__main__":
    main()
