"""clrlayout stats: totals equal the sum over dump --format jsonl, the breakdown adds up, duplicates are
exact; expected numbers come from what the sample target allocated."""

from __future__ import annotations

import csv
import io
import json
from collections import Counter

import pytest

from clrlayout.cli import main


def _json(capsys, *args):
    assert main([*map(str, args), "--format", "json", "-q"]) == 0
    return json.loads(capsys.readouterr().out)


def _dumped(capsys, path, *filters):
    assert main(["dump", str(path), "--format", "jsonl", "-q", *filters]) == 0
    return [json.loads(line) for line in capsys.readouterr().out.splitlines()]


def test_totals_equal_the_sum_over_dump(capsys, sample):
    rows = _dumped(capsys, sample.path)
    st = _json(capsys, "stats", sample.path, "--type", "System.String")
    assert st["count"] == len(rows) == sample.entry["strings"]
    assert st["total_size"] == sum(r["size"] for r in rows)
    assert st["total_aligned_size"] == sum(r["aligned_size"] for r in rows)
    assert st["total_length"] == sum(r["length"] for r in rows)
    assert sum(st["breakdown"].values()) == st["total_aligned_size"]
    assert st["breakdown"]["characters"] == 2 * st["total_length"]
    assert st["breakdown"]["alignment_padding"] == st["total_aligned_size"] - st["total_size"]
    ptr = sample.truth["pointer_size"]
    assert st["breakdown"]["method_table_pointers"] == ptr * st["count"]
    assert st["breakdown"]["object_headers"] == (8 if ptr == 8 else 4) * st["count"]
    assert sum(h["count"] for h in st["histogram"]) == st["count"]
    for h in st["histogram"]:
        inside = [r for r in rows if h["min_length"] <= r["length"] <= h["max_length"]]
        assert h["count"] == len(inside)
        assert h["aligned_bytes"] == sum(r["aligned_size"] for r in inside)
    assert sum(h["count"] for h in st["heaps"].values()) == st["count"]
    assert sum(h["aligned_bytes"] for h in st["heaps"].values()) == st["total_aligned_size"]
    # the 50,000-character string is on the large object heap
    assert st["heaps"]["loh"]["count"] >= 1
    assert st["largest"][0]["length"] == 50000
    assert st["largest"][0]["address"] == sample.known("large")["address"]


def test_duplicates_are_exact(capsys, sample):
    rows = _dumped(capsys, sample.path)
    st = _json(capsys, "stats", sample.path, "--type", "System.String", "--duplicates", "--top", "0")
    counts = Counter(r["value"] for r in rows)
    aligned = {r["value"]: r["aligned_size"] for r in rows}
    want = {v: c for v, c in counts.items() if c > 1}
    got = {d["value"]: d for d in st["duplicates"]}
    assert set(got) == set(want)
    lowest = {}
    for r in rows:
        lowest[r["value"]] = min(lowest.get(r["value"], r["address"]), r["address"], key=lambda a: int(a, 16))
    for v, d in got.items():
        assert d["count"] == want[v]
        assert d["aligned_size"] == aligned[v]
        assert d["wasted_bytes"] == (want[v] - 1) * aligned[v]
        assert d["first_address"] == lowest[v]  # an address to follow up with !do / !gcroot
    assert st["total_wasted_bytes"] == sum((c - 1) * aligned[v] for v, c in want.items())
    wasted = [d["wasted_bytes"] for d in st["duplicates"]]
    assert wasted == sorted(wasted, reverse=True)
    # what the target allocated: four copies and three copies, each plus the interned literal
    names = [k["name"] for k in sample.truth["strings"]]
    four = got["duplicate value seen four times"]
    assert four["count"] == sum(n.startswith("dup4_") for n in names) + 1 == 5
    ptr = sample.truth["pointer_size"]
    base = sample.string_base_size
    assert four["aligned_size"] == (base + 2 * 31 + ptr - 1) // ptr * ptr
    assert got["dup x3"]["count"] == sum(n.startswith("dup3_") for n in names) + 1 == 4
    # each DEAD-nnn string is unique
    assert not [v for v in got if v.startswith("DEAD-")]


def test_filters_apply_to_stats(capsys, sample):
    st = _json(capsys, "stats", sample.path, "--type", "System.String", "--regex", r"^DEAD-\d{3}$")
    assert st["count"] == 100
    assert st["total_size"] == 100 * (sample.string_base_size + 16)
    st = _json(capsys, "stats", sample.path, "--type", "System.String", "--min-length", "1000")
    assert st["count"] == len([r for r in _dumped(capsys, sample.path) if r["length"] >= 1000])


