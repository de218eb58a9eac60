"""The checked scan (heap/scan.py) on synthetic memory: what keeps it inside the GC heap.

Real cores are in test_dac.py (against the runtime's DAC); these isolate each rule: String MethodTable
pointers held by native structures, strings between two zeroed gaps, empty strings, the GC's bounds."""

from __future__ import annotations

import pytest

from tests.support.synth import SynthHeap, string_span
from tests.support.synth import PROFILES

from clrlayout.dump.addrspace import AddressSpace, BytesSource
from clrlayout.dump.model import DumpFile
from clrlayout.findings import Findings
from clrlayout.heap.scan import iter_string_addresses
from clrlayout.runtime.methodtable import MethodTables
from clrlayout.runtime.profiles import select_profile

NATIVE = {8: 0x0000_55C8_0000_0000, 4: 0x0800_0000}


@pytest.fixture(params=PROFILES, ids=lambda t: "-".join(t))
def profile(request):
    return select_profile(*request.param)


def dump_of(h: SynthHeap, native: bytes, tail: bytes = b"") -> tuple[DumpFile, int]:
    """A dump of the heap's MethodTables, its objects (then ``tail``: stale bytes past the heap's end), and
    a native memory region; returns it and the heap's end."""
    p = h.profile
    hs = p.object.header_size
    heap = bytes(h.heap) + tail + b"\0" * hs
    blob = bytes(h.mts) + heap + native
    regions = [(h.mt_base, len(h.mts), 0), (h.heap_base, len(heap), len(h.mts)),
               (NATIVE[p.pointer_size], len(native), len(h.mts) + len(heap))]
    space = AddressSpace(BytesSource(blob), regions, p.pointer_size)
    arch = "x64" if p.pointer_size == 8 else "x86"
    return DumpFile("<synthetic>", "minidump", arch, p.pointer_size, "windows", space), h.heap_base + len(h.heap) + hs


def live_heap(profile) -> tuple[SynthHeap, list[int]]:
    h = SynthHeap(profile)
    found = []
    for i in range(200):
        found.append(h.add_string(f"live {i} " + "z" * (i % 11)))
        if i % 37 == 5:
            h.add_gap(64)  # an allocation context's end: the next object follows a zeroed gap
        if i % 23 == 2:
            h.add_object()
    return h, found


def native_memory(profile, string_mt: int) -> bytes:
    """What native structures look like to a scan: String MethodTable pointers followed by zeros (empty
    "strings" between zero words) and a whole non-empty string between two zeroed gaps."""
    ptr = profile.pointer_size
    out = bytearray(b"\x5a" * 64)
    for _ in range(20):
        out += b"\0" * 32 + string_mt.to_bytes(ptr, "little") + b"\0" * 40
    out += b"\0" * 64 + string_span(profile, "copied into native memory", string_mt) + b"\0" * 64
    return bytes(out)


def scan(dump: DumpFile, h: SynthHeap, bounds=None) -> list[int]:
    mts = MethodTables(dump.memory, h.profile)
    return list(iter_string_addresses(dump, mts, h.string_mt, Findings(), bounds))


def test_native_look_alikes_are_not_strings(profile):
    h, live = live_heap(profile)
    dump, _ = dump_of(h, native_memory(profile, h.string_mt))
    assert scan(dump, h) == live


def test_an_empty_string_needs_objects_on_both_sides(profile):
    h, live = live_heap(profile)
    empty = h.add_string("")  # after a live object, before another: String.Empty among objects
    last = h.add_string("after the empty string")
    h.add_gap(48)
    lonely = h.add_string("")  # after a live object, before a gap: not how the runtime makes an empty string
    dump, _ = dump_of(h, b"\0" * 64)
    found = scan(dump, h)
    assert found == live + [empty, last] and lonely not in found


def test_the_gc_bounds_leave_out_the_stale_tail(profile):
    """Past the heap's end (alloc_allocated) lie dead objects no pattern tells from live ones: only the GC's
    bookkeeping does.  With its bounds the scan keeps inside them; without, it cannot (docs/limitations.md says so)."""
    h, live = live_heap(profile)
    tail = b"".join(string_span(profile, f"dead {i}", h.string_mt) for i in range(30))
    dump, end = dump_of(h, b"\0" * 64, tail)
    start = h.heap_base + profile.object.header_size
    assert scan(dump, h, bounds=[(start, end)]) == live
    unbounded = scan(dump, h)
    assert unbounded[: len(live)] == live and len(unbounded) == len(live) + 30
    # an open bound: a segment's start whose end the dump does not tell, as far as the memory goes
    assert scan(dump, h, bounds=[(start, None)]) == unbounded


def test_ranges_without_is_what_is_left():
    """util.ranges.without gives exactly the addresses of the runs that no excluded range covers (excluded
    ranges unsorted, overlapping, empty), in order, each piece non-empty."""
    import random

    from clrlayout.util.ranges import merged, without

    rng = random.Random(1)
    for _ in range(2000):
        runs = merged([(a, a + rng.randrange(1, 60)) for a in rng.sample(range(400), rng.randrange(8))])
        excluded = [(a, a + rng.randrange(50)) for a in (rng.randrange(420) for _ in range(rng.randrange(8)))]
        left = {x for lo, hi in runs for x in range(lo, hi)} - {x for lo, hi in excluded for x in range(lo, hi)}
        got = list(without(runs, excluded))
        assert all(lo < hi for lo, hi in got) and all(a[1] <= b[0] for a, b in zip(got, got[1:]))
        assert {x for lo, hi in got for x in range(lo, hi)} == left
