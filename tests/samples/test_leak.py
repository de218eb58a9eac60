"""The committed leak pair (issue 35): two dumps of one process of the graph target, before and after it leaked
300 items; what `diff` finds in them is what the target says it leaked (the `after` truth file)."""

from __future__ import annotations

import json

from clrlayout.cli import main
from tests.support.samples import SAMPLES, manifest


def _json(capsys, *args):
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    assert code == 0, err
    return json.loads(out)


def _pair():
    entries = {e["step"]: e for e in manifest("leak")}
    after = json.loads((SAMPLES / entries["after"]["truth"]).read_text())
    return SAMPLES / entries["before"]["file"], SAMPLES / entries["after"]["file"], after


def test_diff_finds_exactly_what_the_target_leaked(capsys):
    before, after, truth = _pair()
    rows = {r["name"]: r for r in _json(capsys, "diff", before, after, "--format", "json", "-q")["types"]}
    items, payloads = rows["LeakItem"], rows["LeakPayload[]"]
    assert (items["status"], items["delta_count"], payloads["delta_count"]) == ("new", truth["leaked"], truth["leaked"])
    assert items["delta_bytes"] + payloads["delta_bytes"] == truth["leaked_bytes"]
    # the live objects only: each leaked item retains its payload and its own token string
    live = _json(capsys, "diff", before, after, "--live", "--roots", "handles,finalizer", "--sort", "retained",
                 "--format", "json", "-q")
    rows = {r["name"]: r for r in live["types"]}
    assert rows["LeakItem"]["delta_count"] == rows["System.String"]["delta_count"] == truth["leaked"]
    assert rows["LeakItem"]["delta_retained"] == truth["leaked_bytes"] + rows["System.String"]["delta_bytes"]
    assert rows["LeakItem[]"]["delta_retained"] >= rows["LeakItem"]["delta_retained"]  # the list's array holds them
    # the list that holds them did not change itself, but what it retains did: a changed row, shown with --top
    holder = rows["System.Collections.Generic.List`1[[LeakItem, graph]]"]
    assert (holder["status"], holder["delta_count"], holder["delta_bytes"]) == ("changed", 0, 0)
    assert holder["delta_retained"] == rows["LeakItem[]"]["delta_retained"] > truth["leaked_bytes"]


def test_roots_of_a_leaked_item_is_a_chain_of_real_references(capsys):
    _, after, truth = _pair()
    first = main(["dump", str(after), "--type", "LeakItem", "--exact", "--limit", "1", "--format", "jsonl", "-q"])
    address = json.loads(capsys.readouterr().out)["address"]
    assert first == 0
    data = _json(capsys, "roots", after, address, "--roots", "handles,finalizer", "--format", "json")
    assert data["live"] and data["paths"]
    chain = data["paths"][0]["chain"]
    assert chain[-1]["address"] == address and chain[-1]["type"] == "LeakItem"
    assert any(link["type"].startswith("System.Collections.Generic.List`1[[LeakItem") for link in chain)
    for holder, held in zip(chain, chain[1:]):  # each link is a reference of the object before it
        refs = _json(capsys, "refs", after, holder["address"], "--roots", "handles,finalizer", "--format", "json")
        assert held["address"] in {r["address"] for r in refs["references"]}
