#!/usr/bin/env python3
"""Write fuzzing seeds into a corpus directory.

    python fuzz/make_seeds.py OUT_DIR

- synthetic CoreCLR minidumps (x64, x86) from tests/support/synth_dump.py: a few KB, the whole dump path;
- the trimmed seeds of tests/corpus/ (real dumps, 30 strings each);
- the first 32 KB of each real sample: every header, directory, stream and note, little memory.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT)]  # a script: the repository, for clrlayout and the tests' support package

from tests.support.synth_dump import mixed_minidump  # noqa: E402


def main() -> int:
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    for arch in ("x64", "x86"):
        (out / f"synth-{arch}.dmp").write_bytes(mixed_minidump(arch))
    for f in sorted((ROOT / "tests" / "corpus").iterdir()):
        (out / f.name).write_bytes(f.read_bytes())
    for f in sorted((ROOT / "sample_dumps").glob("strings.*")):
        if f.suffix in (".core", ".dmp"):
            (out / f"head-{f.name}").write_bytes(f.read_bytes()[: 32 * 1024])
    print(f"{len(list(out.iterdir()))} seeds in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
