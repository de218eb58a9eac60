"""The command line: output shapes, the JSON schemas, and exit codes."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.support.samples import SAMPLES, manifest, units_to_str
from tests.support.cli import run

from clrlayout.errors import as_flags

LINUX = SAMPLES / "strings.coreclr-3.1.23.linux-x64.core"
X86 = SAMPLES / "strings.coreclr-3.1.23.win-x86.dmp"


def test_info_json_schema(capsys, sample):
    code, out, err = run(capsys, "info", sample.path, "--format", "json")
    assert code == 0
    data = json.loads(out)
    assert data["format"] == sample.entry["format"]
    assert data["arch"] == sample.entry["arch"]
    assert data["pointer_size"] == sample.truth["pointer_size"]
    assert data["runtime"] == {**data["runtime"], "flavor": "coreclr", "version": sample.truth["runtime_version"]}
    assert data["string_method_table"] == sample.truth["string_method_table"]
    assert data["gc_heap"]["exact"] is True


def test_info_counts_the_heaps_types_as_stats_names_them(capsys, sample):
    """info's types: the MethodTables stats lists (Free included), the named ones, and why the others have
    no name (on these trimmed samples most modules' memory is gone: each reason is counted)."""
    code, out, _ = run(capsys, "info", sample.path, "--format", "json")
    types = json.loads(out)["types"]
    code, out, err = run(capsys, "stats", sample.path, "--format", "json")
    rows = json.loads(out)["types"]
    # stats names its types in another order than info; the reasons are the same
    why = as_flags("; ".join(f"{n} {reason}" for reason, n in types["why_unnamed"].items()))
    if types["unnamed"]:
        assert f"{types['unnamed']:,} {'type has' if types['unnamed'] == 1 else 'types have'} no name ({why})" in err
    else:  # every type named (the single-file sample keeps its assemblies' metadata): no warning
        assert err == "" and sample.entry["single_file"]
    assert types["method_tables"] == len(rows) > 50
    assert types["named"] == sum(r["name"] is not None for r in rows) >= 2  # String (by its shape) and Free
    assert types["unnamed"] == sum(types["why_unnamed"].values()) == len(rows) - types["named"]
    code, out, _ = run(capsys, "info", sample.path)
    assert f"{types['method_tables']} MethodTables on the heap, {types['named']} named" in out
    assert all(as_flags(reason) in out for reason in types["why_unnamed"])


def test_info_table(capsys):
    code, out, _ = run(capsys, "info", X86)
    assert code == 0
    assert "minidump (x86, 4-byte pointers)" in out
    assert "coreclr 3.1.23" in out and "exact heap walk from GcDacVars" in out
    assert "String MethodTable:" in out and "(BaseSize 14)" in out


def test_dump_jsonl_schema(capsys, sample):
    code, out, _ = run(capsys, "dump", sample.path, "--type", "System.String", "--format", "jsonl", "-q")
    assert code == 0
    records = [json.loads(line) for line in out.splitlines()]
    assert len(records) == sample.entry["strings"]
    for r in records:
        assert set(r) == {"address", "method_table", "size", "aligned_size", "length", "gen", "heap", "value", "header"}
        assert (r["heap"], r["gen"]) in {("gen0", 0), ("gen1", 1), ("gen2", 2), ("loh", 3), ("poh", 4), ("frozen", None)}
        assert r["address"].startswith("0x") and r["method_table"] == sample.truth["string_method_table"]
        assert isinstance(r["header"], int) and 0 <= r["header"] < 2 ** 32
    by = {r["address"]: r for r in records}
    assert by[sample.known("large")["address"]]["heap"] == "loh"
    for k in sample.truth["strings"]:
        r = by[k["address"]]
        assert r["value"] == units_to_str(k["units"])  # lone surrogates survive the JSON round trip
        assert r["header"] == k["header"]
    # lone surrogates are escaped, so every line is valid UTF-8
    assert "\\ud800" in out and "\\udc00" in out
    out.encode("utf-8")


def test_dump_table_and_total(capsys, sample):
    code, out, _ = run(capsys, "dump", sample.path, "-q")
    lines = out.splitlines()
    assert lines[0].split() == ["Address", "MT", "Size", "Value"]
    assert lines[-1].startswith(f"Total {sample.entry['strings']:,} strings")
    ddd = int(sample.known("ddd")["address"], 16)
    width = 2 * sample.truth["pointer_size"]
    row = next(line for line in lines if line.startswith(f"{ddd:0{width}x}"))
    assert row.endswith('"ddd"')
    assert int(row.split()[2]) == sample.string_base_size + 2 * 3  # SOS's size: BaseSize + 2 x length


def test_dump_limit(capsys):
    code, out, _ = run(capsys, "dump", LINUX, "--limit", "3", "--format", "jsonl", "-q")
    assert code == 0 and len(out.splitlines()) == 3


def test_dump_layout(capsys, sample):
    code, out, _ = run(capsys, "dump", sample.path, "--layout", "--limit", "40", "-q")
    assert code == 0
    ptr = sample.truth["pointer_size"]
    assert "(object header: sync block)" in out and "(object header: MethodTable)" in out
    assert ("(object header: padding)" in out) == (ptr == 8)
    assert "_stringLength" in out and "_firstChar (UTF-16 characters)" in out and "(terminator)" in out
    assert "Space losses:" in out and "Instance size:" in out
    assert "mm mm mm mm" in out  # hex view field marks


def test_mt_override(capsys, sample):
    mt = sample.truth["string_method_table"]
    code, out, _ = run(capsys, "dump", sample.path, "--mt", mt, "--format", "jsonl", "-q")
    assert code == 0 and len(out.splitlines()) == sample.entry["strings"]
    # an address that is not a String MethodTable
    bad = hex(int(sample.known("ddd")["address"], 16))
    code, _, err = run(capsys, "dump", sample.path, "--mt", bad)
    assert code == 4 and "not a System.String MethodTable" in err or "no MethodTable" in err


@pytest.mark.parametrize("content,code", [(b"", 3), (b"garbage bytes here", 3), (b"MDMP" + b"\0" * 10, 3),
                                          (b"\x7fELF" + b"\x02\x01\x01" + b"\0" * 9, 3)])
def test_bad_files_exit_with_documented_codes(tmp_path, capsys, content, code):
    p = tmp_path / "bad.dmp"
    p.write_bytes(content)
    for cmd in (["info"], ["dump"], ["trim"]):
        args = cmd + [p] + ([tmp_path / "out.dmp"] if cmd == ["trim"] else [])
        got, out, err = run(capsys, *args)
        assert got == code, (cmd, err)
        assert err.startswith("clrlayout: error:") and err.count("\n") == 1
        assert "Traceback" not in err


def test_missing_file_and_usage(tmp_path, capsys):
    code, _, err = run(capsys, "info", tmp_path / "nope.dmp")
    assert code == 3 and "cannot open" in err
    code, _, err = run(capsys, "dump", LINUX, "--type", "System.Object", "--contains", "x")
    assert code == 2 and "--contains: only for System.String" in err
    code, _, err = run(capsys, "dump", LINUX, "--type", "No.Such.Type")
    assert code == 4 and "no type whose name contains it on the heap" in err and err.count("\n") == 1
    code, _, _ = run(capsys, "dump", LINUX, "--format", "xml")
    assert code == 2
    code, _, _ = run(capsys, "dump", LINUX, "--mt", "zz")
    assert code == 2


def test_not_a_dotnet_process(capsys):
    """A real ELF core with the runtime module entries removed: a clear 'no runtime' (exit 4)."""
    import shutil
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        p = shutil.copy(LINUX, d)
        data = bytearray(open(p, "rb").read())
        i = data.find(b"libcoreclr.so")
        while i >= 0:
            data[i : i + 13] = b"libnotclr.so\0"
            i = data.find(b"libcoreclr.so")
        open(p, "wb").write(data)
        code, _, err = run(capsys, "info", p)
    assert code == 4 and "no .NET runtime module" in err


def test_console_script_end_to_end(tmp_path):
    """The installed entry point, as a user runs it: exit codes, and no traceback ever."""
    bad = tmp_path / "x.core"
    bad.write_bytes(b"\x7fELF" + b"\x01" * 60)
    r = subprocess.run([sys.executable, "-m", "clrlayout", "info", str(bad)], capture_output=True, text=True)
    assert r.returncode == 3 and "Traceback" not in r.stderr and r.stderr.startswith("clrlayout: error:")
    r = subprocess.run([sys.executable, "-m", "clrlayout", "dump", str(LINUX), "--limit", "2"],
                       capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout.splitlines()[-1].startswith("Total 2 strings")


def _jsonl(capsys, *args):
    code, out, err = run(capsys, "dump", *args, "--format", "jsonl", "-q")
    assert code == 0, err
    return [json.loads(line) for line in out.splitlines()]


def test_filters_compose(capsys, sample):
    everything = _jsonl(capsys, sample.path)
    values = [r["value"] for r in everything]
    got = _jsonl(capsys, sample.path, "--contains", "dup")
    assert [r["value"] for r in got] == [v for v in values if "dup" in v]
    got = _jsonl(capsys, sample.path, "--regex", r"^DEAD-0\d\d$")
    assert len(got) == 100
    got = _jsonl(capsys, sample.path, "--min-length", "3", "--max-length", "5")
    assert got and all(3 <= r["length"] <= 5 for r in got)
    assert len(got) == sum(1 for r in everything if 3 <= r["length"] <= 5)
    got = _jsonl(capsys, sample.path, "--regex", "^DEAD", "--max-length", "7", "--contains", "9")
    assert sorted(r["value"] for r in got) == sorted(v for v in values if v.startswith("DEAD") and len(v) <= 7 and "9" in v)
    a = int(sample.known("ddd")["address"], 16)
    got = _jsonl(capsys, sample.path, "--address-range", hex(a), hex(a + 1))
    assert [(r["address"], r["value"], r["header"]) for r in got] == [(hex(a), "ddd", sample.truth["managed_thread_id"])]  # a thin lock
    code, _, err = run(capsys, "dump", sample.path, "--regex", "(")
    assert code == 2 and "not a valid regular expression" in err


def test_reader_that_leaves_is_not_an_error():
    """`clrlayout dump ... | head`: exit 0 and nothing on stderr (--layout: far more than a pipe holds; two
    processes: the reader leaves before the first line)."""
    sample = str(SAMPLES / manifest()[0]["file"])
    env = dict(os.environ, CLRLAYOUT_LIMITS="scan_window=4K")
    for args, lines in ((["--layout"], 1), (["--format", "jsonl", "--jobs", "2"], 0)):
        p = subprocess.Popen([sys.executable, "-m", "clrlayout", "dump", sample, *args], env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        for _ in range(lines):
            assert p.stdout.readline()
        p.stdout.close()
        assert p.wait(timeout=60) == 0
        assert p.stderr.read() == b""


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_console_script_writes_everything_before_it_leaves(capsys, jobs):
    """The entry point leaves without tearing the interpreter down (os._exit), after flushing: what it
    writes to stdout and stderr is what main() writes in-process, to the last byte, into a pipe too."""
    env = dict(os.environ, CLRLAYOUT_LIMITS="scan_window=4K")
    env.pop("PYTHONUNBUFFERED", None)  # stdout into a pipe is block-buffered, as users have it
    for args in (["dump", str(LINUX), "--format", "jsonl"], ["dump", str(X86)], ["stats", str(LINUX), "--type", "System.String"],
                 ["info", str(X86), "--format", "json"]):
        code, out, err = run(capsys, *args)
        extra = ["--jobs", jobs] if args[0] != "info" else []
        r = subprocess.run([sys.executable, "-m", "clrlayout", *args, *extra], capture_output=True, env=env,
                           timeout=120)
        assert (r.returncode, r.stdout.decode("utf-8"), r.stderr.decode("utf-8")) == (code, out, err)
        assert len(out) > 1000
