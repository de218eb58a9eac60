"""diff: what grew between dumps (issue 35).  A target that leaks a known number of objects of its own types
between dumps of one process (createdump after each step) gives exact deltas on 3.1, 8 and 10; dumps of two
processes give, type by type, the difference of each dump's own stats."""

from __future__ import annotations

import json

import pytest

import clrlayout
from clrlayout.cli import main
from tests.support.samples import SAMPLES
from tests.support.scripts import script


def _json(capsys, *args):
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    assert code == 0, err
    return json.loads(out)


@pytest.fixture(scope="module", params=["3.1.23", "8.0.4", "10.0.0"])
def leak_series(request, target_build, tmp_path_factory):
    """Three dumps of the graph target: as built, after it leaked 300 more items, after 200 more."""
    make_dumps = script("make_dumps")
    runtimes = script("runtimes")

    return request.param, make_dumps.make_linux_series(target_build, tmp_path_factory.mktemp("series"),
                                                       runtimes.get(request.param), [300, 200])


def test_the_leaked_types_deltas_are_exact(capsys, leak_series):
    version, series = leak_series
    (first, _), (second, step1), (third, step2) = series
    data = _json(capsys, "diff", first, second, "--format", "json")
    rows = {r["name"]: r for r in data["types"]}
    items, payloads = rows["LeakItem"], rows["LeakPayload[]"]
    assert (items["status"], items["delta_count"], payloads["delta_count"]) == ("new", 300, 300)
    assert items["delta_bytes"] + payloads["delta_bytes"] == step1["leaked_bytes"]
    assert data["types"][0]["name"] in ("LeakPayload[]", "System.String")  # the largest growth first
    # a row of dumps: a column each, the growth from first to last, and what grew at every step
    data = _json(capsys, "diff", first, second, third, "--format", "json", "--strings")
    rows = {r["name"]: r for r in data["types"]}
    assert rows["LeakItem"]["counts"] == [0, 300, 500] and rows["LeakItem"]["grew_every_step"]
    assert rows["LeakItem"]["bytes"][2] + rows["LeakPayload[]"]["bytes"][2] == \
        step1["leaked_bytes"] + step2["leaked_bytes"]
    token = next(s for s in data["strings"] if s["value"] == step1["token"])
    assert token["counts"][-1] - token["counts"][0] == 500
    # the live objects only (on 3.1 too: its handle tables found by their shape)
    live = _json(capsys, "diff", first, second, "--live", "--roots", "handles,finalizer", "--format", "json")
    rows = {r["name"]: r for r in live["types"]}
    assert rows["LeakItem"]["delta_count"] == 300 and rows["System.String"]["delta_count"] >= 300
    # each item retains its payload and its own token string (22 + 2 bytes a character, 8-aligned: x64 from 3.0);
    # 3.1 also keeps one more string alive (what the runtime read of the "grow" line), which no item holds
    token = (22 + 2 * len(step1["token"]) + 7) // 8 * 8
    assert rows["LeakItem"]["delta_retained"] == step1["leaked_bytes"] + 300 * token


def test_dumps_of_two_processes_differ_as_their_stats(capsys):
    before, after = SAMPLES / "types.coreclr-10.0.0.linux-x64.core", SAMPLES / "graph.coreclr-10.0.0.linux-x64.core"
    data = _json(capsys, "diff", before, after, "--format", "json")
    stats = [{r["name"] or f"<unknown type, MT {r['method_table']}>": r
              for r in _json(capsys, "stats", p, "--format", "json", "-q")["types"]} for p in (before, after)]
    for row in data["types"]:
        b, a = stats[0].get(row["name"]), stats[1].get(row["name"])
        assert row["count_before"] == (b["count"] if b else 0) and row["count_after"] == (a["count"] if a else 0)
        assert row["bytes_before"] == (b["total_size"] if b else 0) and row["bytes_after"] == (a["total_size"] if a else 0)
    assert {r["name"] for r in data["types"]} == set(stats[0]) | set(stats[1])
    # the Python API gives the same rows
    result = clrlayout.diff(before, after)
    assert [r.as_dict() for r in result.rows] == data["types"]


def test_usage(capsys):
    one = SAMPLES / "graph.coreclr-10.0.0.linux-x64.core"
    assert main(["diff", str(one)]) == 2
    assert main(["diff", str(one), str(one), "--sort", "retained"]) == 2
    assert main(["diff", str(one), str(one), "--roots", "handles"]) == 2
    capsys.readouterr()
    data = _json(capsys, "diff", one, SAMPLES / "strings.coreclr-8.0.4.win-x64.dmp", "--format", "json")
    assert data["warnings"] and "not comparable" in data["warnings"][0]


@pytest.fixture(scope="module")
def linux_types_core(target_build, tmp_path_factory):
    """The types target on .NET 8.0.4 linux-x64: the same program as the committed Windows x64 minidump."""
    from tests.support.fresh import types_core

    return types_core(target_build, tmp_path_factory.mktemp("types-linux"), "8.0.4")


def test_a_windows_minidump_against_a_linux_core_of_the_same_app(capsys, linux_types_core):
    """The types target on 8.0.4, a Wine minidump against a Linux core: the same runtime and architecture, so no
    warning; types matched by name across the two OSes (their MethodTables differ); the program's own types
    have the same counts and bytes in both (it allocates the same objects), and the rows are each dump's stats."""
    windows = SAMPLES / "types.coreclr-8.0.4.win-x64.dmp"
    data = _json(capsys, "diff", windows, linux_types_core.path, "--format", "json")
    assert data["warnings"] == []
    assert data["before"]["runtime"] == data["after"]["runtime"] == "coreclr 8.0.4"
    rows = {r["name"]: r for r in data["types"]}
    truth = json.loads((SAMPLES / "types.coreclr-8.0.4.win-x64.truth.json").read_text())
    # the program's own types that are not generic (reflection and the DAC spell generics differently) nor
    # emitted at run time (a dynamic module's types have no name: docs/limitations.md)
    own = {o["type"] for o in truth["objects"] if not o["type"].startswith(("System.", "Emitted."))
           and "`" not in o["type"]}
    assert len(own) >= 6
    for name in own:
        r = rows[name]
        assert r["count_before"] == r["count_after"] >= 1 and r["bytes_before"] == r["bytes_after"], r
        assert r["delta_count"] == r["delta_bytes"] == 0
    stats = [{r["name"]: r for r in _json(capsys, "stats", p, "--format", "json", "-q")["types"] if r["name"]}
             for p in (windows, linux_types_core.path)]
    for name, r in rows.items():
        if name in stats[0] and name in stats[1]:
            assert (r["count_before"], r["count_after"]) == (stats[0][name]["count"], stats[1][name]["count"])
