"""clrlayout layout: string layouts from the profiles alone, checked against the facts, the real sample
dumps, the WinDbg golden readings and the live runtime."""

from __future__ import annotations

import json

import pytest

from clrlayout.cli import main


def layout_json(capsys, *args) -> list[dict]:
    assert main(["layout", "--format", "json", *map(str, args)]) == 0
    return json.loads(capsys.readouterr().out)


def by_label(records, label):
    return {r["length"]: r for r in records if r["label"] == label}


def test_sizes_follow_the_facts(capsys):
    recs = layout_json(capsys, "--length", "0..64")
    x86 = by_label(recs, "netfx 4.x x86")
    fx64 = by_label(recs, "netfx 4.x x64")
    core = by_label(recs, "coreclr 3.0+ x64")
    old = by_label(recs, "coreclr 2.1-2.x x64")
    for n in range(65):
        assert x86[n]["sos_size"] == 14 + 2 * n and x86[n]["aligned_size"] == (14 + 2 * n + 3) & ~3
        assert fx64[n]["sos_size"] == 26 + 2 * n and fx64[n]["aligned_size"] == (26 + 2 * n + 7) & ~7
        assert core[n]["sos_size"] == 22 + 2 * n and core[n]["aligned_size"] == max((22 + 2 * n + 7) & ~7, 24)
        assert old[n]["sos_size"] == fx64[n]["sos_size"]
        # the extra 4 bytes make word reads safe; without them, lengths 4k+1 read into the next object
        assert fx64[n]["word_read_overrun"]["past_size"] == 0 and x86[n]["word_read_overrun"]["past_size"] == 0
        assert (core[n]["word_read_overrun"]["past_allocation"] > 0) == (n % 4 == 1)
        rows = fx64[n]["rows"]
        assert [r["role"] for r in rows][:5] == ["header-padding", "sync-block", "method-table", "length", "chars"] \
            or n == 0
        assert sum(r["size"] for r in rows) == fx64[n]["aligned_size"]


def test_windbg_walkthrough_table(capsys, golden):
    """The walk-through's sizes for x86 and x64 come out of one command."""
    recs = layout_json(capsys, "--length", "0..9", "--runtime", "netfx", "--arch", "x86,x64")
    for arch in ("x86", "x64"):
        table = by_label(recs, f"netfx 4.x {arch}")
        for obj in golden[arch]["objects"]:
            assert table[obj["length"]]["sos_size"] == obj["size"]


def test_sizes_match_the_sample_dumps(capsys, sample):
    main(["dump", str(sample.path), "--format", "jsonl", "-q"])
    dumped = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    recs = layout_json(capsys, "--length", "0..200", "--runtime", "coreclr", "--arch", sample.entry["arch"],
                       "--runtime-version", sample.truth["runtime_version"])
    table = {r["length"]: r for r in recs}
    checked = 0
    for d in dumped:
        if d["length"] in table and d["size"] < 85000:  # SOH objects (the LOH aligns to 8 on x86 too)
            assert (d["size"], d["aligned_size"]) == (table[d["length"]]["sos_size"], table[d["length"]]["aligned_size"])
            checked += 1
    assert checked > 800


def test_table_views(capsys):
    assert main(["layout", "--length", "3", "--arch", "x64", "--runtime", "netfx,coreclr"]) == 0
    out = capsys.readouterr().out
    assert "Side by side (bytes):" in out and "coreclr 3.0+ x64" in out and "netfx 4.x x64" in out
    assert "(extra bytes counted in BaseSize)" in out
    assert main(["layout", "--length", "0..9", "--arch", "x86"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[:4] == ["LEN", "PROFILE", "SOS", "SIZE"]
    assert len(lines) == 1 + 10 * 3  # coreclr 1.0-2.0 and 2.1+ (the field names differ), netfx on x86


@pytest.mark.parametrize("args", [["--length", "x"], ["--length", "5..2"], ["--length", "1", "--arch", "mips"],
                                  ["--length", "1", "--type", "System.Object"]])
def test_bad_arguments(capsys, args):
    assert main(["layout", *args]) == 2


@pytest.mark.parametrize("args,message", [
    (["--runtime-version", "banana"], "not a version"),
    (["--runtime-version", "8.0", "--runtime", "netfx"], "no profile covers it"),
    (["--runtime-version", "2.0", "--runtime", "netfx,mono"], "netfx-x64 >=4.0, <5.0"),
    (["--length", "1073741792"], "String.MaxLength"),
])
def test_versions_and_lengths_no_runtime_has_are_refused(capsys, args, message):
    """No invented layouts: a version must parse and a profile must cover it; a length must be possible."""
    argv = ["layout", "--length", "1", *args] if "--length" not in args else ["layout", *args]
    assert main(argv) == 2
    assert message in capsys.readouterr().err


def test_one_version_gives_only_the_runtimes_that_have_it(capsys):
    recs = layout_json(capsys, "--length", "1", "--runtime-version", "8.0")
    assert {r["label"].split()[0] for r in recs} == {"coreclr"}
    assert layout_json(capsys, "--length", str(0x3FFFFFDF), "--arch", "x64", "--runtime", "coreclr",
                       "--runtime-version", "8.0")[0]["sos_size"] == 22 + 2 * 0x3FFFFFDF


def test_field_names_split_the_variants(capsys):
    """2.0 and 2.1 have the same bytes but not the same managed field names: two variants."""
    recs = layout_json(capsys, "--length", "1", "--runtime", "coreclr", "--arch", "x64")
    names = {r["label"]: [row["description"] for row in r["rows"] if row["role"] == "length"] for r in recs}
    assert names == {"coreclr 1.0-2.0 x64": ["m_stringLength"], "coreclr 2.1-2.x x64": ["_stringLength"],
                     "coreclr 3.0+ x64": ["_stringLength"]}
