"""``clrlayout report`` on Eclipse MAT's textbook leaks (issue 50, item 4): sample_dumps/targets/suspects on .NET 10
makes a big cache, many small holders each held by a handle of its own, handlers piling up on a static event, a
sparse List, a storm of equal strings and finalizable objects stuck in the queue; each is reported — as a suspect
or an inspection — with the bytes the runtime's object sizes give (x64: an array's 24-byte base, a string's 22,
8-byte alignment)."""

from __future__ import annotations

import json

import pytest

from tests.support.cli import run

pytestmark = pytest.mark.oracle


def _aligned(n: int) -> int:
    return (n + 7) // 8 * 8


@pytest.fixture(scope="module")
def made(target_build, tmp_path_factory):
    import sys

    from tests.support.samples import SAMPLES

    sys.path.insert(0, str(SAMPLES))
    import make_dumps
    import runtimes

    raw, truth = make_dumps.make_linux(target_build, tmp_path_factory.mktemp("suspects"),
                                       runtime=runtimes.get("10.0.0"), target="suspects")
    yield raw, json.loads(truth.read_text())
    raw.unlink()


def _json(capsys, *args):
    code, out, err = run(capsys, *args)
    assert code == 0, err
    return json.loads(out)


def test_each_textbook_leak_is_reported_with_its_bytes(made, capsys):
    raw, truth = made
    report = _json(capsys, "report", str(raw), "--format", "json")
    retained = {o["address"]: o for o in _json(capsys, "retained", str(raw), "--top", "100", "--format",
                                               "json")["objects"]}
    by_type = {s["type"]: s for s in report["suspects"]}
    # the big cache: a single suspect, its accumulation point the Dictionary's entries
    cache = by_type["System.Collections.Generic.Dictionary`2[[System.String, System.Private.CoreLib],"
                    "[System.Byte[], System.Private.CoreLib]]"]
    assert cache["retained_size"] >= truth["cache_entries"] * _aligned(24 + truth["cache_bytes"])
    assert cache["retained_size"] == retained[cache["address"]]["retained_size"]
    assert cache["accumulation_point"]["type"].startswith("System.Collections.Generic.Dictionary`2+Entry[")
    assert "Program.Cache (static)" in [link["field"] for link in cache["chain"]]
    # many small holders, none dominating another: the type is the suspect
    (holders,) = [t for t in report["type_suspects"] if t["type"] == "Holder"]
    assert holders["objects"] == truth["holders"]
    assert holders["retained_size"] == truth["holders"] * (24 + _aligned(24 + truth["holder_bytes"]))
    # the sparse List: a suspect, and the inspection's empty slots, exactly
    sparse = report["inspections"]["sparse_collections"]["collections"]
    (mine,) = [c for c in sparse if c["type"] == "System.Collections.Generic.List`1[[System.Object, "
                                                  "System.Private.CoreLib]]"]
    assert (mine["capacity"], mine["count"]) == (truth["sparse_capacity"], truth["sparse_count"])
    assert mine["wasted_bytes"] == (truth["sparse_capacity"] - truth["sparse_count"]) * 8
    assert by_type["System.Collections.Generic.List`1[[System.Object, System.Private.CoreLib]]"]["retained_size"] \
        >= 24 + 8 * truth["sparse_capacity"]
    # the storm of equal strings: every copy but one wasted
    dup = report["inspections"]["duplicate_strings"]["values"][0]
    size = _aligned(22 + 2 * truth["copy_length"])
    assert (dup["value"], dup["count"], dup["aligned_size"]) == ("s" * truth["copy_length"], truth["copies"], size)
    assert dup["wasted_bytes"] == (truth["copies"] - 1) * size
    # the event: one delegate, every handler a target, held by the static event's field
    (event,) = [d for d in report["inspections"]["event_handlers"] if d["static"] == "Publisher.Changed"]
    assert event["targets"] == truth["handlers"] == 500
    # the finalization queue: all but the one whose finalizer runs (and blocks)
    assert report["inspections"]["finalization_queue"]["objects"] >= truth["finalizables"] - 1


def test_the_page_names_every_case(made, capsys, tmp_path):
    raw, _ = made
    out = tmp_path / "suspects.html"
    code, _, err = run(capsys, "report", str(raw), "-o", str(out))
    page = out.read_text(encoding="utf-8")
    assert code == 0, err
    for text in ("Suspect 1", "Holder", "Publisher.Changed", "639,872", "799,920", "Objects waiting for finalization"):
        assert text in page, text


@pytest.fixture(scope="module", params=["3.1.23", "8.0.4", "10.0.0"])
def clean(request, target_build, tmp_path_factory):
    """The same target as a healthy service ("clean"): garbage churned, and its state twelve parts of equal size,
    each its own type held by its own static field."""
    import sys

    from tests.support.samples import SAMPLES

    sys.path.insert(0, str(SAMPLES))
    import make_dumps
    import runtimes

    raw, truth = make_dumps.make_linux(target_build, tmp_path_factory.mktemp("clean"),
                                       runtime=runtimes.get(request.param), target="suspects", extra=("clean",))
    yield raw, json.loads(truth.read_text())
    raw.unlink()


def test_a_clean_dump_has_no_suspect(clean, capsys):
    """No object and no type retains a tenth of the live heap: the report names no suspect.  Before .NET 9 one
    object[] holds every static of a module; the report looks through it (a static field is a root), or that
    array would be a suspect retaining all of them."""
    raw, truth = clean
    report = _json(capsys, "report", str(raw), "--format", "json")
    assert report["suspects"] == [] and report["type_suspects"] == []
    # the twelve parts are the tree's top: each retains itself, its List, the List's array (capacity 128) and the
    # items, x64 sizes; each under a tenth of the live heap
    part = 24 + 32 + (24 + 128 * 8) + truth["component_items"] * _aligned(24 + truth["item_bytes"])
    tops = [t for t in report["tree"] if (t["type"] or "").startswith("Component`1[")]
    assert len(tops) == truth["components"] and {t["retained_size"] for t in tops} == {part}
    assert part < 0.10 * report["live_bytes"] and report["tree"][:len(tops)] == tops
    # the same dump with a lower threshold: the parts are the suspects, each found through its own static
    low = _json(capsys, "report", str(raw), "--format", "json", "--threshold", "5")
    assert {s["type"] for s in low["suspects"]} == {t["type"] for t in tops}
    for s in low["suspects"]:
        assert any((link["field"] or "").startswith("Program.C") for link in s["chain"]), s["chain"]
