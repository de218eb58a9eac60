#!/usr/bin/env python3
"""Make the benchmark dump: bench/target/Program.cs on the embedded CoreCLR 3.1.23, dumped by createdump.

    python bench/make_big_dump.py OUT.core [--count 9000000] [--seed 12345] [--content plain|mixed]
    python bench/make_big_dump.py OUT.core --content graph [--scale 10]

About 9 million strings of 0-140 characters (10% copies of 1,000 pooled values, 100 strings of
45,000-65,000 characters on the large object heap): a 1.5-2 GB ELF core.  --content plain (the default):
1% of the values with a few non-ASCII characters.  --content mixed: about 1 in 6 in another script
(Hangul, CJK, Cyrillic, emoji), Windows paths, JSON fragments, control characters and U+2028
(bench/target/Program.cs says how many of each).

--content graph: bench/target/Graph.cs instead, on .NET 8.0.4 (downloaded by sample_dumps/runtimes.py: a
runtime whose GC publishes its handle tables, which the roots are read from): about --scale million objects
(10: some 10.5 M) joined by about twice as many references (binary trees with shared payloads, circular linked
lists, a dictionary of lists, arrays of references across them, holders of shared subtrees), all held by static
fields; it prints what it made.  A 1.2 GB core at scale 10.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from clrlayout.live import embedded  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out", type=Path)
    ap.add_argument("--count", type=int, default=9_000_000)
    ap.add_argument("--seed", type=int, default=12345)
    ap.add_argument("--content", choices=["plain", "mixed", "graph"], default="plain")
    ap.add_argument("--scale", type=float, default=10.0, help="--content graph: millions of objects (about)")
    args = ap.parse_args()
    if args.content == "graph":
        return graph(args)
    with tempfile.TemporaryDirectory() as tmp:
        dll = Path(tmp) / "bigstrings.dll"
        subprocess.run(["mcs", "-target:exe", f"-out:{dll}", str(HERE / "target" / "Program.cs")], check=True)
        embedded.write_runtimeconfig(Path(tmp) / "bigstrings.runtimeconfig.json")
        t0 = time.time()
        proc = subprocess.Popen([str(embedded.dotnet_host()), str(dll), str(args.count), str(args.seed), args.content],
                                env=embedded.environment(), stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        line = proc.stdout.readline()
        if not line.startswith("READY"):
            raise SystemExit(f"target failed: {line!r}")
        pid = int(line.split()[1])
        print(f"target ready in {time.time() - t0:.1f} s: {line.strip()}", file=sys.stderr)
        dump_and_release(proc, embedded.createdump(), pid, args.out)
    return 0


def dump_and_release(proc, createdump, pid, out: Path) -> None:
    """Dump the waiting target with createdump, then let it exit."""
    t0 = time.time()
    try:
        subprocess.run([str(createdump), "-f", str(out), str(pid)], check=True, stdout=subprocess.DEVNULL)
    finally:
        proc.stdin.write("\n")
        proc.stdin.flush()
        proc.wait()
    print(f"{out}: {out.stat().st_size:,} bytes in {time.time() - t0:.1f} s", file=sys.stderr)


def graph(args) -> int:
    sys.path.insert(0, str(HERE.parent / "sample_dumps"))
    import runtimes

    runtime = runtimes.get("8.0.4")
    with tempfile.TemporaryDirectory() as tmp:
        dll = Path(tmp) / "graph.dll"
        subprocess.run(["mcs", "-target:exe", f"-out:{dll}", str(HERE / "target" / "Graph.cs")], check=True)
        config = runtime.write_runtimeconfig(Path(tmp) / "graph.runtimeconfig.json")
        t0 = time.time()
        proc = subprocess.Popen([str(c) for c in runtime.command(dll, config, str(args.scale), str(args.seed))],
                                env=runtime.environment(), stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        line = proc.stdout.readline()
        if not line.startswith("READY"):
            raise SystemExit(f"target failed: {line!r}")
        _, pid, objects, references = line.split()
        print(f"target ready in {time.time() - t0:.1f} s: {int(objects):,} objects, {int(references):,} references "
              f"made", file=sys.stderr)
        dump_and_release(proc, runtime.createdump, pid, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
