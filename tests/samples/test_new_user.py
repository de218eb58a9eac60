"""What new users hit (the trials reported as issues): each case as they ran it, with the answer they should
have had.  Subprocesses where the real stdout matters (encodings, pipes, a full disk)."""

from __future__ import annotations

import bz2
import gzip
import json
import lzma
import os
import subprocess
import sys

import pytest

from tests.support.samples import SAMPLES
from tests.support.cli import run

import clrlayout

X64 = SAMPLES / "strings.coreclr-3.1.23.win-x64.dmp"
LINUX = SAMPLES / "strings.coreclr-3.1.23.linux-x64.core"


def command(*args, env=None, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "clrlayout", *map(str, args)], capture_output=True,
                          env={**os.environ, **(env or {})}, timeout=120, **kw)


def one_line_error(err: str) -> bool:
    return err.startswith("clrlayout: error: ") and err.count("\n") == 1 and "Traceback" not in err


# --- answers that were silently incomplete or wrong -------------------------------------------------


def test_strict_means_exact_and_complete(capsys, triage_core, tmp_path):
    code, _, _ = run(capsys, "dump", X64, "--strict", "--format", "jsonl")
    assert code == 0
    for args in ((X64, "--heap", "scan"), (triage_core,)):
        code, _, err = run(capsys, "dump", *args, "--strict", "--format", "jsonl")
        assert code == 1 and "not exact and complete (--strict): the heap was scanned" in err
    cut = tmp_path / "cut.dmp"
    cut.write_bytes(X64.read_bytes()[:900_000])
    code, _, err = run(capsys, "stats", cut, "--type", "System.String", "--strict")
    assert code == 1 and "the dump file is truncated" in err.splitlines()[-1]


def test_mt_of_a_char_array_is_refused(capsys):
    with clrlayout.open(str(X64)) as d:
        char_array = next(o.method_table for o in d.runtime.heap.objects()
                          if o.type.kind == "array" and o.type.component_size == 2)
    code, out, err = run(capsys, "dump", X64, "--type", "System.String", "--mt", hex(char_array))
    assert code == 4 and out == "" and one_line_error(err) and "array" in err
    # without --type, --mt is SOS's -mt: the char arrays themselves, never read as strings
    code, out, err = run(capsys, "dump", X64, "--mt", hex(char_array), "--format", "jsonl")
    records = [json.loads(line) for line in out.splitlines()]
    assert code == 0 and records and {r["method_table"] for r in records} == {hex(char_array)}
    assert all("value" not in r and r["length"] >= 0 for r in records)


@pytest.mark.parametrize("profile", ["coreclr-x86", "netfx-x86"])
def test_profile_of_another_pointer_size_is_a_usage_error(capsys, profile):
    code, out, err = run(capsys, "dump", X64, "--profile", profile)
    assert code == 2 and out == "" and one_line_error(err) and "32-bit" in err and "64-bit" in err


@pytest.mark.parametrize("cut", [100, 20_000, 65_536, 300_000, 600_000])
def test_a_truncated_dump_says_so_first(capsys, tmp_path, cut):
    path = tmp_path / "cut.dmp"
    path.write_bytes(X64.read_bytes()[:cut])
    code, _, err = run(capsys, "dump", path, "-q")
    assert code == 3 and one_line_error(err) and err.startswith("clrlayout: error: the dump file is truncated")


def test_info_does_not_call_an_incomplete_heap_exact(capsys, tmp_path):
    path = tmp_path / "cut.dmp"
    path.write_bytes(X64.read_bytes()[:600_000])
    code, out, err = run(capsys, "info", path, "--format", "json")
    data = json.loads(out)
    assert data["gc_heap"]["missing_bytes"] > 0
    assert data["warnings"][0].startswith("the dump file is truncated")
    code, out, _ = run(capsys, "info", path)
    assert "; incomplete: " in next(line for line in out.splitlines() if line.startswith("GC heap:"))


# --- crashes ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["table", "csv"])
def test_output_is_utf8_whatever_the_console_encoding(fmt):
    r = command("dump", LINUX, "--format", fmt, env={"PYTHONIOENCODING": "cp1252"})
    assert r.returncode == 0, r.stderr
    assert "Привет" in r.stdout.decode("utf-8")


def test_a_failed_write_is_exit_6():
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full on this OS")
    with open("/dev/full", "wb") as full:
        r = subprocess.run([sys.executable, "-m", "clrlayout", "dump", str(X64)], stdout=full,
                           stderr=subprocess.PIPE, timeout=120)
    assert r.returncode == 6 and one_line_error(r.stderr.decode()) and b"report" not in r.stderr


# --- input that is not a seekable file ------------------------------------------------------------------


@pytest.mark.parametrize("compress", [lzma.compress, gzip.compress, bz2.compress], ids=["xz", "gzip", "bzip2"])
def test_compressed_dumps_are_read(capsys, tmp_path, compress):
    path = tmp_path / "sample.dmp.z"
    path.write_bytes(compress(X64.read_bytes()))
    assert run(capsys, "dump", path, "--format", "jsonl") == run(capsys, "dump", X64, "--format", "jsonl")


