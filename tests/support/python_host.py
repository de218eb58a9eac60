"""A real CoreCLR process of the kind users dump: Python hosting the runtime through pythonnet, passing
strings and collections back and forth (tests/support/fresh.py dumps it).

    python tests/support/python_host.py OUT.core [ITERATIONS]

Its native memory holds runtime structures with MethodTable pointers, and its gen0 has been collected
many times, so dead objects lie past the allocation end: what a scan must not report as live strings.
"""

from __future__ import annotations

import os
import subprocess
import sys

from clrlayout.live import embedded
from clrlayout.live.host import load


def main(out: str, iterations: int) -> int:
    load("coreclr")
    import System
    from System.Collections.Generic import Dictionary, List
    from System.Text import StringBuilder

    keep = []
    strings = List[System.String]()
    table = Dictionary[System.String, System.Int32]()
    for i in range(iterations):
        strings.Add(f"python string {i} " + "\u00e9" * (i % 7))
        table[f"key-{i}"] = i
        if i % 10 == 0:
            sb = StringBuilder()
            sb.Append("built ")
            sb.Append(i)
            keep.append(sb.ToString())
        keep.append(System.String("abc" * (i % 13)))
    python_side = [("native " + str(i)) * 3 for i in range(iterations)]
    # garbage, then a compacting collection: the allocation end moves back over dead objects
    garbage = [System.String("garbage " + str(i)) for i in range(iterations)]
    del garbage
    System.GC.Collect()
    System.GC.WaitForPendingFinalizers()
    System.GC.Collect()
    keep.append(System.String("allocated after the collection"))
    subprocess.run([str(embedded.createdump()), "-f", out, str(os.getpid())], check=True,
                   stdout=subprocess.DEVNULL, env=embedded.environment())
    print(len(keep), len(python_side))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 20000))
