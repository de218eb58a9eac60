"""The vectorised walker against the reference walker: the same objects, in the same order, with the same
findings, whatever MethodTables are known when it starts and whatever the window size."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from tests.support.synth import SynthHeap, string_span
from tests.support.synth import PROFILES

from clrlayout.session import open_session
from clrlayout.heap.fastwalk import FastWalker
from clrlayout.findings import Findings
from clrlayout.heap.walk import HeapWalker
from clrlayout.limits import DEFAULT_LIMITS
from clrlayout.runtime.methodtable import MethodTables
from clrlayout.runtime.profiles import select_profile


def fast_objects(space, mts, segments, findings=None):
    return [(w.base + int(o), int(m), int(a)) for w in FastWalker(space, mts, findings).iter_windows(segments)
            for o, m, a in zip(w.offsets, w.method_tables, w.aligned)]


def ref_objects(space, mts, segments, findings=None):
    return [(o.address, o.method_table, o.aligned_size)
            for o in HeapWalker(space, mts, findings).iter_objects(segments)]


@pytest.mark.slow  # every sample x 3 windows x 3 states
@pytest.mark.parametrize("window", [4096, 1 << 16, 1 << 24])
@pytest.mark.parametrize("state", ["fresh", "string-mt-known", "all-known"])
def test_same_objects_as_the_reference(sample, window, state):
    limits = dataclasses.replace(DEFAULT_LIMITS, scan_window=window)
    with open_session(str(sample.path), limits=limits) as ref:
        want = ref_objects(ref.dump.memory, ref.mts, ref.heap.segments)
    with open_session(str(sample.path), limits=limits) as a:
        if state != "fresh":
            a.string_method_table()
        if state == "all-known":
            ref_objects(a.dump.memory, a.mts, a.heap.segments)
        assert fast_objects(a.dump.memory, a.mts, a.heap.segments) == want


@pytest.fixture(params=PROFILES, ids=lambda t: "-".join(t))
def profile(request):
    return select_profile(*request.param)


def _compare(h: SynthHeap, window: int = 4096):
    space = h.space()
    space.limits = dataclasses.replace(DEFAULT_LIMITS, scan_window=window)
    f1, f2 = Findings(), Findings()
    ref = ref_objects(space, MethodTables(space, h.profile), [h.segment()], f1)
    fast = fast_objects(space, MethodTables(space, h.profile), [h.segment()], f2)
    assert fast == ref
    assert [(f.kind, f.address) for f in f2] == [(f.kind, f.address) for f in f1]
    return ref, f1


def test_gaps_free_objects_and_look_alikes(profile):
    h = SynthHeap(profile)
    for i in range(300):
        h.add_string("s" * (i % 37))
        if i % 50 == 7:
            h.add_gap(64)
        if i % 60 == 3:
            h.add_free(96)
        if i % 45 == 1:
            a = h.add_object()  # an object holding the String MethodTable as data
            at = a - h.heap_base + profile.pointer_size
            h.heap[at : at + profile.pointer_size] = h.string_mt.to_bytes(profile.pointer_size, "little")
    objs, findings = _compare(h)
    assert len(objs) > 300 and findings.count == 0


def test_bad_objects_and_past_the_end(profile):
    h = SynthHeap(profile)
    h.add_string("before")
    h.add_object(mt=0x0000_0BAD_0000_0000 if profile.pointer_size == 8 else 0x0BAD0000)
    for i in range(20):
        h.add_string("after" * i)
    broken = h.add_string("x" * 40)
    at = broken - h.heap_base + profile.string.length_offset
    h.heap[at : at + 4] = (10_000).to_bytes(4, "little")
    objs, findings = _compare(h)
    assert [f.kind.slug for f in findings] == ["bad-method-table", "object-past-segment-end"]


def test_stale_strings_inside_free_objects(profile):
    h = SynthHeap(profile)
    h.add_string("live")
    free_at = h.cursor
    stale = string_span(profile, "stale", h.string_mt)
    h.add_free(profile.align(3 * profile.pointer_size + 4 * len(stale)))
    inner = free_at - h.heap_base + 3 * profile.pointer_size
    for k in range(3):
        h.heap[inner + k * len(stale) : inner + (k + 1) * len(stale)] = stale
    h.add_string("live 2")
    objs, _ = _compare(h, window=64)
    assert len(objs) == 3


@pytest.mark.parametrize("density", [0.0, 0.001, 0.05, 0.3, 1.0])
def test_positions_are_flatnonzero(density):
    """arrays.positions gives np.flatnonzero's indices, whatever the length (not a multiple of 8, shorter
    than 8) and the density, and for a slice that starts at an odd byte."""
    from clrlayout.util.arrays import positions

    rng = np.random.default_rng(7)
    for n in (0, 1, 7, 8, 9, 63, 64, 65, 4099, 524_801):
        flags = rng.random(n) < density
        for f in (flags, flags[3:], flags[::2]):
            got = positions(f)
            assert got.dtype == np.intp and np.array_equal(got, np.flatnonzero(f))


@pytest.mark.parametrize("runs", [1, 3, 1000])
def test_distinct_is_unique(runs):
    """arrays.distinct gives np.unique's values for arrays of runs of equal values (a window's MethodTables),
    of any length, a run at either end, values out of order."""
    from clrlayout.util.arrays import distinct

    rng = np.random.default_rng(runs)
    for n in (0, 1, 2, 5, 26_000):
        values = rng.choice(np.array([7, 0x7F0000001000, 3, 2**63 + 5, 0], dtype=np.uint64), size=max(runs, 1))
        column = np.repeat(values, rng.integers(1, 50, len(values)))[:n]
        for c in (column, column[::-1], column[1:]):
            got = distinct(c)
            assert got.dtype == c.dtype and np.array_equal(got, np.unique(c))


@pytest.mark.parametrize("window", [4096, 1 << 16])
def test_stale_objects_past_the_segment_end_are_not_findings(profile, window):
    """The gen0 tail past alloc_allocated often still holds objects, back to back with the last live one:
    the walk ends at the segment's end, with no finding, whatever the window (issue: a stale object that
    starts exactly at the end was reported as running past it)."""
    from clrlayout.heap.segments import Segment

    h = SynthHeap(profile)
    for i in range(400):
        h.add_string("live %d" % i + "x" * (i % 29))
    live_end = h.cursor  # the segment ends where the next object would start
    for i in range(50):
        h.add_string("stale, past the end %d" % i)
    space = h.space()
    space.limits = dataclasses.replace(DEFAULT_LIMITS, scan_window=window)
    hs = profile.object.header_size
    seg = Segment(start=h.heap_base + hs, end=live_end, kind="soh", ephemeral=True)
    f1, f2 = Findings(), Findings()
    ref = ref_objects(space, MethodTables(space, profile), [seg], f1)
    fast = fast_objects(space, MethodTables(space, profile), [seg], f2)
    assert len(ref) == 400 and fast == ref
    assert f1.count == 0 and f2.count == 0