def test_standard_input_and_pipes_are_read(tmp_path):
    want = command("dump", X64, "--format", "jsonl")
    assert want.returncode == 0
    assert command("dump", "-", "--format", "jsonl", input=X64.read_bytes()).stdout == want.stdout
    if hasattr(os, "mkfifo"):
        fifo = tmp_path / "fifo"
        os.mkfifo(fifo)
        writer = subprocess.Popen(["sh", "-c", f"cat '{X64}' > '{fifo}'"])
        assert command("dump", fifo, "--format", "jsonl").stdout == want.stdout
        writer.wait(timeout=60)


def test_other_compressions_are_named(capsys, tmp_path):
    path = tmp_path / "sample.dmp.zst"
    path.write_bytes(b"\x28\xb5\x2f\xfd" + b"\0" * 64)
    code, _, err = run(capsys, "info", path)
    assert code == 3 and one_line_error(err) and "zstd" in err and "decompress it first" in err


# --- messages -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("args,says", [
    (["--bogus"], "No such option"),
    (["--profile", "nosuch"], "profiles: coreclr-arm64, coreclr-x64"),
    (["--profile", "coreclr-x64@banana"], "not a version"),
    (["--profile", "netfx-x64@2.0"], "covers runtime versions >=4.0"),
    (["--min-length", "5", "--max-length", "2"], "nothing can match"),
    (["--address-range", "0x20", "0x10"], "the end is not above the start"),
    (["--layout", "--format", "csv"], "no CSV form"),
])
def test_usage_errors_are_one_line(capsys, args, says):
    code, out, err = run(capsys, "dump", X64, *args)
    assert code == 2 and out == "" and one_line_error(err) and says in err


def test_the_reason_comes_before_the_answer():
    """What qualifies the whole answer is on stderr before the first row; the walk's findings after."""
    r = subprocess.run([sys.executable, "-m", "clrlayout", "dump", str(X64), "--heap", "scan"],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=120, text=True)
    lines = r.stdout.splitlines()
    warning = next(i for i, line in enumerate(lines) if "--heap scan: using the checked object scan" in line)
    header = next(i for i, line in enumerate(lines) if line.lstrip().startswith("Address"))
    assert warning < header


def test_layout_as_json_lines(capsys):
    code, out, _ = run(capsys, "dump", X64, "--layout", "--format", "jsonl", "--limit", "5")
    records = [json.loads(line) for line in out.splitlines()]
    assert code == 0 and len(records) == 5
    for r in records:
        lay = r["layout"]
        assert sum(row["size"] for row in lay["rows"]) == lay["aligned_size"] == r["aligned_size"]
        assert len(bytes.fromhex(lay["bytes"])) == r["aligned_size"]
        assert {row["role"] for row in lay["rows"]} >= {"sync-block", "method-table", "length", "terminator"}


# --- how values are shown -------------------------------------------------------------------------------


def test_full_shows_whole_values_and_the_whole_hex(capsys):
    """Tables cut values at 80 characters and --layout's hex at 64 lines, each saying so; --full shows all."""
    code, out, _ = run(capsys, "dump", LINUX, "--min-length", "50000", "-q")
    row = out.splitlines()[1]
    assert code == 0 and row.endswith('L\u2026"') and row.count("L") == 80
    code, out, _ = run(capsys, "dump", LINUX, "--min-length", "50000", "-q", "--full")
    assert out.splitlines()[1].count("L") == 50000
    code, cut, _ = run(capsys, "dump", LINUX, "--min-length", "50000", "-q", "--layout")
    hex_rows = [line for line in cut.splitlines() if line.startswith("00007f")]
    assert len(hex_rows) == 64 and "not shown; dump --full shows them" in cut
    code, whole, _ = run(capsys, "dump", LINUX, "--min-length", "50000", "-q", "--layout", "--full")
    hex_rows = [line for line in whole.splitlines() if line.startswith("00007f")]
    assert len(hex_rows) * 16 >= 100024 and "not shown" not in whole
    assert whole.splitlines()[-2] == cut.splitlines()[-2]  # the end of the object is shown either way


def test_csv_values_are_one_reversible_encoding(capsys):
    """CSV: backslash as \\\\, control characters and lone surrogates as \\uXXXX; decoding gives back the
    exact value (JSON Lines has it), so NUL, line breaks and lone surrogates are never ambiguous."""
    import csv
    import io
    import re

    def decode(v):
        return re.sub(r"\\\\|\\u([0-9a-f]{4})", lambda m: "\\" if m.group() == "\\\\" else chr(int(m.group(1), 16)), v)

    code, out, _ = run(capsys, "dump", LINUX, "--format", "csv", "-q")
    rows = list(csv.DictReader(io.StringIO(out)))
    code, jl, _ = run(capsys, "dump", LINUX, "--format", "jsonl", "-q")
    values = {json.loads(line)["address"]: json.loads(line)["value"] for line in jl.splitlines()}
    assert len(rows) == len(values)
    assert "\0" not in out and not re.search("[\ud800-\udfff]", out)
    tricky = 0
    for r in rows:
        assert decode(r["value"]) == values[r["address"]]
        tricky += bool(re.search("[\\\\\x00-\x1f\ud800-\udfff]", values[r["address"]]))
    assert tricky >= 3  # the sample's embedded NUL, lone surrogates and a path with backslashes or controls
