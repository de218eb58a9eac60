#!/usr/bin/env python3
"""Run a managed program on a CoreCLR runtime folder that has no `dotnet` host: the folder of a
self-contained app (.NET Core 2.2.5 from PyPI's mssql-cli: see docs/facts/modern-runtimes.md).

    python sample_dumps/corehost.py RUNTIME_DIR PROGRAM.dll [ARGS...]

It does what the `corerun` test host does, with ctypes: loads the folder's libcoreclr.so, starts the runtime
with every assembly of the folder and the program's own as trusted platform assemblies
(`coreclr_initialize`), and runs the program's entry point (`coreclr_execute_assembly`).  Its exit code
is the program's.  Test-time only (sample dumps, fresh cores): never part of the product.
"""

from __future__ import annotations

import ctypes
import sys
from pathlib import Path


def _strings(values: list[str]):
    return (ctypes.c_char_p * len(values))(*[v.encode() for v in values])


def run(runtime_dir: Path, program: Path, args: list[str]) -> int:
    program = program.resolve()
    assemblies = sorted({str(p) for p in runtime_dir.glob("*.dll")} | {str(program)})
    properties = {
        "TRUSTED_PLATFORM_ASSEMBLIES": ":".join(assemblies),
        "APP_PATHS": str(program.parent),
        "NATIVE_DLL_SEARCH_DIRECTORIES": f"{runtime_dir}:",
        "PLATFORM_RESOURCE_ROOTS": str(program.parent),
        "System.Globalization.Invariant": "true",
    }
    coreclr = ctypes.CDLL(str(runtime_dir / "libcoreclr.so"), mode=ctypes.RTLD_GLOBAL)
    handle, domain = ctypes.c_void_p(), ctypes.c_uint()
    hr = coreclr.coreclr_initialize(str(program).encode(), b"clrlayout", len(properties), _strings(list(properties)),
                                    _strings(list(properties.values())), ctypes.byref(handle), ctypes.byref(domain))
    if hr < 0:
        raise SystemExit(f"corehost: coreclr_initialize failed: {hr & 0xFFFFFFFF:#010x}")
    code = ctypes.c_uint()
    hr = coreclr.coreclr_execute_assembly(handle, domain, len(args), _strings(args), str(program).encode(),
                                          ctypes.byref(code))
    if hr < 0:
        raise SystemExit(f"corehost: coreclr_execute_assembly failed: {hr & 0xFFFFFFFF:#010x}")
    return code.value


if __name__ == "__main__":
    if len(sys.argv) < 3:
        raise SystemExit(__doc__)
    sys.exit(run(Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3:]))
