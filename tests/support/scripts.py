"""The repository's scripts (sample_dumps/make_dumps.py, runtimes.py, corehost.py; fuzz/make_hostile.py) as
modules for the tests, loaded from their files (they import each other by their own names, as they do when
run), without changing ``sys.path``."""

from __future__ import annotations

import importlib.util
import sys

from .samples import REPO

FOLDERS = {"make_dumps": "sample_dumps", "runtimes": "sample_dumps", "corehost": "sample_dumps",
           "make_hostile": "fuzz", "make_seeds": "fuzz", "fuzz_clrlayout": "fuzz"}
#: what each script imports of the others by name
NEEDS = {"make_dumps": ("runtimes",)}


def script(name: str):
    """The script ``name`` as a module (loaded once)."""
    if name in sys.modules:
        return sys.modules[name]
    for need in NEEDS.get(name, ()):
        script(need)
    spec = importlib.util.spec_from_file_location(name, REPO / FOLDERS[name] / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
