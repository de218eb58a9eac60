"""Which runtime a dump holds: flavor, version, module, and the layout profile that fits it."""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..dump import DumpFile, Module
from ..errors import RuntimeNotFound
from .image import ImageVersion, holds_runtime, image_version
from .profiles import Profile, parse_version, select_profile

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
    #: the runtime is linked into the app's executable (a self-contained single-file app)
    single_file: bool = False
    #: the runtime's own version string: file version and commit (None: not found)
    image: ImageVersion | None = None

    @property
    def version_tuple(self) -> tuple[int, ...] | None:
        return parse_version(self.version)


def _version_from_file_version(flavor: str, fv: tuple[int, int, int, int]) -> str | None:
    """A product version from a file version: .NET 5+ builds are patch * 100 + year (8.0.424 is 8.0.4); .NET
    Core's were 4.700.x (3.x) and 4.6.x (2.x); the .NET Framework's is its version."""
    major, minor, build, rev = fv
    if flavor == "netfx":
        return f"{major}.{minor}.{build}.{rev}"
    if major >= 5:
        return f"{major}.{minor}.{build // 100}"
    if major == 4 and 700 <= minor < 800:
        return "3.x"
    if major == 4 and minor == 6:
        return "2.x"
    return None


def detect_runtime(dump: DumpFile) -> RuntimeInfo:
    """The CLR in the dump: a runtime module of the module list, or an executable that carries one (a
    single-file app); :class:`RuntimeNotFound` when there is none.  Its version comes from the binary -- its
    own version string, else the version resource a minidump records -- and from the module path only when
    the binary does not say (``version_source`` tells which)."""
    found = [(m, f) for m in dump.modules if (f := runtime_flavor(m.name))]
    single_file = False
    if not found:
        exe = _single_file_runtime(dump)
        if exe is None:
            names = ", ".join(sorted(set(RUNTIME_MODULES)))
            raise RuntimeNotFound(f"{dump.path}: no .NET runtime module in the dump (looked for {names}, and for "
                                  f"an executable with the runtime linked in)")
        found, single_file = [(exe, "coreclr")], True
    # prefer CoreCLR / .NET Framework over Mono if several are loaded
    found.sort(key=lambda mf: {"coreclr": 0, "netfx": 1, "mono": 2}[mf[1]])
    module, flavor = found[0]
    image = image_version(dump, module) if flavor != "mono" else None
    version, source = _version(flavor, module, image)
    return RuntimeInfo(flavor, version, source, module, single_file, image)


def _version(flavor: str, module: Module, image: ImageVersion | None) -> tuple[str | None, str]:
    path = _PATH_VERSION.search(module.path)
    path_version = path.group(1) if path else None
    if image is not None:
        v = (image.product_version if flavor == "coreclr" else None) or _version_from_file_version(flavor,
                                                                                                   image.file_version)
        said = f"the runtime's version string in {image.where} ({image.describe()})"
        if v and v.count(".") < 2 and path_version and path_version.startswith(v.removesuffix(".x") + "."):
            return path_version, f"the module path; {said} agrees ({v})"
        if v:
            return v, said
    for what, fv in (("product version", module.product_version), ("file version", module.file_version)):
        if fv and fv[0]:
            v = _version_from_file_version(flavor, fv)
            if v and ("x" not in v or not path_version):
                return v, f"the module's {what} resource {'.'.join(map(str, fv))}"
    if path_version:
        return path_version, "the module path"
    if module.name.lower() == "mscorwks.dll":
        return "2.0", "the module name"
    if flavor == "netfx":
        return "4.0", "the module name (clr.dll is .NET Framework 4.x)"
    return None, "unknown"


def _single_file_runtime(dump: DumpFile) -> Module | None:
    """The executable of a single-file app: the main module, when it carries the runtime.  (Only the main
    module is looked for: a minidump lists it first; an ELF core names the process after it.)"""
    name = (dump.process_name or "").lower()
    candidates = [m for m in dump.modules if name and m.name.lower().startswith(name)]
    if dump.format == "minidump" and dump.modules:
        candidates.insert(0, dump.modules[0])
    for module in candidates[:2]:
        if holds_runtime(dump, module):
            return module
    return None


def profile_for(dump: DumpFile, runtime: RuntimeInfo, directory=None) -> Profile:
    return select_profile(runtime.flavor, dump.arch, runtime.version_tuple, directory)
