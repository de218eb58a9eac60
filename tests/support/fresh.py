"""Fresh, untrimmed dumps of real processes, made at test time, and what the runtime's DAC lists in them.

The sample dumps are trimmed to what clrlayout reads, so the DAC (which reads much more of the runtime's
data) cannot work on them.  These helpers run the project's own target programs on a real runtime, dump
them with the runtime's createdump (as ``sample_dumps/make_dumps.py`` does), and run ``dac_oracle.py`` on
the core.  Each is made once per test session and removed with the session's temporary directory.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from clrlayout.live import embedded

from .scripts import script

HERE = Path(__file__).resolve().parent
make_dumps = script("make_dumps")
runtimes = script("runtimes")


@dataclass
class FreshCore:
    """A core of the strings target, the target's own truth file, and the DAC of its runtime."""

    path: Path
    truth: dict
    dac: Path
    runtime: str
    gc: str

    def dac_listing(self, *flags: str) -> dict:
        """What the runtime's DAC lists in this core (``dac_oracle.py``; cached per set of flags)."""
        key = tuple(sorted(flags))
        cache = self.__dict__.setdefault("_dac", {})
        if key not in cache:
            r = subprocess.run([sys.executable, str(HERE / "dac_oracle.py"), str(self.path), str(self.dac), *key],
                               capture_output=True, text=True, timeout=600)
            assert r.returncode == 0, f"dac_oracle.py failed ({r.returncode}): {r.stderr[-2000:]}"
            cache[key] = json.loads(r.stdout)
        return cache[key]


def build_targets(build: Path) -> Path:
    build.mkdir(parents=True, exist_ok=True)
    make_dumps.compile_targets(build)
    return build


def strings_core(build: Path, work: Path, version: str, server: bool, full: bool = False) -> FreshCore:
    """The strings target on a real runtime (3.1.23 embedded; 8.0.4 and 10.0.0 downloaded by
    sample_dumps/runtimes.py), dumped by its createdump (``full``: every mapping)."""
    work.mkdir(parents=True, exist_ok=True)
    runtime = runtimes.get(version)
    raw, truth = make_dumps.make_linux(build, work, server=server, runtime=runtime, full=full)
    return FreshCore(raw, json.loads(truth.read_text(encoding="utf-8")), runtime.dac, version,
                     "server" if server else "workstation")


def types_core(build: Path, work: Path, version: str) -> FreshCore:
    """The types target (sample_dumps/targets/types) on a real runtime, dumped by its createdump."""
    work.mkdir(parents=True, exist_ok=True)
    runtime = runtimes.get(version)
    raw, truth = make_dumps.make_linux(build, work, runtime=runtime, target="types")
    return FreshCore(raw, json.loads(truth.read_text(encoding="utf-8")), runtime.dac, version, "workstation")


def stacks_core(build: Path, work: Path, version: str, server: bool, full: bool) -> FreshCore:
    """The stacks target (sample_dumps/targets/stacks: threads stopped in managed code, a P/Invoke, runtime
    waits, catch and finally funclets, generic code) on a real runtime, dumped by its createdump (``full``: every
    mapping; else its default heap dump, which leaves the modules' code out)."""
    work.mkdir(parents=True, exist_ok=True)
    runtime = runtimes.get(version)
    raw, truth = make_dumps.make_linux(build, work, server=server, runtime=runtime, target="stacks", full=full)
    return FreshCore(raw, json.loads(truth.read_text(encoding="utf-8")), runtime.dac, version,
                     "server" if server else "workstation")


def python_host_core(work: Path, iterations: int = 8000) -> FreshCore:
    """Python hosting CoreCLR 3.1.23 through pythonnet (tests/support/python_host.py), dumped by createdump."""
    work.mkdir(parents=True, exist_ok=True)
    out = work / "python-host.core"
    subprocess.run([sys.executable, str(HERE / "python_host.py"), str(out), str(iterations)], check=True,
                   capture_output=True, timeout=600)
    return FreshCore(out, {}, embedded.runtime_dir() / "libmscordaccore.so", embedded.RUNTIME_VERSION,
                     "workstation")
