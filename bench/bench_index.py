"""The heap graph's index and its layers (issue 47, item 3): each graph command run on a dump with no index
(the first walks the heap, writes the index and the layers of its roots), then again (it maps them), in fresh
processes, with a fresh index directory; the outputs of the two runs must be byte-identical.

    python bench/bench_index.py /tmp/graph.core [--roots handles,finalizer] [--runs 3] [--address 0x...]

Prints, per command, the first run's wall time and the median of the later ones, with peak RSS (wait4). The
address (for ``roots`` and ``refs``) defaults to the first object of ``retained --top 1``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time


def _run(argv: list[str], env: dict) -> tuple[float, int, bytes]:
    """(wall seconds, peak RSS in KB, stdout) of one run in a fresh process."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        proc = subprocess.Popen(argv, stdout=out, stderr=err, env=env)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode != 0:
            err.seek(0)
            sys.exit(f"{' '.join(argv)}: exit {proc.returncode}: {err.read().decode(errors='replace')[-500:]}")
        out.seek(0)
        return wall, usage.ru_maxrss, out.read()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("dump")
    p.add_argument("--roots", default="handles,finalizer")
    p.add_argument("--runs", type=int, default=3, help="runs after the first (median)")
    p.add_argument("--address", default=None)
    a = p.parse_args()
    cache = tempfile.mkdtemp(prefix="clrlayout-bench-index-")
    env = dict(os.environ, XDG_CACHE_HOME=cache)
    # as an installed clrlayout runs: its modules' bytecode cached (pip compiles it when it installs; an
    # environment that forbids writing it would compile every module again in every run, 0.3-0.4 s; the run
    # that finds the address writes it)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    exe = [sys.executable, "-m", "clrlayout"]
    try:
        address = a.address
        if address is None:
            _, _, out = _run(exe + ["retained", a.dump, "--top", "1", "--format", "json", "--roots", a.roots, "-q",
                                    "--no-index"], env)
            address = json.loads(out)["objects"][0]["address"]
        commands = [["retained", a.dump, "--top", "20"], ["roots", a.dump, address], ["refs", a.dump, address],
                    ["stats", a.dump, "--live"]]
        print(f"{a.dump}, --roots {a.roots}, address {address}; index in {cache}")
        print(f"{'command':<12} {'first':>9} {'later':>9} {'RSS later':>11}  same output")
        for command in commands:
            argv = exe + command + ["--roots", a.roots, "-q"]
            shutil.rmtree(os.path.join(cache, "clrlayout"), ignore_errors=True)
            first, _, expected = _run(argv, env)
            os.sync()  # what the first run wrote on the disk before the others map it (as a later session finds it)
            later = [_run(argv, env) for _ in range(a.runs)]
            same = all(out == expected for _, _, out in later)
            print(f"{command[0]:<12} {first:>8.2f}s {statistics.median(w for w, _, _ in later):>8.2f}s "
                  f"{max(r for _, r, _ in later) / 1024:>8.0f} MB  {'yes' if same else 'NO'}")
            if not same:
                sys.exit("the index's answer differs from the walk's")
    finally:
        shutil.rmtree(cache, ignore_errors=True)


if __name__ == "__main__":
    main()
