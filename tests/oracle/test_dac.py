"""clrlayout against the runtime's own DAC, on fresh untrimmed cores of real processes (tests/support/fresh.py).

The DAC (libmscordaccore.so, beside each Linux runtime) is hosted by tests/support/dac_oracle.py in its own
process; it lists every object of the heap as SOS and ClrMD see it.  Nothing here is a stored answer:
both sides read the same core, made at test time.
"""

from __future__ import annotations

import json

import pytest

import clrlayout
from clrlayout.session import open_session  # the engine under the model: its plumbing too

pytestmark = pytest.mark.dac


def _dac_objects(listing: dict) -> list[tuple[int, int, int]]:
    free = listing["free_method_table"]
    return sorted((a, mt, size) for a, mt, size, _ in listing["objects"] if mt != free)


def test_segments_and_method_tables_equal_the_dacs(fresh_core):
    listing = fresh_core.dac_listing()
    with open_session(fresh_core.path) as s:
        assert s.heap.exact and s.heap.gc_mode == fresh_core.gc
        ours = sorted((seg.start, seg.end) for seg in s.heap.segments)
        assert ours == sorted((seg["start"], seg["end"]) for seg in listing["segments"])
        assert s.string_method_table() == listing["string_method_table"]
        assert s.mts.get(listing["free_method_table"]).kind == "free"


def test_objects_equal_the_dacs(fresh_core):
    """Every non-free object: the same addresses, MethodTables and SOS sizes, none more, none fewer."""
    dac = _dac_objects(fresh_core.dac_listing())
    with open_session(fresh_core.path) as s:
        objects = list(s.objects())
        assert s.findings.count == 0
    ours = [(o.address, o.method_table, o.size) for o in objects]
    assert len(ours) == len(dac) > 1000
    assert sorted(ours) == dac
    # heap order: segment after segment, each in address order
    by_segment: dict = {}
    for o in objects:
        by_segment.setdefault(o.segment.start, []).append(o.address)
    assert list(by_segment) == [seg.start for seg in s.heap.segments if seg.start in by_segment]
    assert all(addresses == sorted(addresses) for addresses in by_segment.values())


def test_strings_equal_the_dacs(fresh_core):
    """Every System.String: the same addresses, and the same UTF-16 bytes as GetObjectStringData."""
    dac = {int(a): v for a, v in fresh_core.dac_listing("--strings")["strings"].items()}
    with open_session(fresh_core.path) as s:
        ours = {x.address: x.value.encode("utf-16-le", "surrogatepass").hex() for x in s.strings()}
    assert len(ours) == len(dac) > 900
    assert ours == dac
    known = {int(k["address"], 16) for k in fresh_core.truth["strings"]}
    assert known <= set(ours)


def test_type_statistics_and_names_equal_the_dacs(fresh_core, capsys):
    """stats (!dumpheap -stat): per MethodTable the DAC's count and summed size, and every name exactly the
    DAC's GetMethodTableName (generics, nested types, arrays, Free), read from metadata without the DAC."""
    from collections import Counter

    from clrlayout.cli import main

    listing = fresh_core.dac_listing("--names", "--fields")  # one DAC run serves this and the field test
    names = {int(mt): name for mt, name in listing["names"].items()}
    counts, sizes = Counter(), Counter()
    for _, mt, size, _ in listing["objects"]:
        counts[mt] += 1
        sizes[mt] += size
    assert main(["stats", str(fresh_core.path), "--format", "json"]) == 0
    out, err = capsys.readouterr()
    assert err == ""  # a clean dump: every type named, no warning
    data = json.loads(out)
    ours = {int(r["method_table"], 16): r for r in data["types"]}
    assert set(ours) == set(counts) and len(ours) > 100
    assert {mt: r["count"] for mt, r in ours.items()} == dict(counts)
    assert {mt: r["total_size"] for mt, r in ours.items()} == dict(sizes)
    assert {mt: r["name"] for mt, r in ours.items()} == {mt: names[mt] for mt in ours}
    assert any("`2[[" in n for n in names.values()) and any(n.endswith("[]") for n in names.values())
    assert data["count"] == len(listing["objects"])
    # info counts the same MethodTables, every one named
    assert main(["info", str(fresh_core.path), "--format", "json"]) == 0
    types = json.loads(capsys.readouterr().out)["types"]
    assert types == {"method_tables": len(counts), "named": len(counts), "unnamed": 0, "why_unnamed": {}}


