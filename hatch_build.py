"""The wheel's build hook: the compiled kernels that write `dump`'s lines, compiled here, once, into the wheel.

numba compiles a kernel the first time it runs and keeps the result in the package's ``__pycache__``; without
this hook that first run is the user's (3.5 s on the machine of bench/README.md, a 3x slower first `dump`).
The hook runs the kernels once (``batchlines.warm_up``; the dominator tree's loops too,
``dominators.warm_up``) in a subprocess of the build environment, for the
baseline CPU of the platform (``NUMBA_CPU_NAME=generic``, which the ``clrlayout`` command sets as well, so
that the cache holds on any CPU of the architecture), and ships numba's cache files in the wheel.  numba keys
them by the source's content hash, its own version and Python's, so a different numba at run time compiles
again (slower once, never wrong).  The wheel is then specific to the platform it was built on.  Without numba
in the build environment (or if compiling fails) the wheel is built without them, as before.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

#: the folders whose modules' kernels are compiled: (those modules, how they are run once)
KERNELS = {Path("clrlayout") / "present": (("linekernels",), "from clrlayout.present.batchlines import warm_up; warm_up()"),
           Path("clrlayout") / "graph": (("dominators", "reach", "lookup"), "from clrlayout.graph.dominators import warm_up; warm_up()")}


class KernelCacheHook(BuildHookInterface):
    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict) -> None:
        if self.target_name != "wheel" or version == "editable":
            return
        root = Path(self.root)
        env = {k: v for k, v in os.environ.items() if not k.startswith("NUMBA_")}
        # the source tree first, then what this process sees (pip's isolated build environment is on its path)
        env.update(NUMBA_CPU_NAME="generic", PYTHONPATH=os.pathsep.join([str(root), *filter(None, sys.path)]))
        files = []
        for folder, (modules, run) in KERNELS.items():
            done = subprocess.run([sys.executable, "-c", run], cwd=root, env=env, capture_output=True, text=True)
            if done.returncode != 0:
                self.app.display_warning(f"the kernels of {folder} were not compiled into the wheel: "
                                         f"{done.stderr.strip()[-500:]}")
                continue
            cache = folder / "__pycache__"
            for module in modules:
                for f in sorted((root / cache).glob(f"{module}.*.nb[ic]")):
                    build_data["force_include"][str(f)] = str(cache / f.name)
                    files.append(f)
        if files:
            build_data["pure_python"] = False
            build_data["infer_tag"] = True
