"""Precise stack roots at scale (issue 49, item 7): 200 threads waiting 50 frames deep (the stacks target's
"deep200x50" mode on .NET 10, dumped by createdump), every managed thread walked and every frame's GC info
decoded, as ``--roots stacks`` does; the target is ≤ 1 s.

    python bench/bench_stacks.py [--threads 200] [--frames 50] [--runs 3] [--core PATH]

Makes the core (unless ``--core`` names one), then times, in this process after opening the dump and reading
the runtime's thread list, the walk and the references of all threads: the first run (cold caches: the code map,
the GC info) and the median of the later ones, each with a fresh walker. Prints the threads, frames and
references found.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def make_core(threads: int, frames: int, work: Path) -> Path:
    sys.path.insert(0, str(ROOT / "sample_dumps"))
    import make_dumps
    import runtimes

    build = work / "targets"
    build.mkdir(parents=True, exist_ok=True)
    make_dumps.compile_targets(build)
    raw, _ = make_dumps.make_linux(build, work, runtime=runtimes.get("10.0.0"), target="stacks",
                                   extra=(f"deep{threads}x{frames}",))
    return raw


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--threads", type=int, default=200)
    p.add_argument("--frames", type=int, default=50)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--core", default=None)
    a = p.parse_args()
    core = Path(a.core) if a.core else make_core(a.threads, a.frames, Path(tempfile.mkdtemp(prefix="bench-stacks-")))

    from clrlayout.runtime.threadstacks import precise_stacks, walker_for
    from clrlayout.runtime.threadstore import managed_threads
    from clrlayout.session import open_session

    with open_session(str(core)) as s:
        contract = s.contract
        threads = managed_threads(s.dump.memory, contract)
        version = contract.globals["GCInfoVersion"]
        times, found = [], None
        for _ in range(1 + a.runs):
            start = time.perf_counter()
            walker = walker_for(s.dump, contract, s.runtime.version_tuple, s.names.images.file)
            found = precise_stacks(s.dump, walker, threads, version)
            times.append(time.perf_counter() - start)
    frames = sum(len(t.walk.frames) for t in found.threads)
    refs = sum(len(t.refs.refs) for t in found.threads)
    print(f"{core}: {len(found.threads)} managed threads, {frames:,} frames, {refs:,} references, "
          f"{len(found.incomplete)} walks stopped early")
    print(f"first run {times[0]:.3f} s; later runs (median of {a.runs}) {statistics.median(times[1:]):.3f} s")


if __name__ == "__main__":
    main()
