"""The batch writers of dump's lines (present/batchlines: JSON Lines, table rows, CSV rows, with values
escaped and encoded by present/utf16) write, byte for byte, what the per-string writers write (string_line
with json.dumps, text.dumpheap_line with quote(), csv_line with csv.writer): on every string of the real
samples and on hand-made hard cases."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tests.support.samples import SAMPLES, manifest
from tests.support.synth import SynthHeap

from clrlayout.session import open_session
from clrlayout.objects.batches import batch_from_window
from clrlayout.heap.fastwalk import FastWalker
from clrlayout.findings import Findings
from clrlayout.runtime.methodtable import MethodTables
from clrlayout.present import batchlines
from clrlayout.present.jsonout import string_line
from clrlayout.present.text import dumpheap_line
from clrlayout.runtime.profiles import select_profile

#: format -> (batch writer, per-string reference(string, pointer size))
WRITERS = {
    "jsonl": (batchlines.json_chunks, lambda s, ptr: string_line(s)),
    "csv": (batchlines.csv_chunks, lambda s, ptr: batchlines.csv_line(s)),
    "table": (lambda b: batchlines.table_chunks(b, b.profile.pointer_size), dumpheap_line),
    "table-full": (lambda b: batchlines.table_chunks(b, b.profile.pointer_size, None),
                   lambda s, ptr: dumpheap_line(s, ptr, None)),
    "table-10": (lambda b: batchlines.table_chunks(b, b.profile.pointer_size, 10),
                 lambda s, ptr: dumpheap_line(s, ptr, 10)),
}


def batch_lines(batch, fmt: str = "jsonl") -> bytes:
    return b"".join(WRITERS[fmt][0](batch))


def slow_lines(batch, fmt: str = "jsonl") -> bytes:
    line, ptr = WRITERS[fmt][1], batch.profile.pointer_size
    return b"".join((line(batch.object(i), ptr) + "\n").encode("utf-8") for i in range(len(batch)))


@pytest.mark.parametrize("sample", [m["file"] for m in manifest()])
def test_fast_lines_equal_plain_lines_on_samples(sample, monkeypatch):
    monkeypatch.setattr(batchlines, "MAX_PIECE", 5000)  # a few lines a piece
    with open_session(str(SAMPLES / sample)) as a:
        batches = list(a.iter_batches())
    assert sum(len(b) for b in batches) > 30
    for batch in batches:
        for fmt in WRITERS:
            assert batch_lines(batch, fmt) == slow_lines(batch, fmt), fmt


HARD = ["", "a", 'say "hi"', "back\\slash", "tab\there", "new\nline", "nul\0inside", "\x7f", "caf\u00e9",
        "\u4e2d\u6587", "emoji \U0001F600", "lone \ud800 high", "lone \udfff low", "~ }{ ", " " * 40, "x" * 300,
        "line\u2028separator", "paragraph\u2029separator", "next\u0085line", "\u2028\u2029\u0085",
        "comma, in CSV", '"quoted", and, commas', "".join(map(chr, range(0x00, 0xA1))), "\U0001F600" * 90,
        "x" * 79 + "\U0001F600" + "y", "x" * 80 + "\U0001F600", "\u00e9" * 81, "\u4e2d" * 200, "\ud800" * 85,
        "abc\ud83d", "\ude00abc", "\ude00\ud83d", "C:\\Users\\x\\file.txt", '{"id": 1, "p": "C:\\\\t"}',
        "\U0001F600" * 9 + "abcdefgh"]


@pytest.mark.parametrize("piece", [32 << 20, 3000, 1])
@pytest.mark.parametrize("arch", ["x64", "x86"])
def test_fast_lines_equal_plain_lines_on_hard_strings(arch, piece, monkeypatch):
    """Escapes of every format, surrogate pairs and lone surrogates, values cut at the table's limit inside
    and next to a pair, CSV fields that need quotes; also when a batch's output is made a few lines at a
    time, and when no line fits a piece (each string then by the per-string writer)."""
    monkeypatch.setattr(batchlines, "MAX_PIECE", piece)
    p = select_profile("coreclr", arch, "3.1.23")
    h = SynthHeap(p)
    for i, value in enumerate(HARD * 3):
        h.add_string(value, sync=[0, 0x08000000 | 0x1234, 0x0C000000 | 0x2A][i % 3])
    space = h.space()
    mts = MethodTables(space, p)
    findings = Findings()
    walker = FastWalker(space, mts, findings)
    batches = [b for win in walker.iter_windows([h.segment()])
               for b in batch_from_window(win, h.string_mt, p, space, findings)]
    values, headers = [], 0
    for batch in batches:
        for fmt in WRITERS:
            assert batch_lines(batch, fmt) == slow_lines(batch, fmt), fmt
        fast = batch_lines(batch)
        values += [json.loads(line)["value"] for line in fast.decode("utf-8").splitlines()]
        headers += np.count_nonzero(batch.headers)
    assert values == HARD * 3 and headers == 2 * len(HARD)
    large = batches[0].select(np.ones(len(batches[0]), dtype=bool))
    large.large = np.ones(len(large), dtype=bool)  # the LOH's alignment changes the sizes in the line
    large.heaps = np.full(len(large), 3, dtype=np.uint8)  # ... and its name
    for fmt in WRITERS:
        assert batch_lines(large, fmt) == slow_lines(large, fmt), fmt


def test_line_separators_survive_splitlines(tmp_path, capsys):
    """U+2028, U+2029 and U+0085 are escaped: `dump --format jsonl` read with str.splitlines() gives one
    record per string, and `stats --format json` parses, with every value back whole."""
    from tests.support.synth_dump import build_minidump

    from clrlayout.cli import main

    p = select_profile("coreclr", "x64", "3.1.23")
    h = SynthHeap(p)
    values = ["a\u2028b", "c\u2029d", "e\u0085f", "plain", "\u2028" * 3 + "x"]
    for v in values * 2:
        h.add_string(v)
    path = tmp_path / "separators.dmp"
    path.write_bytes(build_minidump(p, h))
    assert main(["dump", str(path), "--format", "jsonl"]) == 0
    text = capsys.readouterr().out
    for ch in "\u2028\u2029\u0085":
        assert ch not in text and f"\\u{ord(ch):04x}" in text
    assert [json.loads(line)["value"] for line in text.splitlines()] == values * 2
    assert main(["stats", str(path), "--format", "json", "--type", "System.String", "--duplicates"]) == 0
    text = capsys.readouterr().out
    assert len(text.splitlines()) == 1
    assert sorted(d["value"] for d in json.loads(text)["duplicates"]) == sorted(values)


@pytest.mark.parametrize("fmt", ["table", "jsonl", "csv"])
def test_dump_writes_the_same_bytes_with_and_without_the_kernels(fmt, monkeypatch, capsysbinary):
    """A heap below KERNEL_HEAP_BYTES is written by the per-string writers, one at or above it by the
    kernels: `dump` prints the same bytes either way (here on a real .NET 8 core, forced both ways)."""
    from clrlayout.cli import main

    sample = str(SAMPLES / next(m["file"] for m in manifest() if "8.0.4" in m["file"] and m["file"].endswith(".core")))
    outputs, kernel_calls = [], []
    lines = batchlines._lines
    calls = []
    monkeypatch.setattr(batchlines, "_lines", lambda *a, **k: calls.append(1) or lines(*a, **k))
    for threshold in (1 << 62, 0):
        monkeypatch.setattr(batchlines, "KERNEL_HEAP_BYTES", threshold)
        assert main(["dump", sample, "--format", fmt, "-q"]) == 0
        outputs.append(capsysbinary.readouterr().out)
        kernel_calls.append(len(calls))
    assert outputs[0] == outputs[1] and outputs[0].count(b"\n") > 100
    assert kernel_calls[0] == 0 and kernel_calls[1] > 1  # the warm-up, then the batches
