"""The committed samples: where they are, their manifest, their truth files, and the data files of tests/data."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest

try:
    import tomllib
except ModuleNotFoundError:  # pragma: no cover
    import tomli as tomllib

REPO = Path(__file__).resolve().parents[2]
SAMPLES = REPO / "sample_dumps"
#: files the tests read that were not made here (tests/data/SOURCES.md says where each comes from)
DATA = REPO / "tests" / "data"


#: the strings samples the quick loop (-m "not oracle") checks each per-sample test on: each runtime (2.1, 2.2,
#: 3.1, 8, 10), each format and architecture, both GC flavors, the single-file app; the others are ``slow``
QUICK_SAMPLES = {"strings.coreclr-2.1.8.win-x86.dmp", "strings.coreclr-2.2.5.linux-x64-svr.core",
                 "strings.coreclr-3.1.23.linux-x64.core", "strings.coreclr-3.1.23.win-x86-svr.dmp",
                 "strings.coreclr-8.0.4.win-x64.dmp", "strings.coreclr-10.0.0.linux-x64-svr.core",
                 "strings.coreclr-10.0.13.linux-x64-singlefile.core"}


def is_quick_sample(name: str) -> bool:
    """Whether the quick loop checks on the sample ``name`` (a file name): every sample but the strings
    samples outside :data:`QUICK_SAMPLES`."""
    return not name.startswith("strings.") or name in QUICK_SAMPLES


def data_file(name: str) -> Path:
    """A file of tests/data (in the repository: a clone has every file its tests read)."""
    path = DATA / name
    if not path.exists():
        pytest.fail(f"{path} is missing from the repository")
    return path


def manifest(target: str | None = "strings") -> list[dict]:
    """The sample dumps of a target program (``strings``, ``types``, ``graph``; None: all of them); ``leak``: the
    two dumps of one process of the graph target, before and after it leaked (not among the graph's)."""
    dumps = tomllib.loads((SAMPLES / "MANIFEST.toml").read_text(encoding="utf-8"))["dumps"]
    if target == "leak":
        return [e for e in dumps if "step" in e]
    return [e for e in dumps if target is None or (e["target"] == f"targets/{target}/Program.cs" and "step" not in e)]


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


def units_to_str(units: list[int]) -> str:
    return b"".join(u.to_bytes(2, "little") for u in units).decode("utf-16-le", "surrogatepass")
