"""The target programs' assemblies committed in sample_dumps/targets/bin are what their sources build: a clone
runs the tests that start them on real runtimes without a C# compiler."""

from __future__ import annotations

import json
import os
import shutil

import pytest

from tests.support.samples import SAMPLES
from tests.support.scripts import script

make_dumps = script("make_dumps")

PREBUILT = SAMPLES / "targets" / "bin"


@pytest.mark.parametrize("name", sorted(make_dumps.TARGET_SOURCES))
def test_prebuilt_assembly_is_of_the_current_sources(name):
    recorded = json.loads((PREBUILT / "SOURCES.json").read_text(encoding="utf-8"))
    assert recorded[name] == make_dumps.sources_digest(name), \
        f"{name}'s sources changed since targets/bin was built: python sample_dumps/make_dumps.py --prebuilt"
    data = (PREBUILT / f"{name}.dll").read_bytes()
    assert data[:2] == b"MZ" and len(data) > 1024


def test_mcs_builds_the_committed_bytes(tmp_path):
    """mcs is deterministic: the same sources give the same bytes (CI installs mcs, and requires it)."""
    if shutil.which(make_dumps.MCS) is None:  # the compiler make_dumps runs (CLRLAYOUT_MCS, else mcs)
        if os.environ.get("CLRLAYOUT_REQUIRE_MONO"):
            pytest.fail("mcs is required here (CLRLAYOUT_REQUIRE_MONO)")
        pytest.skip("Mono's C# compiler (mcs) is not installed: the committed assemblies are used as they are")
    make_dumps.compile_targets(tmp_path, use_compiler=True)
    for name in make_dumps.TARGET_SOURCES:
        assert (tmp_path / f"{name}.dll").read_bytes() == (PREBUILT / f"{name}.dll").read_bytes(), name


def test_without_a_compiler_the_committed_assemblies_are_used(tmp_path):
    make_dumps.compile_targets(tmp_path, use_compiler=False)
    for name in make_dumps.TARGET_SOURCES:
        assert (tmp_path / f"{name}.dll").read_bytes() == (PREBUILT / f"{name}.dll").read_bytes()
