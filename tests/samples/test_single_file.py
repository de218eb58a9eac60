"""A single-file app's types are named as any app's (issue 32, item 11): its assemblies are inside the
executable's bundle and the runtime copies them into anonymous memory, where no file mapping names them.
They are read from the dump's memory, else from the bundle in the executable (its manifest found through the
bundle marker)."""

from __future__ import annotations


import pytest

import clrlayout
from clrlayout.analyses.typestats import TypeStats
from clrlayout.types.bundle import ASSEMBLY, find_bundle
from clrlayout.types.images import ManagedImages
from tests.support.samples import SAMPLES, manifest
from tests.support.scripts import script
from clrlayout.session import open_session  # the engine under the model: its plumbing too



def _names(path, monkeypatch=None, source: str | None = None) -> dict[int, str | None]:
    """Every heap type's name, with images read only from the dump's memory or only from the bundle."""
    with pytest.MonkeyPatch.context() as mp:
        if source == "memory":
            mp.setattr(ManagedImages, "_bundled_image", lambda self, address: None)
        elif source == "bundle":
            mp.setattr(ManagedImages, "_memory_image", lambda self, address: None)
        with open_session(path) as s:
            stats = TypeStats()
            for win in s.heap_steps().windows():
                stats.add(win, s.mts)
            return {mt: s.type_name(mt) for mt in stats.totals}


def test_the_single_file_sample_names_every_type_from_the_dump():
    entry = next(e for e in manifest() if e["single_file"])
    names = _names(SAMPLES / entry["file"], source="memory")
    assert len(names) > 100 and all(names.values()), [hex(m) for m, n in names.items() if not n]
    assert {"System.String", "System.Char[]", "System.Object[]", "System.Byte"} <= set(names.values())


@pytest.fixture(scope="module")
def single_file_core(target_build, tmp_path_factory):
    """An untrimmed core of the strings target inside a single-file .NET 10 app (sample_dumps/make_dumps.py)."""
    make_dumps = script("make_dumps")

    raw, _ = make_dumps.make_single_file(target_build, tmp_path_factory.mktemp("single-file"))
    return raw


@pytest.mark.oracle  # downloads the single-file app
def test_the_bundle_reader_lists_the_apps_assemblies():
    runtimes = script("runtimes")

    exe = runtimes.single_file_app()
    with open(exe, "rb") as f:
        data = f.read()
    bundle = find_bundle(lambda offset, size: data[offset : offset + size], len(data))
    assert bundle is not None and bundle.version[0] >= 6
    assemblies = bundle.assemblies()
    assert "system.private.corelib" in assemblies and len(assemblies) > 100
    assert all(f.type == ASSEMBLY for f in assemblies.values())
    corelib = bundle.contents(assemblies["system.private.corelib"], 64 << 20)
    assert corelib[:2] == b"MZ" and len(corelib) == assemblies["system.private.corelib"].size
    assert find_bundle(lambda offset, size: data[offset : offset + size][:4096], 4096) is None  # a plain file


def test_names_from_the_bundle_equal_names_from_memory(single_file_core):
    from_memory = _names(single_file_core, source="memory")
    from_bundle = _names(single_file_core, source="bundle")
    assert len(from_memory) > 100
    assert from_memory == from_bundle
    assert all(from_memory.values()), [hex(m) for m, n in from_memory.items() if not n]
