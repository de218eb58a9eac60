"""``trim --redact``: every structural answer of the redacted dump is the original's (only values differ), and
no value the original held only in its managed heap is left anywhere in the output file."""

from __future__ import annotations

import json

import pytest

from clrlayout.dump import open_dump
import clrlayout
from tests.support.cli import run
from tests.support.redaction import Redacted, found_in as _found_in, heap_only_values as _heap_only_values, json_of as _json, \
    structure as _structure
from tests.support.samples import SAMPLES

pytestmark = pytest.mark.samples

#: each format and architecture, runtimes 2.1 to 10, server GC, a single-file app; the graph sample has the
#: handle tables (refs, roots, retained)
REDACTED = ["graph.coreclr-10.0.0.linux-x64.core", "types.coreclr-8.0.4.win-x64.dmp", "types.coreclr-3.1.23.win-x86.dmp",
            "strings.coreclr-2.1.8.win-x86.dmp", "strings.coreclr-2.2.5.linux-x64-svr.core",
            "strings.coreclr-10.0.13.linux-x64-singlefile.core"]
GRAPH = "graph.coreclr-10.0.0.linux-x64.core"
#: the quick loop's (-m "not oracle"): a Linux core with the object graph and an x86 minidump
QUICK = {GRAPH, "types.coreclr-3.1.23.win-x86.dmp"}
PARAMS = [pytest.param(n, marks=() if n in QUICK else pytest.mark.slow) for n in REDACTED]
ROOTS = ("--roots", "handles,finalizer")


@pytest.fixture(scope="module")
def redacted(tmp_path_factory):
    return Redacted(tmp_path_factory.mktemp("redacted"))


@pytest.mark.parametrize("name", PARAMS)
def test_structure_is_the_originals(redacted, capsys, name):
    assert _structure(capsys, redacted[name]) == _structure(capsys, SAMPLES / name)


def test_the_graph_is_the_originals(redacted, capsys):
    """refs, roots and retained (handles and the finalization queue: the stacks are left out) answer the same."""
    original, copy = SAMPLES / GRAPH, redacted[GRAPH]
    assert _json(capsys, "retained", copy, "--format", "json", "--top", "1000", *ROOTS) == \
        _json(capsys, "retained", original, "--format", "json", "--top", "1000", *ROOTS)
    objects = json.loads(_json(capsys, "retained", original, "--format", "json", "--top", "4", *ROOTS))["objects"]
    for obj in objects:
        for command in ("refs", "roots"):
            assert _json(capsys, command, copy, obj["address"], "--format", "json", *ROOTS) == \
                _json(capsys, command, original, obj["address"], "--format", "json", *ROOTS)


@pytest.mark.parametrize("name", PARAMS)
def test_no_heap_value_is_left(redacted, name):
    values = _heap_only_values(SAMPLES / name)
    assert len(values) >= 50
    left = _found_in(values, redacted[name].read_bytes())
    assert not left, left[:5]


def test_stacks_are_left_out_unless_kept(redacted, tmp_path):
    name = "types.coreclr-8.0.4.win-x64.dmp"
    with open_dump(str(SAMPLES / name)) as original, open_dump(str(redacted[name])) as copy:
        stacks = [(t.stack_start, t.stack_end) for t in original.threads if t.stack_end]
        assert stacks and all(t.stack_end in (None, t.stack_start) or not t.size for t in copy.threads)
        assert not any(copy.memory.try_read(lo, hi - lo) for lo, hi in stacks)
    from clrlayout.trim import trim

    kept = tmp_path / name
    assert trim(str(SAMPLES / name), str(kept), redact=True, keep_stacks=True).redacted.stacks.startswith("kept")
    with open_dump(str(SAMPLES / name)) as original, open_dump(str(kept)) as copy:
        for lo, hi in stacks:
            assert copy.memory.read(lo, hi - lo) == original.memory.read(lo, hi - lo)


