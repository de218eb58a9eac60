"""formats/thread-state.toml's Thread layouts (issue 49, item 1): one for each runtime before .NET 9 whose
offsets were found against the DAC on this machine (2.2.5, 3.1.23, 8.0.4 on Linux), none for the others (2.1,
5, 6, 7: no such runtime can be had here, so `threads` says why and exits 4 rather than guess), and each layout's
table of DAC globals consistent with dacvars.h (the ThreadStore's entry before the finalizer's)."""

from __future__ import annotations

import pytest

from clrlayout.runtime.threadstore import FIELDS, layout_for


@pytest.mark.parametrize("version", [(2, 2, 5), (3, 1, 23), (8, 0, 4)])
def test_the_measured_runtimes_have_a_layout(version):
    layout = layout_for(version, "linux")
    assert layout is not None and set(FIELDS) <= set(layout["Thread"])
    table = layout["dac_table"]
    assert table["form"] in ("rva32", "address") and 0 <= table["thread_store"] < table["finalizer"]
    offsets = [layout["Thread"][f] for f in FIELDS]
    assert len(set(offsets)) == len(offsets)  # no two fields at one place


@pytest.mark.parametrize("version", [(2, 1, 8), (5, 0, 17), (6, 0, 36), (7, 0, 20), (9, 0, 0), (10, 0, 0)])
def test_no_layout_is_guessed_for_the_others(version):
    assert layout_for(version, "linux") is None  # 9+: the contract descriptor


def test_windows_builds_are_not_given_the_linux_layouts():
    assert layout_for((3, 1, 23), "windows") is None and layout_for((8, 0, 4), "windows") is None
