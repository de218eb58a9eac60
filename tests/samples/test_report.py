"""``clrlayout report`` (issue 50) on the committed leak pair: every suspect's figures are the dominator tree's own
(`retained`), the types under its accumulation point add up to what that point retains, the growth is `diff
--live`'s, and the HTML is one self-contained file.  The page in a real browser: tests/oracle/test_report_browser.py."""

from __future__ import annotations

import json
import re

from tests.support.cli import run
from tests.support.samples import SAMPLES

AFTER = str(SAMPLES / "leak.coreclr-10.0.0.linux-x64.after.core")
BEFORE = str(SAMPLES / "leak.coreclr-10.0.0.linux-x64.before.core")


def _json(capsys, *args) -> dict:
    code, out, err = run(capsys, *args)
    assert code == 0, err
    return json.loads(out)


def test_suspects_are_the_dominator_trees(capsys):
    report = _json(capsys, "report", AFTER, "--format", "json")
    retained = {o["address"]: o for o in _json(capsys, "retained", AFTER, "--top", "2000", "--format",
                                               "json")["objects"]}
    assert report["suspects"] and report["live_bytes"] == _json(capsys, "retained", AFTER, "--format",
                                                                "json")["live_bytes"]
    for s in report["suspects"]:
        assert s["retained_size"] == retained[s["address"]]["retained_size"] >= 0.10 * report["live_bytes"]
        assert s["retained_count"] == retained[s["address"]]["retained_count"]
        point = s["accumulation_point"]
        assert point["retained_size"] == retained[point["address"]]["retained_size"]
        assert point["retained_size"] >= 0.7 ** point["depth"] * s["retained_size"] * 0.99
    leak = report["suspects"][0]
    assert leak["type"] == "System.Collections.Generic.List`1[[LeakItem, graph]]"
    assert "Graph.Leaks (static)" in [link["field"] for link in leak["chain"]]  # the static, not a stack word
    point = leak["accumulation_point"]
    assert point["type"] == "LeakItem[]" and sum(t["bytes"] for t in leak["types"]) <= point["retained_size"]


def test_the_tree_keeps_the_top_and_sums_the_rest(capsys):
    """The treemap's top level: the 48 biggest objects the roots hold, then one box for the rest of them (no
    address: their count and bytes); together about the live heap (less the runtime's statics arrays, looked
    through).  A level below keeps 12 children, the rest summed the same way."""
    report = _json(capsys, "report", AFTER, "--format", "json")
    tree = report["tree"]
    *kept, rest = tree
    assert len(kept) == 48 and all(t["address"] for t in kept) and rest["address"] is None and rest["objects"] > 0
    sizes = [t["retained_size"] for t in kept]
    assert sizes == sorted(sizes, reverse=True) and rest["retained_size"] <= rest["objects"] * sizes[-1]
    assert 0.9 * report["live_bytes"] <= sum(t["retained_size"] for t in tree) <= report["live_bytes"]
    for node in kept:
        assert len([c for c in node["children"] if c["address"]]) <= 12
        assert sum(c["retained_size"] for c in node["children"]) <= node["retained_size"]


def test_types_under_the_point_add_up_when_all_are_shown(capsys):
    report = _json(capsys, "report", AFTER, "--format", "json")
    for s in report["suspects"]:
        if len(s["types"]) < 10:  # every type of the subtree is listed: their bytes are what the point retains
            assert sum(t["bytes"] for t in s["types"]) == s["accumulation_point"]["retained_size"]


def test_growth_is_diff_live(capsys):
    report = _json(capsys, "report", AFTER, BEFORE, "--format", "json")
    diff = _json(capsys, "diff", BEFORE, AFTER, "--live", "--sort", "retained", "--format", "json")
    grew = {t["name"]: t for t in diff["types"] if t["bytes_after"] > t["bytes_before"]}
    assert report["growth"] and {g["type"] for g in report["growth"]} <= set(grew)
    for g in report["growth"]:
        assert g["bytes"] == [grew[g["type"]]["bytes_before"], grew[g["type"]]["bytes_after"]]
    assert "LeakItem" in {g["type"] for g in report["growth"]}
    # each row is held: the nearest object that dominates at least half of the type's live bytes
    # (it retains them, and is `retained`'s figure), and its chain from a root
    retained = {o["address"]: o for o in _json(capsys, "retained", AFTER, "--top", "3000", "--format",
                                               "json")["objects"]}
    rows = {g["type"]: g for g in report["growth"]}
    for g in report["growth"]:
        if g["holder"] is None:
            continue
        if g["holder"]["how"] == "dominator":
            assert 2 * g["holder"]["retained_size"] >= g["bytes"][-1]
        if g["holder"]["address"] in retained:
            assert g["holder"]["retained_size"] == retained[g["holder"]["address"]]["retained_size"]
        assert g["chain"] and g["chain"][-1]["address"] == g["holder"]["address"]
    for leaking in ("LeakItem", "LeakPayload[]"):  # the items and their payloads: held by the list's array
        assert rows[leaking]["holder"]["type"] == "LeakItem[]"
        assert "Graph.Leaks (static)" in [link["field"] for link in rows[leaking]["chain"]]


def test_threshold_and_usage(capsys, tmp_path):
    assert _json(capsys, "report", AFTER, "--format", "json", "--threshold", "60")["suspects"] == []
    assert run(capsys, "report", AFTER)[0] == 2  # the HTML report is a file
    assert run(capsys, "report", AFTER, "--format", "json", "-o", str(tmp_path / "x.html"))[0] == 2
    out = tmp_path / "report.html"
    code, text, _ = run(capsys, "report", AFTER, BEFORE, "-o", str(out))
    page = out.read_text(encoding="utf-8")
    assert code == 0 and page.startswith("<!DOCTYPE html>") and len(page) < 5 << 20
    assert not re.search(r"""(src|href)=["']https?:""", page)  # nothing from the network
    assert "Suspect 1" in page and "111,792" in page and "Graph.Leaks (static)" in page
