#!/usr/bin/env python3
"""Make the benchmark dump: bench/target/Program.cs on the embedded CoreCLR 3.1.23, dumped by createdump.

    python bench/make_big_dump.py OUT.core [--count 9000000] [--seed 12345] [--content plain|mixed]

About 9 million strings of 0-140 characters (10% copies of 1,000 pooled values, 100 strings of
45,000-65,000 characters on the large object heap): a 1.5-2 GB ELF core.  --content plain (the default):
1% of the values with a few non-ASCII characters.  --content mixed: about 1 in 6 in another script
(Hangul, CJK, Cyrillic, emoji), Windows paths, JSON fragments, control characters and U+2028
(bench/target/Program.cs says how many of each).
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
    ap.add_argument("--content", choices=["plain", "mixed"], default="plain")
    args = ap.parse_args()
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
        t0 = time.time()
        try:
            subprocess.run([str(embedded.createdump()), "-f", str(args.out), str(pid)], check=True,
                           stdout=subprocess.DEVNULL)
        finally:
            proc.stdin.write("\n")
            proc.stdin.flush()
            proc.wait()
        print(f"{args.out}: {args.out.stat().st_size:,} bytes in {time.time() - t0:.1f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
