"""The embedded .NET runtime: CoreCLR 3.1.23 from the PyPI package ``dotnetcore2`` (``pip install clrlayout[live]``).

Used by the live harness and by the scripts that make sample dumps: where the runtime is, its ``dotnet``
host and ``createdump``, and the environment and runtimeconfig it needs (invariant globalization: CoreCLR
3.1 cannot use the libicu of current Linux distributions).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from ..errors import LiveRuntimeUnavailable

RUNTIME_VERSION = "3.1.23"
INSTALL_HINT = "install it with: pip install 'clrlayout[live]' (it brings dotnetcore2==3.1.23, pythonnet)"


def dotnet_root() -> Path:
    """The folder holding ``dotnet`` and ``shared/Microsoft.NETCore.App/3.1.23``."""
    try:
        import dotnetcore2
    except ImportError:
        raise LiveRuntimeUnavailable(f"the embedded CoreCLR (package dotnetcore2) is not installed; "
                                     f"{INSTALL_HINT}") from None
    root = Path(dotnetcore2.__file__).resolve().parent / "bin"
    if not (root / "shared" / "Microsoft.NETCore.App" / RUNTIME_VERSION).is_dir():
        raise LiveRuntimeUnavailable(f"dotnetcore2 at {root} has no Microsoft.NETCore.App {RUNTIME_VERSION}; "
                                     f"{INSTALL_HINT}")
    return root


def runtime_dir() -> Path:
    return dotnet_root() / "shared" / "Microsoft.NETCore.App" / RUNTIME_VERSION


def dotnet_host() -> Path:
    return dotnet_root() / "dotnet"


def createdump() -> Path:
    path = runtime_dir() / "createdump"
    if not os.access(path, os.X_OK):
        raise LiveRuntimeUnavailable(f"{path} is missing or not executable")
    return path


def runtimeconfig(invariant: bool = True, version: str = RUNTIME_VERSION) -> dict:
    major, minor = (int(x) for x in version.split(".")[:2])
    tfm = f"netcoreapp{major}.{minor}" if major < 5 else f"net{major}.{minor}"
    config = {"runtimeOptions": {"tfm": tfm, "framework": {"name": "Microsoft.NETCore.App", "version": version}}}
    if invariant:
        config["runtimeOptions"]["configProperties"] = {"System.Globalization.Invariant": True}
    return config


def write_runtimeconfig(path: str | Path, invariant: bool = True, version: str = RUNTIME_VERSION) -> Path:
    path = Path(path)
    path.write_text(json.dumps(runtimeconfig(invariant, version), indent=1))
    return path


def installed_frameworks(root: str | Path) -> list[str]:
    """The Microsoft.NETCore.App versions of a .NET installation folder (what `dotnet --list-runtimes` lists),
    oldest first."""
    shared = Path(root) / "shared" / "Microsoft.NETCore.App"
    found = [d.name for d in shared.iterdir() if (d / "libcoreclr.so").exists()] if shared.is_dir() else []

    def key(v: str):
        return tuple(int(x) if x.isdigit() else -1 for x in v.replace("-", ".").split("."))

    return sorted(found, key=key)


def choose_framework(root: str | Path, framework: str | None) -> tuple[Path, str]:
    """(the installation folder, the framework version) to host from ``root`` (a user's /usr/share/dotnet, say):
    ``framework`` (a version, or its prefix: 8, 8.0), else the newest installed."""
    root = Path(root)
    if not (root / "host" / "fxr").is_dir():
        raise LiveRuntimeUnavailable(f"{root} is not a .NET installation folder (no host/fxr: give the folder that "
                                     "holds `dotnet`, e.g. /usr/share/dotnet)")
    versions = installed_frameworks(root)
    if framework is not None:
        versions = [v for v in versions if v == framework or v.startswith(framework.rstrip(".") + ".")]
    if not versions:
        have = ", ".join(installed_frameworks(root)) or "none"
        raise LiveRuntimeUnavailable(f"{root} has no Microsoft.NETCore.App {framework or ''} (installed: {have})")
    return root, versions[-1]


def environment() -> dict:
    """Environment for processes that run on the embedded runtime."""
    env = dict(os.environ)
    env["DOTNET_ROOT"] = str(dotnet_root())
    env.setdefault("DOTNET_SYSTEM_GLOBALIZATION_INVARIANT", "1")
    env.setdefault("DOTNET_CLI_TELEMETRY_OPTOUT", "1")
    return env
