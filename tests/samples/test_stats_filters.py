"""stats and dump select the same objects: every filter dump takes gives stats' totals equal to the sum over
dump's JSON Lines (issue 32: stats ignored --gen and --address-range once --type named a type), and options
that do not apply are usage errors, never silently dropped."""

from __future__ import annotations

import json

import pytest

from clrlayout.cli import main
from tests.support.samples import SAMPLES, manifest

SAMPLE_FILES = ["types.coreclr-10.0.0.linux-x64.core", "strings.coreclr-8.0.4.linux-x64.core",
                "strings.coreclr-3.1.23.win-x86.dmp"]


def run(capsys, *args) -> tuple[int, str, str]:
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


def _json(capsys, *args):
    code, out, err = run(capsys, *args)
    assert code == 0, err
    return json.loads(out)


def _filters(capsys, path) -> list[list[str]]:
    """Each filter dump takes, with values that select part of this dump's heap."""
    info = _json(capsys, "info", path, "--format", "json", "-q")
    segs = sorted(info["gc_heap"]["segments"], key=lambda s: -s["size"])
    big = segs[0]
    start, end = int(big["start"], 16), int(big["end"], 16)
    quarter = (end - start) // 4
    out = [["--gen", g] for g in ("0", "2", "loh", "poh", "frozen", "0,loh")]
    out += [["--address-range", f"{start + quarter:#x}", f"{end - quarter:#x}"], ["--address-range", "0x0", "0x1"],
            ["--min-size", "100"], ["--max-size", "40"], ["--min-size", "30", "--max-size", "30"]]
    return out


@pytest.mark.parametrize("name", SAMPLE_FILES)
@pytest.mark.slow
def test_stats_totals_equal_dump_lines_for_every_filter(capsys, name):
    path = SAMPLES / name
    rows = _json(capsys, "stats", path, "--format", "json", "-q")["types"]
    chosen = [r for r in sorted(rows, key=lambda r: -r["count"]) if r["name"] != "Free"][:3]
    nonzero = 0
    for flt in _filters(capsys, path):
        for row in chosen:
            by_type = _json(capsys, "stats", path, "--mt", row["method_table"], *flt, "--format", "json", "-q")
            code, out, err = run(capsys, "dump", path, "--mt", row["method_table"], *flt, "--format", "jsonl", "-q")
            assert code == 0, err
            listed = [json.loads(line) for line in out.splitlines()]
            assert (by_type["count"], by_type["total_size"], by_type["total_aligned_size"]) == \
                (len(listed), sum(r["size"] for r in listed), sum(r["aligned_size"] for r in listed)), (flt, row)
            assert all(t["method_table"] == row["method_table"] for t in by_type["types"])
            nonzero += bool(listed)
            if row["name"] is not None:  # by name too, and a filter never leaves the whole type
                named = _json(capsys, "stats", path, "--type", row["name"], "--exact", *flt, "--format", "json",
                              "-q")
                assert named["count"] == by_type["count"], (flt, row["name"])
    assert nonzero > 5  # the filters select something, and not always everything


def test_the_gen_filter_keeps_the_per_type_table(capsys):
    path = SAMPLES / "strings.coreclr-8.0.4.linux-x64.core"
    whole = _json(capsys, "stats", path, "--format", "json", "-q")
    parts = [_json(capsys, "stats", path, "--gen", g, "--format", "json", "-q") for g in
             ("0", "1", "2", "loh", "poh", "frozen")]
    assert sum(p["count"] for p in parts) == whole["count"]
    assert sum(p["total_size"] for p in parts) == whole["total_size"]
    assert all("types" in p for p in parts) and len(parts[4]["types"]) >= 1  # the POH holds an object[]


