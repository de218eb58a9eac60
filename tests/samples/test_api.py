"""The Python API: the session's answers are the commands' answers (docs/api.md's example is run by test_docs.py)."""

from __future__ import annotations

import json
import os

import pytest

import clrlayout
from clrlayout.cli import main
from clrlayout.present.info import info_record
from tests.support.samples import SAMPLES, manifest


def test_public_names():
    for name in clrlayout.__all__:
        assert hasattr(clrlayout, name), name
    from clrlayout import model

    assert clrlayout.open is model.open and clrlayout.Dump is model.Dump
    assert issubclass(clrlayout.DumpError, clrlayout.ClrLayoutError)


@pytest.mark.parametrize("entry", manifest(None), ids=lambda e: e["file"])
def test_the_models_answers_are_the_commands_answers(entry, capsys):
    """info = info --format json; strings = dump --format jsonl; per-type counts of heap.objects() = stats
    --format json; a type's fields = type --format json."""
    path = str(SAMPLES / entry["file"])
    assert main(["info", path, "--format", "json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert main(["dump", path, "--format", "jsonl", "--jobs", "1"]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert main(["stats", path, "--format", "json", "--jobs", "1"]) == 0
    stats = json.loads(capsys.readouterr().out)
    with clrlayout.open(path) as dump:
        assert info_record(dump.describe().to_dict()) == printed
        heap = dump.runtime.heap
        strings = list(heap.strings())
        objects = list(heap.objects())
        by_type: dict = {}
        for o in objects:
            row = by_type.setdefault(o.method_table, [o.type.name, 0, 0, 0])
            row[1] += 1
            row[2] += o.size
            row[3] += o.aligned_size
        string_type = dump.runtime.type("System.String")
        assert string_type is not None and string_type.is_string
        fields = [(f.name, f.offset, f.size, f.type_name) for f in string_type.fields]
        assert main(["type", path, "System.String", "--format", "json"]) == 0
        shown = json.loads(capsys.readouterr().out)
        assert fields == [(f["name"], f["offset"], f["size"], f["type"]) for f in shown["fields"]]
        if entry["target"].endswith("types/Program.cs"):  # the types samples keep what layouts read
            assert string_type.fields[0].name in ("_stringLength", "m_stringLength")
    assert [(int(r["address"], 16), r["value"], r["size"], r["aligned_size"]) for r in lines] == \
        [(x.address, x.as_string(), x.size, x.aligned_size) for x in strings]
    # every string is an object, typed System.String, with the same sizes
    named = [(o.address, o.size, o.aligned_size) for o in objects if o.type.is_string]
    assert named == [(x.address, x.size, x.aligned_size) for x in strings]
    rows = {int(r["method_table"], 16): [r["name"], r["count"], r["total_size"], r["total_aligned_size"]]
            for r in stats["types"] if r["name"] != "Free"}
    assert by_type == rows


def test_object_at_and_field_values():
    path = SAMPLES / "types.coreclr-10.0.0.linux-x64.core"
    with clrlayout.open(path) as dump:
        heap = dump.runtime.heap
        padded = next(o for o in heap.objects() if o.type.name == "Padded")
        assert heap.object_at(padded.address + 3).address == padded.address  # an interior address
        values = padded.fields
        assert values["L"] == -1234567890123 and values["A"] == 171 and values["C"] == 205
        name = heap.object_at(values["Name"])
        assert name.type.is_string and name.as_string() == "padded"
        assert [t.name for t in padded.type.parents] == ["System.Object"]
        assert heap.object_at(1) is None


def test_dump_closes_the_file():
    path = str(SAMPLES / manifest()[0]["file"])
    fd_dir = "/proc/self/fd"
    if not os.path.isdir(fd_dir):
        pytest.skip("no /proc/self/fd on this OS")
    before = len(os.listdir(fd_dir))
    with clrlayout.open(path) as dump:
        assert len(os.listdir(fd_dir)) == before + 1
        next(dump.runtime.heap.strings())
    assert len(os.listdir(fd_dir)) == before


def test_errors_are_typed(tmp_path):
    bad = tmp_path / "not-a-dump"
    bad.write_bytes(b"hello, world")
    with pytest.raises(clrlayout.DumpError) as e:
        clrlayout.open(bad)
    assert e.value.exit_code == 3
    path = SAMPLES / manifest()[0]["file"]
    with clrlayout.open(path, heap="scan") as dump:
        assert not dump.runtime.heap.exact
        assert len(list(dump.runtime.heap.strings())) > 0
        with pytest.raises(clrlayout.HeapNotFound):
            next(dump.runtime.heap.objects())


def test_the_graph_api_is_the_commands(capsys):
    """obj.references(), heap.roots(), heap.is_live(), heap.retained_size() answer as refs, retained and --live."""
    path = str(SAMPLES / manifest("graph")[0]["file"])
    truth = {o["name"]: o for o in json.loads((SAMPLES / manifest("graph")[0]["truth"]).read_text())["objects"]}
    chain = int(truth["chain"]["address"], 16)
    assert main(["refs", path, hex(chain), "--format", "json"]) == 0
    refs = json.loads(capsys.readouterr().out)
    assert main(["stats", path, "--live", "--format", "json"]) == 0
    live = json.loads(capsys.readouterr().out)
    with clrlayout.open(path) as dump:
        heap = dump.runtime.heap
        head = heap.object_at(chain)
        assert [hex(o.address) for o in head.references()] == [r["address"] for r in refs["references"]]
        assert [o.type.name for o in head.references()] == [r["type"] for r in refs["references"]]
        assert heap.retained_size(head) == refs["retained_size"] and heap.is_live(head)
        kinds = {r.kind for r in heap.roots()}
        assert {"strong handle", "pinned handle", "stack (conservative)"} <= kinds
        assert sum(heap.is_live(o) for o in heap.objects()) == live["count"]
        assert not heap.is_live(int(truth["stack_local"]["address"], 16), roots=("handles", "finalizer"))


def test_the_model_s_graph_is_the_commands(capsys):
    """Heap.object_graph(): references and referrers as refs lists them, root paths as roots, retained as refs'
    retained size, the biggest retainers by object and by type as retained --top, live totals as its Live line;
    references answer where the roots asked for cannot be read."""
    path = str(SAMPLES / manifest("graph")[0]["file"])
    truth = {o["name"]: o for o in json.loads((SAMPLES / manifest("graph")[0]["truth"]).read_text())["objects"]}
    chain = int(truth["chain"]["address"], 16)

    def cli(*args):
        assert main([*args, "--format", "json", "-q"]) == 0
        return json.loads(capsys.readouterr().out)

    refs, to = cli("refs", path, hex(chain)), cli("refs", path, "--to", hex(chain))
    roots = cli("roots", path, hex(chain))
    top, by_type = cli("retained", path, "--top", "7"), cli("retained", path, "--top", "7", "--by", "type")
    with clrlayout.open(path) as dump:
        graph = dump.runtime.heap.object_graph()
        assert [hex(o.address) for o in graph.references(chain)] == [r["address"] for r in refs["references"]]
        assert [hex(o.address) for o in graph.referrers(chain)] == [r["address"] for r in to["referenced_by"]]
        paths = graph.root_paths(chain)
        assert [p.root.kind for p in paths] == [p["root"]["kind"] for p in roots["paths"]]
        assert [[hex(o.address) for o, _ in p.chain] for p in paths] == \
            [[link["address"] for link in p["chain"]] for p in roots["paths"]]
        kept = graph.retained(chain)
        assert kept is not None and kept.bytes == refs["retained_size"] and graph.is_live(chain)
        objects = graph.top_retainers(7)
        assert [(hex(r.object.address), r.bytes, r.objects) for r in objects] == \
            [(o["address"], o["retained_size"], o["retained_count"]) for o in top["objects"]]
        types = graph.top_retainers(7, by="type")
        assert [(t.type.name, t.objects, t.bytes, t.retained) for t in types] == \
            [(t["name"], t["count"], t["size"], t["retained_size"]) for t in by_type["types"]]
        assert graph.live_totals() == (top["live_objects"], top["live_bytes"])
        with pytest.raises(ValueError):
            graph.top_retainers(3, by="size")
        assert graph.retained(1) is None
        assert {r.kind for r in graph.roots} >= {"strong handle"}


def test_info_neither_walks_the_heap_nor_adds_warnings(monkeypatch):
    """``Dump.info`` says what the dump holds without a walk of the heap (``types`` None) and qualifies itself in
    its own ``warnings``; ``describe()`` counts the types (issue 47, item 2)."""
    path = str(SAMPLES / "strings.coreclr-8.0.4.linux-x64.core")
    with clrlayout.open(path) as dump:
        before = dump.warnings

        def no_walk(*args, **kwargs):
            raise AssertionError("info walked the heap")

        with monkeypatch.context() as m:
            m.setattr(dump._session, "heap_steps", no_walk)
            info = dump.info
        assert info.types is None and dump.warnings == before
        assert isinstance(info.string_method_table, int) and isinstance(info.gc_heap["segments"][0]["start"], int)
        described = dump.describe()
        types = described.types
        assert types["method_tables"] > 10 and types["named"] + types["unnamed"] == types["method_tables"]
        assert dump.warnings == before


def test_every_cache_of_the_engine_is_a_declared_field():
    """The session keeps what it finds in declared fields (issue 47, item 2), never attributes made on the fly:
    after the walks, the graph, the statics, the threads, the stack walker and the native heap, every attribute it
    holds is one of its dataclass fields."""
    import dataclasses

    from clrlayout.session.core import Session

    path = str(SAMPLES / "graph.coreclr-10.0.0.linux-x64.core")
    with clrlayout.open(path, index=False) as dump:
        heap = dump.runtime.heap
        first = next(iter(heap.objects()))
        heap.object_at(first.address)
        heap.object_at(first.address)  # the second makes the index of every object's start
        assert heap.is_live(first) in (True, False)
        dump.runtime.threads()
        dump.native_heap_if_any()
        dump.describe()
        session = dump._session
        session.statics().arrays()
        session.stack_walker()
        declared = {f.name for f in dataclasses.fields(Session)}
        assert set(vars(session)) - declared == set()
        assert session._heap_graph is not None and session._object_starts is not None
