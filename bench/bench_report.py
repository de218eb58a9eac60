"""``clrlayout report`` against ``clrlayout retained`` on one dump (issue 50, item 5: the report within 1.5x of
`retained`), each command in a fresh process, alternately, RUNS times after one warm-up of each; medians, the
ratio, each one's peak RSS and the HTML file's size.

    python bench/make_big_dump.py /tmp/big-graph.core --content graph     # the 10.6 M-object benchmark core
    python bench/bench_report.py /tmp/big-graph.core [--runs 5] [--no-index]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from pathlib import Path

from run_bench import CLRLAYOUT, alternate, machine, timed

TARGET = 1.5


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("dump")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--no-index", action="store_true",
                    help="both commands with --no-index (each walks the heap and computes its graph), not the index's "
                         "graph and layers the warm-up runs write")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        html = Path(tmp) / "report.html"
        extra = ["--no-index"] if args.no_index else []
        commands = {"retained": [*CLRLAYOUT, "retained", args.dump, "--top", "5", *extra],
                    "report": [*CLRLAYOUT, "report", args.dump, "-o", str(html), *extra]}
        for cmd in commands.values():  # the dump's pages into the page cache, numba's caches loaded once
            timed(cmd)
        times, peaks = alternate(commands, args.runs)
        size = html.stat().st_size
    medians = {k: statistics.median(v) for k, v in times.items()}
    ratio = medians["report"] / medians["retained"]
    print(machine())
    for name in commands:
        print(f"{name:9} median {medians[name]:6.2f} s  (runs {', '.join(f'{t:.2f}' for t in times[name])})  "
              f"peak RSS {peaks[name] / 2**20:.2f} GiB")
    print(f"report / retained: {ratio:.2f}x (target <= {TARGET}x: {'met' if ratio <= TARGET else 'NOT met'}); "
          f"HTML {size:,} bytes (target < 5 MB)")


if __name__ == "__main__":
    main()
