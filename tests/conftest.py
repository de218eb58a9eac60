"""The fixtures every tier shares, and the tiers as markers.  A test is marked with its folder's tier
(``unit``, ``samples``, ``oracle``), and with ``oracle`` wherever it is when it belongs to the long tier: it
asks for a real runtime (a fixture of :data:`ORACLE_FIXTURES`), is marked ``live`` or ``dac``, or is ``slow``:
an exhaustive sweep, or a per-sample test's run on a sample outside the quick set (tests/support/samples.py).
``pytest -m "not oracle"`` is the quick loop (unit, and the samples tier on the quick set); ``pytest`` runs
everything (CI); both in one process per core (:func:`pytest_cmdline_main`)."""

from __future__ import annotations

import json
import lzma
import os
from pathlib import Path

import pytest

from tests.support.samples import SAMPLES, Sample, data_file, is_quick_sample, load_sample, manifest

TIERS = ("unit", "samples", "oracle")
#: the fixtures that make a test need a real runtime: fresh dumps of real processes, their DAC, a hosted CLR
#: (the fixtures that make fresh dumps all ask for target_build; a test that downloads a runtime itself is
#: marked oracle where it is written)
ORACLE_FIXTURES = {"target_build", "python_host_core"}


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config):
    """A run goes to one process per core, four at most, with pytest-xdist (the test extra), unless ``-n`` says
    otherwise.  The quick loop (``-m "not oracle"``: its tests share nothing but the read-only samples) hands tests
    out one by one; a run with tier 3 hands out whole files (``loadfile``), so that a module's fixtures — fresh
    dumps of real processes — are made once, in one worker.  Runtimes are downloaded under a lock
    (sample_dumps/runtimes.py): two workers asking for one wait for the first's download."""
    option = config.option
    if getattr(option, "numprocesses", "absent") is not None or hasattr(config, "workerinput"):
        return  # -n given, xdist not loaded (-p no:xdist), or an xdist worker
    if option.collectonly or option.usepdb:
        return
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    if cores > 1:
        option.numprocesses = min(4, cores)
        # the quick loop: a worker that runs out takes tests from the other's queue; with tier 3: whole files
        option.dist = "worksteal" if "not oracle" in (option.markexpr or "") else "loadfile"


def pytest_collection_modifyitems(config, items):
    for item in items:
        folder = item.path.parent.name
        tier = folder if folder in TIERS else "samples"
        if any(not is_quick_sample(name) for name in _sample_names(item)):
            item.add_marker(pytest.mark.slow)
        if ORACLE_FIXTURES & set(getattr(item, "fixturenames", ())) or item.get_closest_marker("live") \
                or item.get_closest_marker("dac") or item.get_closest_marker("slow"):
            tier = "oracle"
        item.add_marker(getattr(pytest.mark, tier))


def _sample_names(item) -> list[str]:
    """The sample files a parametrized test runs on (a manifest entry, or a file name)."""
    names = []
    for value in getattr(getattr(item, "callspec", None), "params", {}).values():
        if isinstance(value, dict) and isinstance(value.get("file"), str):
            names.append(value["file"])
        elif isinstance(value, str) and value.endswith((".core", ".dmp")):
            names.append(value)
    return names


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


# --- fresh dumps of real processes, and the runtime's DAC (tests/support/fresh.py, dac_oracle.py) ----------


@pytest.fixture(scope="session")
def target_build(tmp_path_factory) -> Path:
    """The project's target programs: compiled once by Mono's C# compiler (mcs) where it is installed, else the
    assemblies committed in sample_dumps/targets/bin."""
    from tests.support.fresh import build_targets

    return build_targets(tmp_path_factory.mktemp("targets"))


#: the runtimes fresh cores are made on: the embedded 3.1.23, and .NET Core 2.2, .NET 8 and 10 (downloaded at
#: test time; 2.2 is a self-contained app's runtime, hosted by sample_dumps/corehost.py)
FRESH = [(v, gc) for v in ("2.2.5", "3.1.23", "8.0.4", "10.0.0") for gc in ("workstation", "server")]


@pytest.fixture(scope="session", params=FRESH, ids=lambda p: f"{p[0]}-{p[1]}")
def fresh_core(request, target_build, tmp_path_factory):
    """An untrimmed createdump core of the strings target on a real runtime, under each GC."""
    from tests.support.fresh import strings_core

    version, gc = request.param
    return strings_core(target_build, tmp_path_factory.mktemp("core"), version, gc == "server")


@pytest.fixture(params=manifest("types"), ids=lambda e: e["file"])
def types_sample(request):
    """A trimmed sample of the types target (`trim --types`: Windows x64 and x86 under Wine, and Linux x64), as
    a FreshCore: the same checks as on fresh cores, against reflection (no DAC here)."""
    from tests.support.fresh import FreshCore

    e = request.param
    truth = json.loads((SAMPLES / e["truth"]).read_text(encoding="utf-8"))
    return FreshCore(SAMPLES / e["file"], truth, None, truth["runtime_version"], e["gc"])


@pytest.fixture(scope="session", params=[v for v, gc in FRESH if gc == "workstation"])
def types_core(request, target_build, tmp_path_factory):
    """An untrimmed core of the types target (BCL, own and Reflection.Emit types, with what reflection says
    of every field) on each real runtime."""
    from tests.support.fresh import types_core

    return types_core(target_build, tmp_path_factory.mktemp("types"), request.param)


@pytest.fixture(scope="session")
def python_host_core(tmp_path_factory):
    """A core of Python hosting CoreCLR 3.1.23 through pythonnet: native memory full of runtime structures,
    and dead objects past gen0's allocation end."""
    from tests.support.fresh import python_host_core

    return python_host_core(tmp_path_factory.mktemp("host"))
