"""clrlayout memory: every byte of the dump's memory has one kind, the kinds add up to the dump's memory, the
GC figures equal the heap walk's (and the DAC's on fresh cores), and thread stacks are where the thread
list says."""

from __future__ import annotations

import bisect
import json
from collections import Counter

import pytest

import clrlayout
from clrlayout.cli import main
from tests.support.samples import SAMPLES, manifest
from clrlayout.session import open_session  # the engine under the model: its plumbing too


def _memory(capsys, path, *extra) -> dict:
    assert main(["memory", str(path), "--format", "json", "--ranges", *extra]) == 0
    out, err = capsys.readouterr()
    assert err == ""  # a clean dump: no warning
    return json.loads(out)


def test_kinds_add_up_to_the_dump(sample, capsys):
    m = _memory(capsys, sample.path)
    assert main(["info", str(sample.path), "--format", "json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert m["total_bytes"] == info["memory"]["bytes"] == sum(k["bytes"] for k in m["kinds"])
    assert sum(r["size"] for r in m["regions"]) == m["total_bytes"]
    assert sum(k["ranges"] for k in m["kinds"]) == len(m["regions"])
    # ranges do not overlap, and each lies in memory the dump holds
    with clrlayout.open(str(sample.path)) as d:
        space = d.memory
        last = 0
        for r in m["regions"]:
            start = int(r["start"], 16)
            assert start >= last and space.is_mapped(start, r["size"])
            last = start + r["size"]
        # every thread's stack that the dump holds is counted as that thread's stack
        stacks = {r["owner"] for r in m["regions"] if r["kind"] == "stack"}
        for t in d.threads:
            if t.stack_start is not None and t.stack_end and space.is_mapped(t.stack_start, 1):
                assert f"thread {t.id}" in stacks


def test_gc_figures_equal_the_walk(sample, capsys):
    """Object and free bytes per heap equal what stats (the same walk, by type) counts, Free included."""
    m = _memory(capsys, sample.path)
    assert main(["stats", str(sample.path), "--format", "json"]) == 0
    stats = json.loads(capsys.readouterr().out)
    free = sum(t["total_aligned_size"] for t in stats["types"] if t["name"] == "Free")
    gc = m["gc"]
    assert gc["free_bytes"] == free
    assert gc["object_bytes"] + gc["free_bytes"] == stats["total_aligned_size"]
    assert sum(h["objects"] + h["free_objects"] for h in gc["heaps"]) == stats["count"]
    assert gc["allocated_bytes"] <= gc["committed_bytes"]
    heap_ranges = sum(r["size"] for r in m["regions"] if r["kind"] == "gc-heap")
    assert heap_ranges >= gc["object_bytes"] + gc["free_bytes"] - 8 * len(gc["segments"])


def test_gc_figures_equal_the_dacs(fresh_core, capsys):
    """Per heap, the count of objects and of free objects equals the DAC's walk of the same core."""
    listing = fresh_core.dac_listing("--names", "--fields")
    free_mt = listing["free_method_table"]
    dac = Counter("free" if mt == free_mt else "object" for _, mt, _, _ in listing["objects"])
    m = _memory(capsys, fresh_core.path)
    ours = Counter()
    for h in m["gc"]["heaps"]:
        ours["object"] += h["objects"]
        ours["free"] += h["free_objects"]
    assert ours == dac and dac["object"] > 1000
    assert sum(k["bytes"] for k in m["kinds"]) == m["total_bytes"]


def test_first_claim_wins_and_pieces_tile_the_runs():
    from clrlayout.analyses.memory import paint

    runs = [(0x1000, 0x5000), (0x8000, 0x9000)]
    claims = [(0x0, 0x2000, 2, "image", "a.dll"), (0x1800, 0x3000, 0, "gc-heap", "heap 0 gen2"),
              (0x2800, 0x8800, 1, "stack", "thread 7")]
    got = [(p.start, p.end, p.kind, p.owner) for p in paint(runs, claims)]
    assert got == [(0x1000, 0x1800, "image", "a.dll"), (0x1800, 0x3000, "gc-heap", "heap 0 gen2"),
                   (0x3000, 0x5000, "stack", "thread 7"), (0x8000, 0x8800, "stack", "thread 7"),
                   (0x8800, 0x9000, "native", "")]


def test_address_space_summary_of_a_memory_info_list():
    from clrlayout.analyses.memory import address_space
    from clrlayout.dump.model import MemoryInfo

    infos = [MemoryInfo(0x10000, 0x1000, 0x10000, "commit", "image", 0x20, 0x80),
             MemoryInfo(0x11000, 0x3000, 0x10000, "reserve", "image", 0, 0x80),
             MemoryInfo(0x14000, 0x2000, 0x14000, "commit", "private", 0x104, 0x04),
             MemoryInfo(0x16000, 0xA000, 0, "free", "", 0x01, 0)]
    got = address_space(infos)
    assert got[("state", "commit")] == [2, 0x3000] and got[("state", "free")] == [1, 0xA000]
    assert got[("type", "image")] == [2, 0x4000] and ("type", "") not in got
    assert got[("protect", "PAGE_EXECUTE_READ")] == [1, 0x1000]
    assert got[("protect", "PAGE_READWRITE|PAGE_GUARD")] == [1, 0x2000]


WITH_MEMORY_INFO = [e for e in manifest(None) if e["format"] == "minidump" and "--memory-info" in e["producer"]]


@pytest.mark.parametrize("entry", WITH_MEMORY_INFO, ids=lambda e: e["file"])
def test_memory_info_list_agrees_with_the_dumps_memory(entry, capsys):
    """The memory-info list (VirtualQueryEx's regions, written by the sample's minidumper) and the dump's own
    memory and module lists are independent records of one process: every byte the dump holds lies in a
    committed region, every module's in a MEM_IMAGE one, the regions tile the address space without
    overlapping, and `memory` splits MEM_MAPPED bytes out as mapped-file."""
    path = SAMPLES / entry["file"]
    with open_session(path) as s:
        infos = sorted(s.dump.memory_info, key=lambda i: i.base)
        assert len(infos) > 100
        for a, b in zip(infos, infos[1:]):
            assert a.base + a.size <= b.base
        starts = [i.base for i in infos]

        def region(address):
            i = bisect.bisect_right(starts, address) - 1
            return infos[i] if i >= 0 and address < infos[i].base + infos[i].size else None

        for r in s.dump.memory.regions:
            for at in range(r.start, r.end, 0x1000):
                info = region(at)
                assert info is not None and info.state == "commit", (hex(at), info)
        for m in s.dump.modules:
            if s.dump.memory.is_mapped(m.base, 1):
                assert region(m.base).type == "image", m.path
        mapped = sum(min(r.end, i.base + i.size) - max(r.start, i.base)
                     for r in s.dump.memory.regions for i in infos
                     if i.type == "mapped" and r.start < i.base + i.size and i.base < r.end)
    m = _memory(capsys, path)
    kinds = {k["kind"]: k["bytes"] for k in m["kinds"]}

    def in_mapped(kind):
        return sum(min(int(r["start"], 16) + r["size"], i.base + i.size) - max(int(r["start"], 16), i.base)
                   for r in m["regions"] if r["kind"] == kind for i in infos
                   if i.type == "mapped" and int(r["start"], 16) < i.base + i.size
                   and i.base < int(r["start"], 16) + r["size"])

    # MEM_MAPPED bytes are mapped files, but where the runtime's loader heaps lie in them (the W^X double
    # mapping of .NET 7+), the runtime's
    assert kinds["mapped-file"] == in_mapped("mapped-file")
    assert in_mapped("mapped-file") + in_mapped("runtime") == mapped


def test_loader_heaps_are_the_dacs(fresh_core, capsys):
    """The runtime's own memory: every block of every loader heap the DAC knows (TraverseLoaderHeap over each
    domain's loader allocator, ISOSDacInterface13 on .NET 8+, the virtual-call stub heaps, the JIT's code
    heaps) that the core holds is a block clrlayout finds by its LoaderHeapBlock list, with the DAC's size,
    and counted as runtime memory.  The DACs of .NET Core 2.x and 3.x leave out a few heaps carved from the same
    first reservations (on 2.2 an app domain's stub heap and three virtual-call stub heaps, on 3.1 two heaps of
    the global loader allocator): the blocks clrlayout finds beyond the DAC's adjoin its blocks, and on .NET 5+
    there are none."""
    dac = fresh_core.dac_listing("--native-heaps")["native_heaps"]
    held = {(b["address"], b["size"]) for b in dac if b["held"]}
    assert len(held) > 10 and {b["kind"] for b in dac} >= {"LowFrequencyHeap", "HighFrequencyHeap", "StubHeap",
                                                            "LoaderCodeHeap"}
    m = _memory(capsys, fresh_core.path)
    with open_session(fresh_core.path) as s:
        ours = {(b.start, b.size) for b in s.loader_heaps().blocks}
    assert held <= ours, sorted(held - ours)
    listed = {(b["address"], b["size"]) for b in dac}
    extra = sorted(ours - listed)
    if int(fresh_core.runtime.split(".")[0]) >= 5:
        assert not extra, [(hex(a), hex(n)) for a, n in extra]
    known, left = set(listed), set(extra)
    while left:
        edges = {a for a, _ in known} | {a + n for a, n in known}
        joined = {(a, n) for a, n in left if a in edges or a + n in edges}
        assert joined, [(hex(a), hex(n)) for a, n in sorted(left)]
        known |= joined
        left -= joined
    assert m["loader_heaps"]["blocks"] == len(ours)
    runtime = {r["start"]: r for r in m["regions"] if r["kind"] == "runtime"}
    # the first byte of every held block the DAC lists is runtime memory: code where the DAC's heap holds code
    # or stubs (the JIT's code heaps, stub and precode heaps, virtual-call stubs), data where it holds types
    code = {"LoaderCodeHeap", "StubHeap", "FixupPrecodeHeap", "NewStubPrecodeHeap", "LookupHeap", "ResolveHeap",
            "DispatchHeap"}
    kind = {(b["address"], b["size"]): b["kind"] for b in dac}
    starts = sorted(int(k, 16) for k in runtime)
    for address, size in held:
        i = bisect.bisect_right(starts, address) - 1
        r = runtime[f"{starts[i]:#x}"]
        assert starts[i] <= address < starts[i] + r["size"]
        assert r["owner"] == ("loader heap: code" if kind[(address, size)] in code else "loader heap: data")
    assert 0 < m["loader_heaps"]["code_dump_bytes"] < m["loader_heaps"]["dump_bytes"]
    assert next(k["bytes"] for k in m["kinds"] if k["kind"] == "runtime") >= m["loader_heaps"]["dump_bytes"] > 0


def test_gc_bookkeeping_is_the_dacs(fresh_core, capsys):
    """The GC's bookkeeping reservations (card table, brick table, mark array, region map) from GcDacVars'
    bookkeeping_start equal ISOSDacInterface13::GetGCBookkeepingMemoryRegions (.NET 8+; before, neither has
    them), and what the dump holds of them is runtime memory."""
    dac = fresh_core.dac_listing("--native-heaps")["gc_bookkeeping"]
    with open_session(fresh_core.path) as s:
        ours = s.gc_bookkeeping()
    assert ours == [(r["start"], r["start"] + r["size"]) for r in dac]
    assert bool(ours) == (int(fresh_core.runtime.split(".")[0]) >= 8)
    m = _memory(capsys, fresh_core.path)
    assert m["gc_bookkeeping"]["reservations"] == len(ours)
    assert m["gc_bookkeeping"]["reserved_bytes"] == sum(hi - lo for lo, hi in ours)
    held = sum(r["size"] for r in m["regions"] if r["owner"] == "GC bookkeeping")
    assert held == m["gc_bookkeeping"]["dump_bytes"] and (held > 0) == bool(ours)


def test_gc_handle_tables_are_the_dacs(fresh_core, capsys):
    """The GC's handle table segments, found through GcDacVars.handle_table_map and each HandleTable's
    segment list (whose place is found by the segments' pointers back at their table), equal
    ISOSDacInterface13::GetHandleTableMemoryRegions (.NET 8+) for the slots the DAC walks (one per GC heap);
    server GC keeps a table per CPU, and on a machine whose server GC runs fewer heaps than it has CPUs
    clrlayout finds the other slots' tables too (each segment pointing back at its table).  What the dump
    holds of them is runtime memory."""
    from clrlayout.heap.handletables import handle_table_segments

    dac = fresh_core.dac_listing("--native-heaps")["handle_tables"]
    with open_session(fresh_core.path) as s:
        ours = s.gc_handle_tables()
        slots = handle_table_segments(s.dump, s.heap.dac_vars)
        heaps = s.heap.heap_count
    if int(fresh_core.runtime.split(".")[0]) < 8:
        assert dac == []  # the 2.x and 3.x DACs have no ISOSDacInterface13; nor GcDacVars a handle table map
        return
    assert [(lo, hi) for lo, hi, slot in slots if slot < heaps] == sorted((r["start"], r["start"] + r["size"])
                                                                         for r in dac) and ours
    assert {slot for _, _, slot in slots} == set(range(len({slot for _, _, slot in slots})))
    m = _memory(capsys, fresh_core.path)
    assert m["gc_handle_tables"]["segments"] == len(ours)
    held = sum(r["size"] for r in m["regions"] if r["owner"] == "GC handle table")
    assert held == m["gc_handle_tables"]["dump_bytes"] > 0
