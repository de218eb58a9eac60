"""The ``clrlayout`` command and ``python -m clrlayout``: the process around :func:`clrlayout.cli.main`."""

import gc
import os


def run() -> None:
    # The imports make some 100,000 objects: no collections while they do (12 ms of a 0.4 s `stats`), then
    # they are frozen, so that later collections skip them and forked children (parallel.py) do not write
    # to their pages to mark them, as the gc module's documentation advises for processes that fork.
    gc.disable()
    # numba compiles for the baseline CPU of the architecture, as the wheel's build did (hatch_build.py): the
    # compiled kernels it ships then hold on this CPU, and the first run compiles nothing
    os.environ.setdefault("NUMBA_CPU_NAME", "generic")
    from .cli import entry_point

    gc.freeze()
    gc.enable()
    entry_point()


if __name__ == "__main__":
    run()
