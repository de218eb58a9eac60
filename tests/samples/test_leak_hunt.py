"""A fourth user's leak hunt (issue 46): what got in the way, each fixed here — the string paths' --assemblies, the
Python API (object_at by an index, referrers, root paths, references without roots, an iterable diff), refs --to,
chains collapsed and cut, dump --fields, frozen objects apart from --dead, and the messages on a truncated dump, on
free space and inside an object."""

from __future__ import annotations

import json

import pytest

import clrlayout
from clrlayout.session import open_session
from tests.support.cli import run
from tests.support.redaction import json_of
from tests.support.samples import SAMPLES

pytestmark = pytest.mark.samples

GRAPH = SAMPLES / "graph.coreclr-10.0.0.linux-x64.core"
BEFORE = SAMPLES / "leak.coreclr-10.0.0.linux-x64.before.core"
AFTER = SAMPLES / "leak.coreclr-10.0.0.linux-x64.after.core"
TYPES = SAMPLES / "types.coreclr-8.0.4.win-x64.dmp"
ROOTS = ("--roots", "handles,finalizer")
CHAIN_HEAD = 0x7f6de18106f0  # the graph target's chain of 200 Nodes (its truth: "chain")


def _chain_tail(session) -> tuple[int, int]:
    """The last Node of the chain and how many Nodes it is from the head."""
    og = session.object_graph(("handles", "finalizer"))
    g = og.graph
    node = g.node(CHAIN_HEAD)
    mt, depth = g.method_table(node), 0
    while True:
        nxt = [t for t in g.references(node).tolist() if g.method_table(t) == mt]
        if not nxt:
            return int(g.addresses[node]), depth
        node, depth = nxt[0], depth + 1


def test_the_string_paths_take_assemblies(tmp_path, capsys):
    """A .NET 10 core whose runtime is not at the path it names: given --assemblies, dump and stats of strings do not
    ask for it (they opened the dump without it)."""
    data = (SAMPLES / "strings.coreclr-10.0.0.linux-x64.core").read_bytes()
    old, new = b"/root/.cache/clrlayout/runtimes/", b"/nonexistent/clrlayout/runtimes/"
    assert len(old) == len(new) and data.count(old) > 10
    moved = tmp_path / "moved.core"
    moved.write_bytes(data.replace(old, new))
    for args in (["dump", moved, "--dead"], ["stats", moved, "--type", "System.String", "--dead"]):
        code, _, err = run(capsys, *args, "--roots", "statics")
        assert code == 4 and "--assemblies" in err  # not given: it is asked for
        code, _, err = run(capsys, *args, "--roots", "statics", "--assemblies", str(tmp_path))
        assert code == 4 and "give its folder" not in err and f"nor in --assemblies {tmp_path}" in err, err