def test_table_and_csv(capsys, sample):
    assert main(["stats", str(sample.path), "--type", "System.String", "-q"]) == 0
    out = capsys.readouterr().out
    assert "Where the bytes go:" in out and "alignment padding" in out and "Lengths:" in out
    assert main(["stats", str(sample.path), "--type", "System.String", "--duplicates", "--top", "3", "-q"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].split() == ["COUNT", "ALIGNED", "WASTED", "FIRST", "ADDRESS", "VALUE"]
    assert "duplicated values in" in out.splitlines()[-1]
    assert main(["stats", str(sample.path), "--type", "System.String", "--duplicates", "--format", "csv", "-q"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert rows and set(rows[0]) == {"value", "count", "aligned_size", "wasted_bytes", "first_address"}
    assert main(["stats", str(sample.path), "--type", "System.String", "--format", "csv", "-q"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    total = next(r for r in rows if r["table"] == "total")
    assert int(total["bytes"]) == sum(int(r["bytes"]) for r in rows if r["table"] == "breakdown")
    assert main(["dump", str(sample.path), "--format", "csv", "-q", "--limit", "5"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert len(rows) == 5 and rows[0]["address"].startswith("0x")


def test_fx64_profile_counts_the_extra_bytes(capsys, sample):
    """Read with the .NET Framework x64 profile (--profile), the extra 4 bytes show in the breakdown."""
    if sample.truth["pointer_size"] != 8:
        return
    code = main(["stats", str(sample.path), "--type", "System.String", "--profile", "netfx-x64", "-q"])
    out, err = capsys.readouterr()
    if sample.string_base_size == 22:
        # the CoreCLR 3.0+ dump's strings do not have BaseSize 26: the profile must refuse them, not guess
        assert code == 4 and "BaseSize 22" in err
        return
    # .NET Core 2.x x64 strings are laid out as the .NET Framework's: the same figures, extra bytes included
    assert code == 0
    assert main(["stats", str(sample.path), "--type", "System.String", "-q"]) == 0
    own = capsys.readouterr().out
    extra = [line for line in own.splitlines() if "extra bytes counted in BaseSize" in line]
    assert extra and extra[0] in out and int(extra[0].split()[-2].replace(",", "")) == 4 * sample.entry["strings"]


def test_largest_are_the_top_ten_by_size_then_address(capsys, sample, monkeypatch):
    """The ten largest strings, ties broken by the lower address, whatever the windows: many strings share
    a size, and a window's candidates are cut at the tenth size."""
    rows = _dumped(capsys, sample.path)
    want = sorted(rows, key=lambda r: (-r["size"], int(r["address"], 16)))[:10]
    for limits in ("", "scan_window=4K"):
        monkeypatch.setenv("CLRLAYOUT_LIMITS", limits)
        st = _json(capsys, "stats", sample.path, "--type", "System.String", "--jobs", "1")
        assert [(x["address"], x["size"]) for x in st["largest"]] == [(r["address"], r["size"]) for r in want]


@pytest.mark.parametrize("batch, spread", [(37, True), (4000, True), (4000, False)])
def test_largest_ties_go_to_the_lower_address(batch, spread):
    """Batches full of strings of equal size, in shuffled address order: the ten kept are the largest,
    then the lowest addresses, as one sorted list would give (big batches are first cut at a floor)."""
    import random

    from clrlayout.objects.batches import batch_from_objects
    from clrlayout.runtime.profiles import select_profile
    from clrlayout.analyses.stats import StatsCollector
    from clrlayout.objects.strings import StringObject

    p = select_profile("coreclr", "x64", "3.1.23")
    rng = random.Random(5)
    addresses = rng.sample(range(0x1000, 0x1000000, 8), 10000)
    lengths = [rng.choice([3, 4, 4, 5, 5, 5] if i % 3 or not spread else range(200)) for i in range(len(addresses))]
    objs = [StringObject(a, 0x7F00, n, p.string_size(n), p.string_aligned_size(n, False), 0, "x" * n)
            for a, n in zip(addresses, lengths)]
    c = StatsCollector(p, top=10)
    for first in range(0, len(objs), batch):
        c.add(batch_from_objects(p, objs[first : first + batch]))
    want = sorted(objs, key=lambda o: (-o.size, o.address))[:10]
    assert [(int(x["address"], 16), x["size"]) for x in c.finish().largest] == [(o.address, o.size) for o in want]


def test_duplicates_written_out_are_the_same(capsys, sample, monkeypatch, tmp_path):
    """With almost no memory for the per-string entries, they go to temporary files by hash range and
    each is grouped on its own: the same duplicates and totals, and no file is left behind."""
    import tempfile

    args = ("stats", sample.path, "--type", "System.String", "--duplicates", "--top", "0", "--jobs", "1")
    in_memory = _json(capsys, *args)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setenv("CLRLAYOUT_LIMITS", "duplicate_memory=1K,scan_window=4K")
    written = _json(capsys, *args)
    assert written == in_memory and written["duplicates"]
    assert list(tmp_path.iterdir()) == []


def test_duplicates_in_files_are_grouped_by_hash_range(tmp_path, monkeypatch):
    """Entries written out in several rounds land in the file of their hash's top bits, and grouping the
    files one by one finds every value more than once, as grouping all of them in memory does."""
    import tempfile

    from clrlayout.dump.addrspace import AddressSpace, BytesSource
    from clrlayout.objects.batches import batch_from_objects
    from clrlayout.runtime.profiles import select_profile
    from clrlayout.analyses.stats import DuplicateCollector
    from clrlayout.objects.strings import StringObject

    p = select_profile("coreclr", "x64", "3.1.23")
    values = [f"v{i % 37}" * (1 + i % 5) for i in range(600)]
    blob, objs = bytearray(), []
    for v in values:  # each string's object bytes at its address, so that values can be read back
        at = 0x1000 + len(blob)
        body = v.encode("utf-16-le")
        obj = bytearray(p.string_aligned_size(len(v)))
        obj[8 + p.string.chars_offset : 8 + p.string.chars_offset + len(body)] = body
        blob += obj
        objs.append(StringObject(at + 8, 0x7F00, len(v), p.string_size(len(v)), len(obj), 0, v))
    space = AddressSpace(BytesSource(bytes(blob)), [(0x1000, len(blob), 0)], 8)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))

    def duplicates(budget):
        c = DuplicateCollector(p, space, budget=budget)
        for first in range(0, len(objs), 50):
            c.add(batch_from_objects(p, objs[first : first + 50]))
        if budget < 1000:
            files = [f for d in tmp_path.iterdir() for f in d.iterdir()]
            assert len(files) > 1  # several hash ranges
        return c.finish()

    found, waste = duplicates(1 << 30)
    assert duplicates(100) == (found, waste)
    assert {d.value: d.count for d in found} == {v: n for v, n in Counter(values).items() if n > 1}
    assert list(tmp_path.iterdir()) == []


def test_duplicates_without_a_writable_temporary_directory(sample, monkeypatch, tmp_path, capsys):
    """Entries that must go to files, and no directory to put them in: one line and exit code 6."""
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "missing"))
    monkeypatch.setenv("CLRLAYOUT_LIMITS", "duplicate_memory=1K")
    assert main(["stats", str(sample.path), "--type", "System.String", "--duplicates", "--jobs", "1", "-q"]) == 6
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "temporary files of the duplicates count" in err[0]


def test_heaps_and_gc_heaps_are_the_dumps_rows_grouped(capsys, sample):
    """stats' heaps (gen0, gen1, gen2, loh...) and, under server GC, its GC heaps, against dump's rows."""
    rows = _dumped(capsys, sample.path)
    st = _json(capsys, "stats", sample.path, "--type", "System.String")
    for name, entry in st["heaps"].items():
        on = [r for r in rows if r["heap"] == name]
        assert entry == {"count": len(on), "aligned_bytes": sum(r["aligned_size"] for r in on)}
    assert {r["heap"] for r in rows} == set(st["heaps"])
    import clrlayout

    with clrlayout.open(str(sample.path)) as dump:
        gc_heaps = dump.runtime.heap.gc_heap_count
    if sample.entry["gc"] == "server" and gc_heaps > 1:  # (.NET 10's server GC may run one heap: DATAS)
        assert len(st["gc_heaps"]) == gc_heaps
        assert sum(g["count"] for g in st["gc_heaps"]) == st["count"]
        assert sum(g["aligned_bytes"] for g in st["gc_heaps"]) == st["total_aligned_size"]
    else:
        assert st["gc_heaps"] == []


def test_generation_and_size_filters(capsys, sample):
    rows = _dumped(capsys, sample.path)
    for gen, names in (("0", {"gen0"}), ("2,loh", {"gen2", "loh"}), ("3", {"loh"})):
        picked = _dumped(capsys, sample.path, "--gen", gen)
        assert picked == [r for r in rows if r["heap"] in names] and picked
    picked = _dumped(capsys, sample.path, "--min-size", "40", "--max-size", "200")
    assert picked == [r for r in rows if 40 <= r["size"] <= 200] and picked
    st = _json(capsys, "stats", sample.path, "--type", "System.String", "--gen", "0")
    assert st["count"] == sum(r["heap"] == "gen0" for r in rows) and set(st["heaps"]) == {"gen0"}


def test_duplicates_csv_keeps_to_top(capsys, sample):
    """--top limits the CSV list as it does the table and JSON, and each row has its first address."""
    st = _json(capsys, "stats", sample.path, "--type", "System.String", "--duplicates", "--top", "3")
    assert main(["stats", str(sample.path), "--type", "System.String", "--duplicates", "--top", "3", "--format", "csv", "-q"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert len(rows) == 3 < st["duplicated_values"]
    assert [(r["count"], r["first_address"]) for r in rows] == \
        [(str(d["count"]), d["first_address"]) for d in st["duplicates"]]