@pytest.mark.parametrize("args,says", [
    (["--contains", "x"], "--contains: only for strings"),
    (["--min-length", "3"], "--min-length: only for strings"),
    (["--regex", "a"], "--regex: only for strings"),
    (["--duplicates"], "--duplicates: only for strings"),
    (["--type", "System.Byte[]", "--duplicates"], "not --type System.Byte[]"),
    (["--type", "System.String", "--sort", "count"], "--sort"),
    (["--type", "System.String", "--top", "3"], "add --duplicates"),
    (["--exact"], "--exact"),
])
def test_options_that_do_not_apply_are_usage_errors(capsys, args, says):
    code, out, err = run(capsys, "stats", SAMPLES / SAMPLE_FILES[0], *args)
    assert code == 2 and out == "" and says in err


def test_a_type_no_object_has_is_not_found(capsys):
    code, out, err = run(capsys, "stats", SAMPLES / SAMPLE_FILES[0], "--type", "Foo.Bar.Baz")
    assert code == 4 and "Foo.Bar.Baz" in err
    code, out, err = run(capsys, "dump", SAMPLES / SAMPLE_FILES[0], "--type", "Foo.Bar.Baz")
    assert code == 4 and "Foo.Bar.Baz" in err


def test_mt_of_another_type_says_what_it_is(capsys):
    path = SAMPLES / SAMPLE_FILES[0]
    rows = _json(capsys, "stats", path, "--format", "json", "-q")["types"]
    string_mt = next(r["method_table"] for r in rows if r["name"] == "System.String")
    code, out, err = run(capsys, "stats", path, "--type", "System.Byte[]", "--mt", string_mt)
    assert code == 4 and "is System.String, not a type whose name contains 'System.Byte[]'" in err


@pytest.mark.parametrize("sort", ["size", "count", "name"])
def test_sort_and_top(capsys, sort):
    path = SAMPLES / SAMPLE_FILES[0]
    every = _json(capsys, "stats", path, "--sort", sort, "--format", "json", "-q")
    top = _json(capsys, "stats", path, "--sort", sort, "--top", "5", "--format", "json", "-q")
    rows = every["types"]
    key = {"size": lambda r: (r["total_size"], r["count"]), "count": lambda r: (r["count"], r["total_size"]),
           "name": lambda r: (r["name"] is None, r["name"] or "")}[sort]
    assert [key(r) for r in rows] == sorted(key(r) for r in rows)
    assert top["types"] == (rows[:5] if sort == "name" else rows[-5:])
    assert (top["count"], top["total_size"], top["type_count"]) == (every["count"], every["total_size"], len(rows))
    code, out, err = run(capsys, "stats", path, "--sort", sort, "--top", "5", "-q")
    assert code == 0 and len([line for line in out.splitlines() if line[:1].isdigit()]) == 5
    assert f"in {len(rows)} types (5 shown)" in out


def test_dump_type_matches_a_part_of_the_name_as_sos_does(capsys):
    path = SAMPLES / SAMPLE_FILES[0]
    rows = _json(capsys, "stats", path, "--format", "json", "-q")["types"]
    want = [r for r in rows if r["name"] and "System.Collections.Generic.Dictionary`2" in r["name"]]
    code, out, err = run(capsys, "dump", path, "--type", "System.Collections.Generic.Dictionary`2", "--format",
                         "jsonl", "-q")
    assert code == 0
    listed = [json.loads(line) for line in out.splitlines()]
    assert len(listed) == sum(r["count"] for r in want) and len({r["type"] for r in listed}) == len(want) > 4
    # reflection's form of a name is matched too; --exact needs the whole name
    code, out, err = run(capsys, "dump", path, "--type", "List`1[System.Int32]", "--format", "jsonl", "-q")
    assert code == 0 and [json.loads(line)["type"] for line in out.splitlines()] == \
        ["System.Collections.Generic.List`1[[System.Int32, System.Private.CoreLib]]"]
    code, out, err = run(capsys, "dump", path, "--type", "List`1[System.Int32]", "--exact")
    assert code == 4 and "List`1[[System.Int32, System.Private.CoreLib]]" in err  # named among those like it
    code, out, err = run(capsys, "dump", path, "--type", "System.Collections.Generic.List`1[System.Int32]",
                         "--exact", "--format", "jsonl")
    assert code == 0 and len(out.splitlines()) == 1


