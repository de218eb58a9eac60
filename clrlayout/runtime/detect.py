"""Which runtime a dump holds: flavor, version, module, and the layout profile that fits it."""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..errors import RuntimeNotFound
from .profiles import Profile, parse_version, select_profile
from ..dump import Dump, Module

# module file name -> flavor (case-insensitive)
RUNTIME_MODULES = {
    "coreclr.dll": "coreclr",
    "libcoreclr.so": "coreclr",
    "libcoreclr.dylib": "coreclr",
    "clr.dll": "netfx",
    "mscorwks.dll": "netfx",
    "mono-2.0-sgen.dll": "mono",
    "libmonosgen-2.0.dylib": "mono",
}
# shared libraries with version suffixes, as mapped (symlinks resolved): libmonosgen-2.0.so.1.0.0
_SO_VERSIONED = re.compile(r"^(libmonosgen-2\.0\.so|libcoreclr\.so)(\.\d+)*$")


def runtime_flavor(module_name: str) -> str | None:
    """The runtime flavor a module file name stands for, or None."""
    name = module_name.lower()
    if name in RUNTIME_MODULES:
        return RUNTIME_MODULES[name]
    m = _SO_VERSIONED.match(name)
    if m:
        return "mono" if m.group(1).startswith("libmono") else "coreclr"
    return None

_PATH_VERSION = re.compile(r"Microsoft\.NETCore\.App[\\/](\d+\.\d+\.\d+[^\\/]*)[\\/]", re.IGNORECASE)


@dataclass(frozen=True)
class RuntimeInfo:
    flavor: str  # "coreclr" | "netfx" | "mono"
    version: str | None
    version_source: str  # where the version came from
    module: Module | None

    @property
    def version_tuple(self) -> tuple[int, ...] | None:
        return parse_version(self.version)


def _version_from_file_version(flavor: str, fv: tuple[int, int, int, int]) -> str | None:
    """CoreCLR's file version is not its product version: 4.700.x is .NET Core 3.x, 4.6.x is 2.x."""
    major, minor, build, rev = fv
    if flavor == "netfx":
        return f"{major}.{minor}.{build}.{rev}"
    if major >= 5:
        return f"{major}.{minor}"
    if major == 4 and minor >= 700:
        return "3.0" if minor < 800 else None
    if major == 4 and 600 <= minor < 700:
        return "2.0"
    return None


def detect_runtime(dump: Dump) -> RuntimeInfo:
    """The CLR in the dump, from its module list; :class:`RuntimeNotFound` when there is none."""
    found = [(m, f) for m in dump.modules if (f := runtime_flavor(m.name))]
    if not found:
        names = ", ".join(sorted({n for n in RUNTIME_MODULES}))
        raise RuntimeNotFound(f"{dump.path}: no .NET runtime module in the dump (looked for {names})")
    # prefer CoreCLR / .NET Framework over Mono if several are loaded
    found.sort(key=lambda mf: {"coreclr": 0, "netfx": 1, "mono": 2}[mf[1]])
    module, flavor = found[0]
    m = _PATH_VERSION.search(module.path)
    if m:
        return RuntimeInfo(flavor, m.group(1), "module path", module)
    if module.file_version:
        v = _version_from_file_version(flavor, module.file_version)
        if v:
            return RuntimeInfo(flavor, v, f"file version {'.'.join(map(str, module.file_version))}", module)
    if module.name.lower() == "mscorwks.dll":
        return RuntimeInfo(flavor, "2.0", "module name", module)
    if flavor == "netfx":
        return RuntimeInfo(flavor, "4.0", "module name (clr.dll is .NET Framework 4.x)", module)
    return RuntimeInfo(flavor, None, "unknown", module)


def profile_for(dump: Dump, runtime: RuntimeInfo, directory=None) -> Profile:
    return select_profile(runtime.flavor, dump.arch, runtime.version_tuple, directory)