def test_field_descs_and_layouts_equal_the_dacs(fresh_core):
    """Every heap type's own FieldDescs (token, offset, CorElementType, static, thread-local) equal the DAC's
    GetFieldDescData, read from the EEClass and FieldDesc layouts of formats/type-system.toml; the
    MethodTable of every non-generic value-type field the DAC knows is the one clrlayout finds; and each
    layout's fields lie inside the object without overlapping."""
    import clrlayout

    listing = fresh_core.dac_listing("--names", "--fields")
    names = {int(mt): n for mt, n in listing["names"].items()}
    with open_session(fresh_core.path) as s:
        s.method_tables_named("System.String")  # walks the heap: every MethodTable known
        compared = structs = 0
        for key, dac in listing["fields"].items():
            mt = int(key)
            c = s.layouts.class_data(mt)
            assert c.problem is None, (names[mt], c.problem)
            ours = [(f.token, f.offset, f.element_type, f.is_static, f.is_thread_local) for f in c.own]
            assert ours == [(f["token"], f["offset"], f["type"], f["static"], f["thread_local"]) for f in dac], \
                names[mt]
            compared += len(dac)
            lay = s.type_layout(mt)
            assert lay.complete, (names[mt], lay.problems)
            for f in dac:
                mine = [x for x in lay.fields if x.token == f["token"]]
                if f["type"] == 0x11 and not f["static"] and f["field_mt"] and "`" not in mine[0].type:
                    # on 2.x CoreLib's (DateTime, CancellationToken) come from its NGEN image's compressed map
                    assert mine[0].field_method_table == f["field_mt"], (names[mt], mine[0].name)
                    structs += 1
            ptr = s.profile.pointer_size
            end = ptr if not lay.value_type else ptr
            for f in lay.fields:
                assert f.offset >= end and f.size > 0, (names[mt], f)
                end = f.end
            assert end <= lay.base_size - s.profile.object.header_size or lay.component_size, names[mt]
    assert compared > 400 and structs >= 1


def test_scan_keeps_to_the_gc_heap_of_a_python_host(python_host_core):
    """The checked scan against the DAC on a real pythonnet host: exactly the DAC's strings when the GC's
    bookkeeping bounds it; without the bookkeeping (the .NET Framework case), nothing of the native memory,
    only dead objects past the allocation end, which no pattern tells from live ones."""
    listing = python_host_core.dac_listing("--strings")
    dac = {int(a): v for a, v in listing["strings"].items()}
    segments = [(seg["start"], seg["end"]) for seg in listing["segments"]]
    with open_session(python_host_core.path, heap="scan") as s:
        assert s.heap.bounds
        ours = {x.address: x.value.encode("utf-16-le", "surrogatepass").hex() for x in s.strings()}
        room = s.profile.object.min_object_size
    # a string the thread was allocating when the core was taken: it starts in the room the GC keeps after an
    # allocation context's limit, which the DAC (as ClrMD) steps over; the scan keeps it
    limits = [limit for _, limit in listing["allocation_contexts"]]
    inflight = {a for a in set(ours) - set(dac) if any(0 <= a - limit < room for limit in limits)}
    assert len(inflight) <= 1
    assert len(ours) - len(inflight) == len(dac) > 10000 and {a: v for a, v in ours.items() if a not in inflight} == dac
    with open_session(python_host_core.path, heap="scan") as s:
        s.heap.bounds = None
        unbounded = {x.address for x in s.strings()}
    false = unbounded - set(dac)
    assert set(dac) <= unbounded and false
    # (but the string in flight, which the DAC steps over here too: it may end right at the segment's end)
    assert not [a for a in false - inflight if any(lo <= a < hi for lo, hi in segments)]
    # past the allocation end of a segment: dead objects in the GC's own memory; of native memory, at most a
    # stray String MethodTable in a runtime table that passes every check (1 in 91,455 measured; usually 0)
    ends = sorted(hi for _, hi in segments)
    native = [a for a in false if not any(0 <= a - end < 64 << 20 for end in ends)]
    assert len(native) <= 2 and len(native) * 10_000 < len(false), [hex(a) for a in native]


def _dac_heap(listing: dict, address: int) -> str:
    """The heap the DAC's segments put an object on, as clrlayout names heaps."""
    for seg in listing["segments"]:
        if seg["start"] <= address < max(seg["end"], seg["start"] + 1):
            kind = seg["kind"]
            if kind == "ephemeral":
                gen1, gen0 = seg["generation_starts"]
                return "gen0" if address >= gen0 else "gen1" if address >= gen1 else "gen2"
            return kind
    raise AssertionError(f"{address:#x} is on no segment of the DAC's")


def test_every_object_is_on_the_heap_the_dac_says(fresh_core):
    """gen0, gen1, gen2 (regions, or the ephemeral segment's generation starts), loh, poh, frozen."""
    listing = fresh_core.dac_listing()
    with open_session(fresh_core.path) as s:
        ours = {x.address: x.heap for x in s.strings()}
        by_object = {o.address: o.segment.generation(o.address) for o in s.objects()}
    assert {a: _dac_heap(listing, a) for a in by_object} == by_object
    assert {a: by_object[a] for a in ours} == ours
    heaps = set(by_object.values())
    assert {"gen2", "loh"} <= heaps and ("frozen" in heaps) == (int(fresh_core.runtime.split(".")[0]) >= 8)
