"""The heap graph's index (issue 47, item 3; clrlayout.graph.index), on the committed graph sample: written once
(``clrlayout index``, or by the first graph command), then mapped by the commands after it, which answer exactly as
a walk of the heap does; a corrupt, foreign or half-written index is never used (it is rebuilt), a changed dump
never finds the old one; ``--no-index`` neither reads nor writes."""

from __future__ import annotations

import json
import os
import shutil

import numpy as np
import pytest

from clrlayout.graph import build as build_module
from clrlayout.graph.index import ARRAYS, LAYERS, GraphIndex, digest, dump_key
from tests.support.cli import run
from tests.support.samples import SAMPLES

SAMPLE = SAMPLES / "graph.coreclr-10.0.0.linux-x64.core"
COMMANDS = [["retained", "--top", "5", "--format", "json"], ["roots", "0x7f6de1810ce0", "--format", "json"],
            ["refs", "0x7f6de1810ce0", "--format", "json"], ["stats", "--live", "--format", "json"],
            ["stats", "--dead", "--format", "json"]]


@pytest.fixture
def dump(tmp_path):
    path = tmp_path / SAMPLE.name
    shutil.copyfile(SAMPLE, path)
    return path


def _answers(capsys, dump, *options):
    out = []
    for command in COMMANDS:
        code, text, err = run(capsys, command[0], str(dump), *command[1:], *options, "-q")
        assert code == 0, err
        out.append(text)
    return out


def _index(dump, where) -> GraphIndex:
    """The dump's index in ``where``, as the commands name it (the key also holds clrlayout's version and the
    layout profile)."""
    from clrlayout.session import open_session

    with open_session(str(dump), index=False) as session:
        return GraphIndex(str(dump), where, session._index_reader())


