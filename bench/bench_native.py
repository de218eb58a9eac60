"""``clrlayout native`` on a million chunks (issue 48, item 8): the native-heap target
(sample_dumps/targets/native/mallocs.c) with 16 threads, each in its own arena, holding EXTRA more blocks, dumped
with gdb's gcore; then the summary, ``--leaks`` and the memory the reading takes, each the best of RUNS runs in a
fresh process.

    python bench/bench_native.py [--threads 16] [--extra 62500] [--runs 3] [--work /tmp/native-bench]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.support.native import build  # noqa: E402

CHILD = """
import resource, sys, time
from clrlayout.util.allocator import reuse_freed_memory
reuse_freed_memory()  # as the command does first
from clrlayout.dump import open_dump
from clrlayout.model.native import native_heap
t = time.perf_counter()
view = native_heap(open_dump(sys.argv[1]))
summary = view.summary()
read = time.perf_counter() - t
leaks = sum(1 for _ in view.leaks()) if sys.argv[2] == "leaks" else 0
print(read, time.perf_counter() - t, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
      summary["totals"]["chunks"], len(summary["arenas"]), leaks)
"""


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=16)
    ap.add_argument("--extra", type=int, default=62_500)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--work", default="/tmp/native-bench")
    args = ap.parse_args()
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    exe = build(work)
    proc = subprocess.Popen([str(exe), str(work / "ledger.txt"), str(args.threads), str(args.extra)],
                            stdout=subprocess.PIPE, text=True)
    pid = int(proc.stdout.readline().split()[1])
    subprocess.run(["gcore", "-o", str(work / "bench"), str(pid)], check=True, capture_output=True)
    proc.kill()
    core = work / f"bench.{pid}"
    baseline = subprocess.run([sys.executable, "-c", "import resource, numpy, clrlayout.model.native, "
                               "clrlayout.dump; print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)"],
                              capture_output=True, text=True, check=True)
    base = int(baseline.stdout)
    for mode in ("summary", "leaks"):
        best = None
        for _ in range(args.runs):
            run = subprocess.run([sys.executable, "-c", CHILD, str(core), mode], capture_output=True, text=True,
                                 check=True)
            read, total, rss, chunks, arenas, leaks = run.stdout.split()
            row = (float(total), float(read), int(rss), int(chunks), int(arenas), int(leaks))
            best = row if best is None or row < best else best
        total, read, rss, chunks, arenas, leaks = best
        print(json.dumps({"mode": mode, "seconds": round(total, 2), "read_seconds": round(read, 2),
                          "chunks": chunks, "arenas": arenas, "leaked": leaks,
                          "bytes_per_chunk": round((rss - base) / chunks, 1), "core_bytes": core.stat().st_size}))
    core.unlink()


if __name__ == "__main__":
    main()