def test_a_truncated_dump_says_so_first(capsys, tmp_path):
    cut = tmp_path / "cut.core"
    cut.write_bytes((SAMPLES / SAMPLE_FILES[0]).read_bytes()[:600_000])
    code, out, err = run(capsys, "stats", cut)
    assert code == 3 and err.startswith("clrlayout: error: the dump file is truncated")


def test_no_arguments_prints_the_help(capsys):
    code, out, err = run(capsys)
    assert code == 0 and out.startswith("Usage: clrlayout") and "error" not in err


def test_an_address_that_is_no_method_table(capsys):
    code, out, err = run(capsys, "type", SAMPLES / SAMPLE_FILES[0], "0xdeadbeef")
    assert code == 4 and "no MethodTable in the dump at 0xdeadbeef" in err


def test_counts_of_one_are_singular(capsys):
    path = SAMPLES / SAMPLE_FILES[0]
    code, out, err = run(capsys, "stats", path, "--type", "System.Collections.Hashtable+SyncHashtable", "-q")
    assert code == 0 and "Total 1 object," in out and "1 objects" not in out


def _with_private_stream(src, out) -> None:
    """A copy of a minidump whose comment stream (type 10) is retyped 0xFFF0, as Wine's private stream is."""
    import struct

    data = bytearray(src.read_bytes())
    count, rva = struct.unpack_from("<II", data, 8)
    for i in range(count):
        if struct.unpack_from("<I", data, rva + 12 * i)[0] == 10:
            struct.pack_into("<I", data, rva + 12 * i, 0xFFF0)
            break
    else:
        raise AssertionError("no comment stream to retype")
    out.write_bytes(bytes(data))


@pytest.mark.parametrize("entry", [e for e in manifest(None) if e["format"] == "minidump"], ids=lambda e: e["file"])
def test_a_clean_minidump_gets_no_warning_for_streams_it_does_not_read(capsys, tmp_path, entry):
    path = tmp_path / "other-stream.dmp"
    _with_private_stream(SAMPLES / entry["file"], path)
    code, out, err = run(capsys, "stats", path, "--type", "System.String")
    assert code == 0 and err == ""
    assert out == run(capsys, "stats", SAMPLES / entry["file"], "--type", "System.String")[1].replace(
        str(SAMPLES / entry["file"]), str(path))
    info = _json(capsys, "info", path, "--format", "json")
    assert info["other_streams"] == ["0xfff0"] and info["warnings"] == []


def test_an_mt_that_is_not_a_string_is_named(capsys):
    path = SAMPLES / SAMPLE_FILES[0]
    rows = _json(capsys, "stats", path, "--format", "json", "-q")["types"]
    byte_array = next(r["method_table"] for r in rows if r["name"] == "System.Byte[]")
    code, out, err = run(capsys, "info", path, "--mt", byte_array)
    assert "it is System.Byte[]'s (component size 1; a string's is 2)" in err and "System.Char[]" not in err


@pytest.mark.slow
def test_object_full_keeps_referenced_strings_whole(capsys):
    path = SAMPLES / SAMPLE_FILES[0]
    code, out, err = run(capsys, "dump", path, "--type", "System.String[]", "--exact", "--format", "jsonl", "-q")
    arrays = [json.loads(line) for line in out.splitlines()]
    longest = None
    for a in arrays:
        code, out, err = run(capsys, "object", path, a["address"], "--full", "-q")
        cut = [line for line in out.splitlines() if "(System.String) \"" in line and "\u2026\"" in line]
        assert not cut, cut[:1]
        whole = [line for line in out.splitlines() if "(System.String) \"" in line]
        longest = max([len(line) for line in whole] + [longest or 0])
    code, out, err = run(capsys, "object", path, arrays[0]["address"], "-q")
    assert longest > 120  # some referenced string is longer than the table shows without --full
