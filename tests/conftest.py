from __future__ import annotations

import json
import lzma
import os
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

try:
    import tomllib
except ModuleNotFoundError:  # pragma: no cover
    import tomli as tomllib

REPO = Path(__file__).resolve().parents[1]
SAMPLES = REPO / "sample_dumps"
#: files the tests read that were not made here (tests/data/SOURCES.md says where each comes from)
DATA = REPO / "tests" / "data"
sys.path.insert(0, str(Path(__file__).resolve().parent))


def data_file(name: str) -> Path:
    """A file of tests/data (in the repository: a clone has every file its tests read)."""
    path = DATA / name
    if not path.exists():
        pytest.fail(f"{path} is missing from the repository")
    return path


def manifest(target: str | None = "strings") -> list[dict]:
    """The sample dumps of a target program (``strings``, ``types``; None: all of them)."""
    dumps = tomllib.loads((SAMPLES / "MANIFEST.toml").read_text(encoding="utf-8"))["dumps"]
    return [e for e in dumps if target is None or e["target"] == f"targets/{target}/Program.cs"]


@dataclass
class Sample:
    entry: dict
    path: Path
    truth: dict

    @property
    def name(self) -> str:
        return self.path.name

    @property
    def string_base_size(self) -> int:
        """System.String's BaseSize on the sample's runtime (clr-layout-facts.md §2): 14 on x86; on x64 22,
        and 26 before .NET Core 3.0 (the extra 4 bytes of coreclr#17876)."""
        if self.truth["pointer_size"] == 4:
            return 14
        major = int(self.truth["runtime_version"].split(".")[0])
        return 26 if major < 3 else 22

    def known(self, name: str) -> dict:
        for s in self.truth["strings"]:
            if s["name"] == name:
                return s
        raise KeyError(name)


def load_sample(entry: dict) -> Sample:
    truth = json.loads((SAMPLES / entry["truth"]).read_text(encoding="utf-8"))
    return Sample(entry, SAMPLES / entry["file"], truth)


@pytest.fixture(params=manifest(), ids=lambda e: e["file"])
def sample(request) -> Sample:
    return load_sample(request.param)


@pytest.fixture(scope="session")
def triage_core(tmp_path_factory) -> Path:
    """The public .NET Core 2.0 triage core (tests/data), decompressed once."""
    src = data_file("netcore20-preview-linux-x64-triage.core.xz")
    out = tmp_path_factory.mktemp("triage") / "triage.core"
    out.write_bytes(lzma.decompress(src.read_bytes()))
    return out


@pytest.fixture(scope="session")
def triage_truth() -> dict:
    return json.loads(data_file("netcore20-preview-linux-x64-triage.json").read_text())


@pytest.fixture(scope="session")
def golden() -> dict:
    return json.loads(data_file("netfx-windbg-strings.json").read_text())


def units_to_str(units: list[int]) -> str:
    return b"".join(u.to_bytes(2, "little") for u in units).decode("utf-16-le", "surrogatepass")


# --- fresh dumps of real processes, and the runtime's DAC (tests/fresh.py, tests/dac_oracle.py) ----------


@pytest.fixture(scope="session")
def target_build(tmp_path_factory) -> Path:
    """The project's target programs: compiled once by Mono's C# compiler (mcs) where it is installed, else the
    assemblies committed in sample_dumps/targets/bin."""
    from fresh import build_targets

    return build_targets(tmp_path_factory.mktemp("targets"))


#: the runtimes fresh cores are made on: the embedded 3.1.23, and .NET Core 2.2, .NET 8 and 10 (downloaded at
#: test time; 2.2 is a self-contained app's runtime, hosted by sample_dumps/corehost.py)
FRESH = [(v, gc) for v in ("2.2.5", "3.1.23", "8.0.4", "10.0.0") for gc in ("workstation", "server")]


@pytest.fixture(scope="session", params=FRESH, ids=lambda p: f"{p[0]}-{p[1]}")
def fresh_core(request, target_build, tmp_path_factory):
    """An untrimmed createdump core of the strings target on a real runtime, under each GC."""
    from fresh import strings_core

    version, gc = request.param
    return strings_core(target_build, tmp_path_factory.mktemp("core"), version, gc == "server")


@pytest.fixture(params=manifest("types"), ids=lambda e: e["file"])
def types_sample(request):
    """A trimmed sample of the types target (`trim --types`: Windows x64 and x86 under Wine, and Linux x64), as
    a FreshCore: the same checks as on fresh cores, against reflection (no DAC here)."""
    from fresh import FreshCore

    e = request.param
    truth = json.loads((SAMPLES / e["truth"]).read_text(encoding="utf-8"))
    return FreshCore(SAMPLES / e["file"], truth, None, truth["runtime_version"], e["gc"])


@pytest.fixture(scope="session", params=[v for v, gc in FRESH if gc == "workstation"])
def types_core(request, target_build, tmp_path_factory):
    """An untrimmed core of the types target (BCL, own and Reflection.Emit types, with what reflection says
    of every field) on each real runtime."""
    from fresh import types_core

    return types_core(target_build, tmp_path_factory.mktemp("types"), request.param)


@pytest.fixture(scope="session")
def python_host_core(tmp_path_factory):
    """A core of Python hosting CoreCLR 3.1.23 through pythonnet: native memory full of runtime structures,
    and dead objects past gen0's allocation end."""
    from fresh import python_host_core

    return python_host_core(tmp_path_factory.mktemp("host"))
