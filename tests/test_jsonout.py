"""The JSON Lines fast path (present/jsonout.batch_lines) writes, byte for byte, what the plain per-string
writer (string_line, json.dumps) writes: on every string of the real samples and on hand-made hard cases."""

from __future__ import annotations

import json

import numpy as np
import pytest

from conftest import SAMPLES, manifest
from synth import SynthHeap

from clrlayout.session import open_session
from clrlayout.objects.batches import batch_from_window
from clrlayout.heap.fastwalk import FastWalker
from clrlayout.findings import Findings
from clrlayout.runtime.methodtable import MethodTables
from clrlayout.present import jsonout
from clrlayout.present.jsonout import batch_lines, string_line
from clrlayout.runtime.profiles import select_profile


def slow_lines(batch) -> bytes:
    return b"".join(string_line(batch.object(i)).encode("utf-8") + b"\n" for i in range(len(batch)))


@pytest.mark.parametrize("sample", [m["file"] for m in manifest()])
def test_fast_lines_equal_plain_lines_on_samples(sample, monkeypatch):
    monkeypatch.setattr(jsonout, "CHUNK", 5)
    with open_session(str(SAMPLES / sample)) as a:
        batches = list(a.iter_batches())
    assert sum(len(b) for b in batches) > 30
    for batch in batches:
        assert batch_lines(batch) == slow_lines(batch)


HARD = ["", "a", 'say "hi"', "back\\slash", "tab\there", "new\nline", "nul\0inside", "\x7f", "caf\u00e9",
        "\u4e2d\u6587", "emoji \U0001F600", "lone \ud800 high", "lone \udfff low", "~ }{ ", " " * 40, "x" * 300,
        "line\u2028separator", "paragraph\u2029separator", "next\u0085line", "\u2028\u2029\u0085"]


@pytest.mark.parametrize("chunk", [8192, 1, 7])
@pytest.mark.parametrize("arch", ["x64", "x86"])
def test_fast_lines_equal_plain_lines_on_hard_strings(arch, chunk, monkeypatch):
    """Also when a batch is made in chunks of a few lines (each reads only its part of the buffer, and the
    header word's tail goes with the chunk's last line)."""
    monkeypatch.setattr(jsonout, "CHUNK", chunk)
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
        fast = batch_lines(batch)
        assert fast == slow_lines(batch)
        values += [json.loads(line)["value"] for line in fast.decode("utf-8").splitlines()]
        headers += np.count_nonzero(batch.headers)
    assert values == HARD * 3 and headers == 2 * len(HARD)
    large = batches[0].select(np.ones(len(batches[0]), dtype=bool))
    large.large = np.ones(len(large), dtype=bool)  # the LOH's alignment changes the sizes in the line
    large.heaps = np.full(len(large), 3, dtype=np.uint8)  # ... and its name
    assert batch_lines(large) == slow_lines(large)


def test_line_separators_survive_splitlines(tmp_path, capsys):
    """U+2028, U+2029 and U+0085 are escaped: `dump --format jsonl` read with str.splitlines() gives one
    record per string, and `stats --format json` parses, with every value back whole."""
    from synth_dump import build_minidump

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
    assert main(["stats", str(path), "--format", "json", "--duplicates"]) == 0
    text = capsys.readouterr().out
    assert len(text.splitlines()) == 1
    assert sorted(d["value"] for d in json.loads(text)["duplicates"]) == sorted(values)