def test_redact_keep_keeps_a_types_values(tmp_path, capsys):
    out = tmp_path / "kept.core"
    code, text, err = run(capsys, "trim", SAMPLES / GRAPH, out, "--redact", "--redact-keep", "System.String",
                          "--format", "json")
    assert code == 0
    report = json.loads(text)["redacted"]
    assert report["kept_objects"] > 300 and "System.String" not in {t["name"] for t in report["types"]}
    assert "redacted" in err and "System.Byte[]" in err  # the report on stderr too
    assert _json(capsys, "dump", out, "--format", "jsonl") == _json(capsys, "dump", SAMPLES / GRAPH, "--format", "jsonl")


@pytest.mark.parametrize("args,message", [
    (["--redact-keep", "System.String"], "--redact-keep is an option of --redact"),
    (["--keep-stacks"], "--keep-stacks is an option of --redact"),
    (["--redact", "--max-strings", "5"], "--max-strings"),
    (["--redact", "--redact-keep", "No.Such.Type"], "No.Such.Type"),
])
def test_options_that_do_not_apply(tmp_path, capsys, args, message):
    code, _, err = run(capsys, "trim", SAMPLES / GRAPH, tmp_path / "x.core", *args)
    assert code == 2 and message in err and err.count("\n") == 1
    assert not (tmp_path / "x.core").exists()


@pytest.mark.slow
@pytest.mark.parametrize("name", ["graph.coreclr-10.0.0.linux-x64.core", "types.coreclr-3.1.23.win-x86.dmp"])
@pytest.mark.parametrize("seed", range(3))
def test_a_corrupt_heap_is_redacted_or_refused(tmp_path, capsys, name, seed):
    """Bytes of the heap changed at random (MethodTable pointers, lengths, references among them): trim
    --redact either refuses, writing nothing, or writes a dump without any of the values it held."""
    import random

    source = SAMPLES / name
    with clrlayout.open(str(source)) as d:
        regions = list(d.memory.iter_regions())
        heap = [(s.start, s.end) for s in d.runtime.heap.segments if s.end > s.start]
    offsets = [r.offset + (max(lo, r.start) - r.start) for r in regions for lo, hi in heap
               if max(lo, r.start) < min(hi, r.end)]
    spans = [min(hi, r.end) - max(lo, r.start) for r in regions for lo, hi in heap if max(lo, r.start) < min(hi, r.end)]
    rng = random.Random(seed)
    data = bytearray(source.read_bytes())
    for _ in range(40):
        k = rng.randrange(len(offsets))
        at = offsets[k] + rng.randrange(spans[k]) // 8 * 8
        data[at:at + 8] = rng.randbytes(8) if rng.random() < 0.5 else bytes(8)
    mutated = tmp_path / ("m" + source.suffix)
    mutated.write_bytes(bytes(data))
    out = tmp_path / ("r" + source.suffix)
    code, _, err = run(capsys, "trim", mutated, out, "--redact", "-q")
    if code:
        assert code in (3, 4) and err.count("\n") == 1 and not out.exists()
        return
    written = out.read_bytes()
    left = [v for v in _heap_only_values(source) if v in written]
    assert not left, left[:3]


def test_planted_secrets_of_a_windows_minidump_are_gone(tmp_path):
    """The secrets target under Wine (.NET 10, x64): its secrets on the heap, in native memory (UTF-16 and UTF-8)
    and on its stack; the sample keeps the pages of every copy.  After --redact none is left; with
    --keep-stacks, the stack's copies are there."""
    from clrlayout.trim import trim

    sample = SAMPLES / "secrets.coreclr-10.0.0.win-x64.dmp"
    truth = json.loads(sample.with_name("secrets.coreclr-10.0.0.win-x64.truth.json").read_text(encoding="utf-8"))
    secrets = [bytes.fromhex(s) for s in truth["secrets"]]
    original = sample.read_bytes()
    assert all(s in original for s in secrets)
    assert sum(original.count(s) for s in secrets) >= 2 * len(secrets)  # copies beside the heap's
    out = tmp_path / "redacted.dmp"
    trim(str(sample), str(out), redact=True)
    data = out.read_bytes()
    assert [s.hex() for s in secrets if s in data] == []
    stacks = tmp_path / "stacks.dmp"
    trim(str(sample), str(stacks), redact=True, keep_stacks=True)
    assert all(bytes.fromhex(v) in stacks.read_bytes() for v in truth["on_stack"])