def test_object_at_by_its_index_is_the_walks(capsys):
    """The first object_at walks a segment; the others look in an index of every object: the same objects (free
    space included), for every object's first, middle and last byte, and None between and around."""
    with open_session(str(GRAPH)) as s:
        h = s.profile.object.header_size
        objects = [(o.address, o.aligned_size, o.method_table, o.size, o.count) for o in s.iter_objects()]
    with open_session(str(GRAPH)) as walked, open_session(str(GRAPH)) as indexed:
        indexed.object_at(objects[0][0])
        assert indexed._object_starts is None
        for address, aligned, mt, size, count in objects[::7]:
            for at in (address - h, address + aligned // 2, address - h + aligned - 1):
                walked._looked_up = False  # each time the segment's walk
                a, b = walked.object_at(at), indexed.object_at(at)
                assert (a.address, a.method_table, a.size, a.aligned_size, a.count, a.segment) == \
                    (b.address, b.method_table, b.size, b.aligned_size, b.count, b.segment) == \
                    (address, mt, size, aligned, count, a.segment)
        assert indexed._object_starts is not None
        assert indexed.object_at(0x10) is None and indexed.object_at(objects[-1][0] + (1 << 20)) is None and indexed.object_at(1 << 70) is None


def test_the_models_referrers_root_paths_and_references(capsys):
    with clrlayout.open(str(AFTER)) as dump:
        heap = dump.runtime.heap
        paths_json = json.loads(json_of(capsys, "roots", AFTER, "0x7fc22d011c50", *ROOTS, "--format", "json"))
        item = heap.object_at(0x7fc22d011c50)
        paths = heap.root_paths(item, roots=("handles", "finalizer"))
        assert [(f"{p.root.address:#x}", [(f"{o.address:#x}", o.type.name, f) for o, f in p.chain]) for p in paths] == \
            [(p["root"]["address"], [(c["address"], c["type"], c["field"]) for c in p["chain"]]) for p in paths_json["paths"]]
        refs = json.loads(json_of(capsys, "refs", AFTER, "0x7fc22d011c50", *ROOTS, "--format", "json"))
        assert [f"{o.address:#x}" for o in heap.referrers(item)] == \
            sorted(dict.fromkeys(r["address"] for r in refs["referenced_by"]), key=lambda a: int(a, 16))
        assert [f"{o.address:#x}" for o in item.references()] == [r["address"] for r in refs["references"]]
        assert len(heap.referrers(item)) > 1  # the list's old arrays too
    # references and referrers do not depend on the roots: a dump whose handle tables it lacks answers them
    with clrlayout.open(str(SAMPLES / "strings.coreclr-10.0.0.linux-x64.core")) as dump:
        heap = dump.runtime.heap
        with pytest.raises(clrlayout.errors.RootsNotFound):
            heap.roots()
        holder = next(o for o in heap.objects() if o.type.name == "System.Object[]" and o.references())
        assert all(holder in r.referrers() for r in holder.references())


def test_a_diff_iterates_over_its_rows():
    d = clrlayout.diff(str(BEFORE), str(AFTER))
    rows = list(d)
    assert rows == d.rows and len(d) == len(rows) > 10 and d[0] == rows[0]
    assert {r.name for r in d if r.counts[-1] - r.counts[0] == 300} >= {"LeakItem", "LeakPayload[]"}


def test_refs_to(capsys):
    full = json.loads(json_of(capsys, "refs", GRAPH, "0x7f6de1810d30", *ROOTS, "--format", "json"))
    to = json.loads(json_of(capsys, "refs", GRAPH, "--to", "0x7f6de1810d30", *ROOTS, "--format", "json"))
    assert "references" not in to and to["referenced_by"] == full["referenced_by"] != []
    code, text, _ = run(capsys, "refs", GRAPH, "--to", "0x7f6de1810d30", *ROOTS)
    assert code == 0 and "Referenced by (1):" in text and "References (" not in text
    for args in ([], ["0x7f6de1810d30", "--to", "0x7f6de1810d30"]):
        assert run(capsys, "refs", GRAPH, *args, *ROOTS)[0] == 2


def test_a_chain_is_collapsed_and_cut(capsys):
    with open_session(str(GRAPH)) as s:
        tail, depth = _chain_tail(s)
    assert depth >= 150
    code, text, _ = run(capsys, "roots", GRAPH, f"{tail:#x}", *ROOTS)
    lines = text.splitlines()
    assert code == 0 and len(lines) < 8, text
    run_line = next(line for line in lines if "×" in line)
    assert f".Next ×{depth:,} (to {tail:#x})" in run_line
    full = json.loads(json_of(capsys, "roots", GRAPH, f"{tail:#x}", *ROOTS, "--format", "json"))
    assert len(full["paths"][0]["chain"]) == depth + 2  # the JSON keeps every link
    cut = json.loads(json_of(capsys, "roots", GRAPH, f"{tail:#x}", *ROOTS, "--format", "json", "--max-length", "6"))
    chain = cut["paths"][0]["chain"]
    assert len(chain) == 7 and chain[3] == {"omitted": depth + 2 - 6}
    assert chain[:3] == full["paths"][0]["chain"][:3] and chain[4:] == full["paths"][0]["chain"][-3:]
    assert run(capsys, "roots", GRAPH, f"{tail:#x}", *ROOTS, "--max-length", "6")[1].count("links left out") == 1


def test_dump_fields_are_what_object_shows(capsys):
    """dump --type T --fields: each object's fields as object prints them, in every format."""
    lines = json_of(capsys, "dump", TYPES, "--type", "WithStructs", "--fields", "--format", "jsonl").splitlines()
    assert lines
    for line in lines:
        record = json.loads(line)
        shown = json.loads(json_of(capsys, "object", TYPES, record["address"], "--format", "jsonl").splitlines()[0])
        values = [r["value"] for r in shown["layout"]["rows"] if r["role"] == "field"]
        assert list(record["fields"].values()) == values and len(values) > 10
    table = json_of(capsys, "dump", TYPES, "--type", "WithStructs", "--fields")
    assert "Tail=" in table and "When._dateData=" in table
    csv_rows = json_of(capsys, "dump", TYPES, "--type", "WithStructs", "--fields", "--format", "csv").splitlines()
    assert csv_rows[0].endswith(",fields")
    for args in (["--layout"], ["--type", "System.String"]):
        assert run(capsys, "dump", TYPES, "--type", "WithStructs", "--fields", *args)[0] == 2


def test_frozen_objects_are_not_dead(capsys):
    """The GC never frees a frozen segment's objects (string literals): --dead leaves them out and says how many;
    --with-frozen lists them as SOS's -dead does."""
    roots = ("--roots", "handles,finalizer,statics")
    code, text, err = run(capsys, "stats", GRAPH, "--dead", *roots, "--format", "json")
    dead = json.loads(text)
    code2, text2, _ = run(capsys, "stats", GRAPH, "--dead", "--with-frozen", *roots, "--format", "json", "-q")
    sos = json.loads(text2)
    frozen = json.loads(json_of(capsys, "stats", GRAPH, "--gen", "frozen", "--format", "json"))
    live_frozen = json.loads(json_of(capsys, "stats", GRAPH, "--gen", "frozen", "--live", *roots, "--format", "json"))
    unreached = frozen["count"] - live_frozen["count"]
    assert code == code2 == 0 and unreached > 50
    assert sos["count"] - dead["count"] == unreached
    assert f"{unreached:,} objects of frozen segments" in err
    dumped = json_of(capsys, "dump", GRAPH, "--dead", *roots, "--format", "jsonl").splitlines()
    assert not [r for r in map(json.loads, dumped) if r["heap"] == "frozen"]
    assert run(capsys, "stats", GRAPH, "--live", "--with-frozen", *roots)[0] == 2


def test_info_on_a_dump_cut_short(tmp_path, capsys):
    """info prints what it can, then exits 3 as the other commands do, and does not blame the runtime's data."""
    cut = tmp_path / "cut.core"
    cut.write_bytes(GRAPH.read_bytes()[:3_000_000])
    code, text, err = run(capsys, "info", cut)
    assert code == 3 and text.startswith("File:") and err.splitlines()[0].startswith("clrlayout: warning: the dump file is truncated")
    assert "no GcDacVars structure in the runtime's data that the file holds" in err
    assert run(capsys, "stats", cut)[0] == 3


def test_free_space_and_inside_an_object(capsys):
    with open_session(str(GRAPH)) as s:
        free = next(o for o in s.iter_objects() if o.is_free)
    for command in ("roots", "refs"):
        code, _, err = run(capsys, command, GRAPH, f"{free.address + 8:#x}", *ROOTS)
        assert code == 4 and "free space between objects" in err
    code, text, err = run(capsys, "roots", GRAPH, "0x7f6de1810d40", *ROOTS)
    assert code == 0 and "0x7f6de1810d40 is inside System.Collections.Generic.List`1" in err and "(+0x10)" in err
    assert text == run(capsys, "roots", GRAPH, "0x7f6de1810d30", *ROOTS)[1]


def test_statics_are_named(capsys):
    """A static class (no instance on the heap) is found by `type`, which lists its statics with their values (SOS's
    !dumpclass); `roots` and `retained` name the static that holds an object, in the table and in JSON."""
    holder = "0x7fc22d810700"  # the graph target's static List<LeakItem> Graph.Leaks
    assert run(capsys, "dump", AFTER, "--type", "Graph", "--exact")[0] == 4  # no instance
    code, text, err = run(capsys, "type", AFTER, "Graph", "--format", "json")
    assert code == 0, err
    rows = {r["name"]: r for r in json.loads(text)["static_fields"]}
    assert rows["Leaks"]["storage"] == "gc" and rows["Leaks"]["value"].startswith(holder + " (System.Collections")
    assert rows["Cache"]["value"].startswith("0x7fc22d810c80 ")
    table = run(capsys, "type", AFTER, "Graph")[1]
    assert "Static fields (not in the object; as SOS's !dumpclass):" in table and "Leaks" in table
    chain = json.loads(json_of(capsys, "roots", AFTER, "0x7fc22d011c50", *ROOTS, "--format", "json"))["paths"][0]["chain"]
    assert chain[1] == {"address": holder, "type": "System.Collections.Generic.List`1[[LeakItem, graph]]",
                        "field": "Graph.Leaks (static)"}
    objects = json.loads(json_of(capsys, "retained", AFTER, *ROOTS, "--top", "3", "--format", "json"))["objects"]
    assert [o.get("static") for o in objects] == [None, "Graph.Leaks", None]
    refs = json.loads(json_of(capsys, "refs", AFTER, "--to", holder, *ROOTS, "--format", "json"))
    assert [r["field"] for r in refs["referenced_by"]] == ["Graph.Leaks (static)"]
