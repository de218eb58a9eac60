"""Hosting a real runtime in this Python process through pythonnet (one runtime per process).

- ``coreclr``: CoreCLR 3.1.23 from the PyPI package dotnetcore2 (``pip install 'clrlayout[live]'``), with
  invariant globalization (3.1 cannot load the libicu of current distributions).
- ``mono``: Mono from the system, hosted through its embedding library libmonosgen-2.0.so.1 (Debian: package
  ``libmonosgen-2.0-1``, which ``mono-devel`` brings; ``mono-runtime`` alone has only the ``mono`` program).
"""

from __future__ import annotations

import ctypes.util
import os
import platform
import tempfile
import warnings
from dataclasses import dataclass
from pathlib import Path

from ..errors import LiveRuntimeUnavailable
from . import embedded

MONO_LIBRARIES = [
    "/usr/lib/libmonosgen-2.0.so.1",
    "/usr/lib/x86_64-linux-gnu/libmonosgen-2.0.so.1",
    "/usr/local/lib/libmonosgen-2.0.so.1",
    "/Library/Frameworks/Mono.framework/Versions/Current/lib/libmonosgen-2.0.1.dylib",
]
MONO_HINT = ("install Mono's embedding library libmonosgen-2.0.so.1 (Debian: apt-get install libmonosgen-2.0-1, "
             "or mono-devel, which brings it) or set CLRLAYOUT_MONO_LIB to its path")


@dataclass(frozen=True)
class LiveRuntime:
    flavor: str  # "coreclr" | "mono"
    version: str
    description: str
    arch: str
    pointer_size: int
    library: str  # the runtime's library (libcoreclr.so; createdump is beside it)

    def as_dict(self) -> dict:
        return {"flavor": self.flavor, "version": self.version, "arch": self.arch, "description": self.description}


_loaded: LiveRuntime | None = None


def _arch(pointer_size: int) -> str:
    machine = platform.machine().lower()
    if machine in ("aarch64", "arm64"):
        return "arm64"
    if machine.startswith("arm"):
        return "arm"
    return "x64" if pointer_size == 8 else "x86"


def find_mono() -> str:
    env = os.environ.get("CLRLAYOUT_MONO_LIB")
    if env:
        if not Path(env).exists():
            raise LiveRuntimeUnavailable(f"CLRLAYOUT_MONO_LIB={env} does not exist; {MONO_HINT}")
        return env
    for path in MONO_LIBRARIES:
        if Path(path).exists():
            return path
    found = ctypes.util.find_library("monosgen-2.0")
    if found:
        return found
    import shutil

    program = shutil.which("mono")
    what = f"Mono is installed ({program}) but not its embedding library" if program else "Mono is not installed"
    raise LiveRuntimeUnavailable(f"{what}: no libmonosgen-2.0.so.1 found; {MONO_HINT}")


def load(flavor: str = "coreclr", dotnet_root: str | None = None, framework: str | None = None) -> LiveRuntime:
    """Load the runtime into this process (once); returns what was loaded.  ``dotnet_root``: host the CoreCLR of
    that .NET installation (``framework``: which of its Microsoft.NETCore.App versions; default the newest)
    instead of the embedded 3.1.23."""
    global _loaded
    if _loaded is not None:
        if _loaded.flavor != flavor:
            raise LiveRuntimeUnavailable(f"this process already hosts {_loaded.flavor}; "
                                         f"run another process for {flavor}")
        return _loaded
    try:
        from clr_loader import get_coreclr, get_mono
        from pythonnet import set_runtime
    except ImportError:
        raise LiveRuntimeUnavailable(f"pythonnet is not installed; {embedded.INSTALL_HINT}") from None
    if flavor != "coreclr" and (dotnet_root or framework):
        raise LiveRuntimeUnavailable("--dotnet-root and --framework choose a CoreCLR, not Mono")
    if flavor == "coreclr":
        if dotnet_root is not None:
            root, version = embedded.choose_framework(dotnet_root, framework)
        elif framework is not None:
            raise LiveRuntimeUnavailable("--framework chooses among the runtimes of --dotnet-root DIR")
        else:
            root, version = embedded.dotnet_root(), embedded.RUNTIME_VERSION
        # hostfxr reads the runtimeconfig while the runtime starts; the directory goes when it has
        with tempfile.TemporaryDirectory(prefix="clrlayout-live-") as scratch:
            config = Path(scratch) / "clrlayout.runtimeconfig.json"
            embedded.write_runtimeconfig(config, version=version)
            os.environ.setdefault("DOTNET_ROOT", str(root))
            try:
                set_runtime(get_coreclr(runtime_config=str(config), dotnet_root=str(root)))
                __import__("clr")
            except Exception as e:
                raise LiveRuntimeUnavailable(f"cannot load CoreCLR from {root}: {e}") from None
        runtime_dir = Path(root) / "shared" / "Microsoft.NETCore.App" / version
        library = str(runtime_dir / "libcoreclr.so")
    elif flavor == "mono":
        library = find_mono()
        try:
            with warnings.catch_warnings():  # clr_loader warns about Mono < 6.12; 6.8 is what Debian ships and works
                warnings.simplefilter("ignore", UserWarning)
                set_runtime(get_mono(libmono=library))
        except Exception as e:
            raise LiveRuntimeUnavailable(f"cannot load Mono from {library}: {e}; {MONO_HINT}") from None
    else:
        raise LiveRuntimeUnavailable(f"unknown runtime {flavor!r} (coreclr or mono)")
    __import__("clr")  # starts the runtime
    import System

    pointer_size = System.IntPtr.Size
    if flavor == "mono":
        mono_runtime = System.Type.GetType("Mono.Runtime")
        flags = System.Reflection.BindingFlags.NonPublic | System.Reflection.BindingFlags.Static
        description = "Mono " + str(mono_runtime.GetMethod("GetDisplayName", flags).Invoke(None, None))
        version = description.split()[1]
    else:
        version = str(System.Environment.Version)
        description = f"CoreCLR {version} " + ("(dotnetcore2)" if dotnet_root is None else f"({root})")
    _loaded = LiveRuntime(flavor, version, description, _arch(pointer_size), pointer_size, library)
    return _loaded