def _no_walk(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("the heap was walked: the index was not used")

    monkeypatch.setattr(build_module, "build_graph", refuse)


def test_the_index_answers_as_the_walk_does(dump, tmp_path, capsys, monkeypatch):
    walked = _answers(capsys, dump, "--no-index")
    where = tmp_path / "index"
    code, text, err = run(capsys, "index", str(dump), "--index", str(where))
    assert code == 0 and text.startswith("Written: ") and err == ""
    (entry,) = list(where.iterdir())
    files = sorted(p.name for p in entry.iterdir() if not p.name.startswith(("layer-", "note-")))
    assert files == sorted([f"{n}.npy" for n in ARRAYS] + ["manifest.json"])
    # built ahead with the graph: what the graph commands compute from it for the default roots
    key = text.splitlines()[1].rsplit(" ", 1)[1]
    layers = {f"layer-{n}-{key}" for n in ("reverse", "parent", "dominators", "types", "native")}
    assert {p.name for p in _layers(where) if p.name.startswith("layer-")} == layers
    assert any(p.name.startswith("note-statics-") for p in _layers(where))
    _no_walk(monkeypatch)
    with monkeypatch.context() as m:  # built ahead: the commands after it compute none of it
        _no_computation(m)
        assert _answers(capsys, dump, "--index", str(where)) == walked
    code, text, _ = run(capsys, "index", str(dump), "--index", str(where))
    assert code == 0 and text.startswith("Already there: ")


def test_the_first_graph_command_writes_it(dump, tmp_path, capsys, monkeypatch):
    where = tmp_path / "index"
    first = _answers(capsys, dump, "--index", str(where))
    assert len(list(where.iterdir())) == 1
    _no_walk(monkeypatch)
    assert _answers(capsys, dump, "--index", str(where)) == first


def test_no_index_neither_reads_nor_writes(dump, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    from clrlayout.graph import index as index_module

    monkeypatch.setattr(index_module, "MIN_NODES", 0)  # the sample's small heap as a big one
    _answers(capsys, dump, "--no-index")
    assert not (tmp_path / "cache").exists()
    _answers(capsys, dump)
    assert len(list((tmp_path / "cache" / "clrlayout" / "index").iterdir())) == 1


def test_options_that_do_not_apply_are_usage_errors(dump, tmp_path, capsys):
    for args in (["stats", str(dump), "--no-index"], ["dump", str(dump), "--index", str(tmp_path)],
                 ["roots", str(dump), "0x7f6de1810ce0", "--no-index", "--index", str(tmp_path)],
                 ["diff", str(dump), str(dump), "--no-index"]):
        code, _, err = run(capsys, *args)
        assert code == 2 and "index" in err, args


def _flip(path, at):
    data = bytearray(path.read_bytes())
    data[at % len(data)] ^= 0x5A
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("name", [*ARRAYS, "manifest.json"])
def test_a_corrupt_index_is_rebuilt(dump, tmp_path, capsys, name):
    """A byte changed anywhere in any file (its header, its data, the manifest): the index is not used, the answer
    is the walk's, the command says so, and a good index is written in its place."""
    walked = _answers(capsys, dump, "--no-index")
    where = tmp_path / "index"
    rng = np.random.default_rng(sum(map(ord, name)))
    for at in rng.integers(0, 1 << 20, 3).tolist():
        run(capsys, "index", str(dump), "--index", str(where))
        (entry,) = list(where.iterdir())
        target = entry / (name if name.endswith(".json") else f"{name}.npy")
        _flip(target, at)
        code, text, err = run(capsys, "retained", str(dump), "--top", "5", "--format", "json", "--index", str(where))
        assert code == 0 and text == walked[0]
        assert "was not used" in err
        assert _index(dump, where).load() is not None  # rebuilt


def test_a_foreign_or_half_written_index_is_not_used(dump, tmp_path, capsys):
    where = tmp_path / "index"
    other = tmp_path / "other.core"
    shutil.copyfile(SAMPLES / "leak.coreclr-10.0.0.linux-x64.before.core", other)
    run(capsys, "index", str(other), "--index", str(where))
    (entry,) = list(where.iterdir())
    entry.rename(_index(dump, where).path)  # another dump's index under this dump's key
    code, text, err = run(capsys, "retained", str(dump), "--top", "5", "--format", "json", "--index", str(where))
    assert code == 0 and "was not used" in err and "another dump" in err
    assert text == _answers(capsys, dump, "--no-index")[0]
    # a writer that died before its rename leaves a temporary directory, which no reader takes
    shutil.rmtree(where)
    where.mkdir()
    (where / ".tmp-crashed").mkdir()
    (where / ".tmp-crashed" / "manifest.json").write_text("{}")
    index = _index(dump, where)
    assert index.load() is None and index.rejected is None
    # of two writers, the first keeps its index; the second leaves it untouched
    arrays = {n: np.zeros({"indptr": 2, "indices": 0}.get(n, 1), dtype=ARRAYS[n][0]) for n in ARRAYS}  # 1 node
    assert index.save(arrays, {}) is True and index.save(arrays, {}) is False
    assert index.load() is not None


def test_a_changed_dump_never_finds_the_old_index(dump, tmp_path, capsys):
    where = tmp_path / "index"
    run(capsys, "index", str(dump), "--index", str(where))
    before = _index(dump, where).key
    st = os.stat(dump)
    os.utime(dump, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    assert _index(dump, where).key != before and dump_key(str(dump)) != before
    code, text, _ = run(capsys, "index", str(dump), "--index", str(where))
    assert code == 0 and text.startswith("Written: ") and len(list(where.iterdir())) == 2


def test_the_manifest_says_what_each_file_holds(dump, tmp_path, capsys):
    where = tmp_path / "index"
    run(capsys, "index", str(dump), "--index", str(where))
    (entry,) = list(where.iterdir())
    meta = json.loads((entry / "manifest.json").read_text())
    assert meta["key"] == entry.name == _index(dump, where).key
    assert set(meta["extra"]["method_tables"]) >= set(np.load(entry / "types.npy").tolist())  # free space's too
    for name, spec in meta["arrays"].items():
        a = np.load(entry / f"{name}.npy", mmap_mode="r")
        assert (str(a.dtype), list(a.shape), spec["digest"]) == (spec["dtype"], spec["shape"], digest(a))
        st = os.stat(entry / f"{name}.npy")
        assert spec["file"] == [st.st_size, st.st_ino, st.st_mtime_ns, st.st_ctime_ns]


def test_unchanged_files_are_not_read_again_to_be_checked(dump, tmp_path, capsys, monkeypatch):
    """The arrays' files as they were written (size, inode, modification and change times) are mapped without
    their digest: a command reads only the pages it uses. A file written again, even with the same bytes, is
    checked in full (and, the same, used)."""
    from clrlayout.graph import index as index_module

    where = tmp_path / "index"
    run(capsys, "index", str(dump), "--index", str(where))
    summed = []
    monkeypatch.setattr(index_module, "digest", lambda a: summed.append(a) or digest(a))
    assert _index(dump, where).load() is not None and summed == []
    (entry,) = list(where.iterdir())
    path = entry / "aligned.npy"
    path.write_bytes(path.read_bytes())
    index = _index(dump, where)
    assert index.load() is not None and index.rejected is None and len(summed) == len(ARRAYS)


def _no_computation(monkeypatch, names: bool = False):
    """What the layers and notes keep may not be computed again: the reversed graph, the breadth-first tree, the
    dominator tree and its per-type sums, the native owners, the statics' bases (``names``: and the names of the
    statics' and the references' slots, and the heap walk of ``stats --live``/``--dead`` and the live addresses it
    would test, which the commands that answered before kept)."""
    from clrlayout import parallel
    from clrlayout.graph import objectgraph, statics
    from clrlayout.model import liveness, native
    from clrlayout.session.memory import RuntimeMemory

    def refuse(*args, **kwargs):
        raise AssertionError("computed again: the index's layer was not used")

    for module, name in ((objectgraph, "releasing_dominator_tree"), (objectgraph, "reverse_graph"),
                         (objectgraph, "breadth_first"), (objectgraph, "top_of_kind"), (native, "native_heap_of"),
                         (statics.Statics, "all_types"), (statics.Statics, "_search"),
                         *([(RuntimeMemory, "_static_name_of"), (RuntimeMemory, "_slot_names"),
                            (parallel, "run_steps"), (liveness, "reached_addresses")] if names else [])):
        monkeypatch.setattr(module, name, refuse)


def _layers(where):
    (entry,) = list(where.iterdir())
    return sorted(p for p in entry.iterdir() if p.name.startswith(("layer-", "note-")))


def test_the_layers_answer_as_the_computation_does(dump, tmp_path, capsys, monkeypatch):
    """The first commands keep what they computed from the graph for their roots (and the statics' bases); the
    same commands after them read it, compute none of it, and answer byte for byte as before; other roots are
    other layers."""
    walked = _answers(capsys, dump, "--no-index")
    where = tmp_path / "index"
    assert _answers(capsys, dump, "--index", str(where)) == walked
    names = {p.name.split("-")[1] for p in _layers(where)}
    # the statics' bases, the names of their slots, of the types and of the references' slots, the totals of --live
    # and of --dead
    assert names == {"reverse", "parent", "dominators", "types", "native", "statics", "static", "type", "slot",
                     "typestats"}
    assert len({p.name.rsplit("-", 1)[1] for p in _layers(where) if p.name.startswith("layer-")}) == 1  # one root set
    with monkeypatch.context() as m:
        _no_computation(m, names=True)
        _no_walk(m)
        assert _answers(capsys, dump, "--index", str(where)) == walked
    report = ["report", str(dump), "--format", "json", "-q"]  # the report reads the same layers, and is kept
    code, alone, _ = run(capsys, *report, "--no-index")
    assert code == 0 and run(capsys, *report, "--index", str(where))[1] == alone
    assert any(p.name.startswith("note-report-") for p in _layers(where))
    page = ["report", str(dump), "-q", "-o"]
    run(capsys, *page, str(tmp_path / "walked.html"), "--no-index")
    with monkeypatch.context() as m:
        from clrlayout.model import report as report_module

        m.setattr(report_module, "_build", lambda *a, **k: (_ for _ in ()).throw(AssertionError("computed again")))
        assert run(capsys, *report, "--index", str(where))[1] == alone
        assert run(capsys, *page, str(tmp_path / "kept.html"), "--index", str(where))[0] == 0
    assert (tmp_path / "kept.html").read_bytes() == (tmp_path / "walked.html").read_bytes()
    handles = ["retained", str(dump), "--top", "5", "--format", "json", "--roots", "handles", "-q"]
    code, alone, _ = run(capsys, *handles, "--no-index")
    assert code == 0 and run(capsys, *handles, "--index", str(where))[1] == alone
    assert len({p.name.rsplit("-", 1)[1] for p in _layers(where) if p.name.startswith("layer-")}) == 2


def test_the_names_a_command_found_are_not_read_again(dump, tmp_path, capsys, monkeypatch):
    """The types' names the first ``retained`` read from the modules' metadata are kept in a note of the index:
    the same command after it reads no metadata for a name, and answers byte for byte as before."""
    from clrlayout.types.names import TypeNames

    command = ["retained", str(dump), "--top", "5", "--format", "json", "-q", "--index", str(tmp_path / "index")]
    code, first, _ = run(capsys, *command)
    assert code == 0 and any(p.name.startswith("note-type-names-") for p in _layers(tmp_path / "index"))
    with monkeypatch.context() as m:
        m.setattr(TypeNames, "name", lambda *a, **k: (_ for _ in ()).throw(AssertionError("named again")))
        assert run(capsys, *command)[1] == first
    assert json.loads(first)["objects"][0]["type"]  # (named)


def test_a_corrupt_layer_is_computed_again(dump, tmp_path, capsys):
    """A byte changed in any file of any layer or note: it is not used (the command says so), the answer is the
    computation's, and a good one is written in its place. One file of each layer at a time (they are
    independent), until every file was damaged once."""
    walked = _answers(capsys, dump, "--no-index")
    where = tmp_path / "index"
    _answers(capsys, dump, "--index", str(where))
    layers = [[layer] if layer.is_file() else sorted(layer.iterdir()) for layer in _layers(where)]
    assert sum(map(len, layers)) == sum(len(arrays) + 1 for arrays in LAYERS.values()) + 6  # and the notes
    rng = np.random.default_rng(47)
    for round_ in range(max(map(len, layers))):
        damaged = [files[round_] for files in layers if round_ < len(files)]
        for f in damaged:
            _flip(f, int(rng.integers(0, 1 << 20)))
        out, said = [], ""
        for command in COMMANDS:  # every layer and note
            code, text, err = run(capsys, command[0], str(dump), *command[1:], "--index", str(where))
            assert code == 0, err
            out.append(text)
            said += err
        assert out == walked, damaged
        assert said.count("was not used") == len(damaged), (damaged, said)
    assert _answers(capsys, dump, "--index", str(where)) == walked
    assert "not used" not in capsys.readouterr().err  # each written good again
