"""trim: a smaller dump of the same format that gives the same info and dump output."""

from __future__ import annotations

import json

from clrlayout.cli import main
from clrlayout.dump import open_dump, sniff


def _outputs(capsys, path):
    main(["dump", str(path), "--format", "jsonl", "-q"])
    jsonl = capsys.readouterr().out
    main(["info", str(path), "--format", "json", "-q"])
    info = json.loads(capsys.readouterr().out)
    for k in ("path", "memory"):
        info.pop(k)
    return jsonl, info


def test_trim_round_trip(sample, tmp_path, capsys):
    out = tmp_path / ("t" + sample.path.suffix)
    # a single-file app's sample keeps what naming reads (its assemblies are in anonymous memory): --types
    types = ["--types"] if sample.entry["single_file"] else []
    assert main(["trim", str(sample.path), str(out), "-q", *types]) == 0
    capsys.readouterr()
    assert sniff(str(out)) == sample.entry["format"]
    assert out.stat().st_size <= sample.path.stat().st_size + 64  # trimming a trimmed dump keeps it
    again = tmp_path / ("u" + sample.path.suffix)
    assert main(["trim", str(out), str(again), "-q", *types]) == 0
    assert again.read_bytes() == out.read_bytes()  # and a trimmed dump of our own making stays byte for byte
    assert _outputs(capsys, out) == _outputs(capsys, sample.path)
    with open_dump(str(out)) as a, open_dump(str(sample.path)) as b:
        assert [m.path for m in a.modules] == [m.path for m in b.modules]
        assert a.threads == b.threads and a.pid == b.pid and a.arch == b.arch


def test_trim_of_the_triage_core(triage_core, tmp_path, capsys):
    out = tmp_path / "t.core"
    assert main(["trim", str(triage_core), str(out), "-q"]) == 0
    capsys.readouterr()
    assert out.stat().st_size < triage_core.stat().st_size / 4  # an already small triage dump
    assert _outputs(capsys, out) == _outputs(capsys, triage_core)


def test_trim_refuses_to_overwrite_its_input(sample, capsys):
    assert main(["trim", str(sample.path), str(sample.path)]) == 2


def test_trim_output_is_atomic(sample, tmp_path, capsys):
    bad = tmp_path / "no-such-dir" / "out.dmp"
    assert main(["trim", str(sample.path), str(bad)]) == 6
    assert "cannot write" in capsys.readouterr().err
    assert not list(tmp_path.iterdir())


def test_trim_reports_what_its_output_holds(sample, tmp_path, capsys):
    """--max-strings 5 keeps whole pages, so the output holds more strings than 5: the report gives the
    number a dump of the output lists, and the memory ranges info counts on it."""
    out = tmp_path / ("first" + sample.path.suffix)
    assert main(["trim", str(sample.path), str(out), "--max-strings", "5"]) == 0
    report = capsys.readouterr().out
    main(["dump", str(out), "--format", "jsonl", "-q"])
    listed = len(capsys.readouterr().out.splitlines())
    main(["info", str(out), "--format", "json", "-q"])
    ranges = json.loads(capsys.readouterr().out)["memory"]["ranges"]
    assert listed >= 5
    assert f"in {ranges} ranges; {listed:,} strings" in report
    if listed != 5:
        assert "(the first 5 asked for" in report


def test_memory_a_trimmed_dump_left_out_is_missing_not_corrupt(sample, tmp_path, capsys):
    """A dump trimmed to its first strings lacks the rest of the heap and some MethodTables: its findings
    say the memory is not in the dump (never that a MethodTable is bad), and a whole trim has none."""
    import clrlayout

    out = tmp_path / ("first" + sample.path.suffix)
    assert main(["trim", str(sample.path), str(out), "--max-strings", "5", "-q"]) == 0
    with clrlayout.open(str(out)) as a:
        assert list(a.runtime.heap.strings())
        kinds = {f.kind.slug for f in a.findings}
        assert kinds and kinds <= {"memory-missing", "method-table-missing"}
    whole = tmp_path / ("whole" + sample.path.suffix)
    assert main(["trim", str(sample.path), str(whole), "-q"]) == 0
    capsys.readouterr()
    assert main(["dump", str(whole), "--strict", "--format", "jsonl"]) == 0
