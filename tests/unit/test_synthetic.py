"""Unit tests on synthetic target memory built with the profiles' own construct structs."""

from __future__ import annotations

import pytest

from tests.support.synth import PROFILES, SynthHeap, string_span

from clrlayout.dump.addrspace import AddressSpace, BytesSource
from clrlayout.errors import AddressError, DecodeError, LimitExceeded
from clrlayout.findings import FindingKind, Findings
from clrlayout.objects.header import decode_header
from clrlayout.heap.walk import HeapWalker
from clrlayout.objects.layout import string_layout
from clrlayout.runtime.methodtable import MethodTables
from clrlayout.runtime.profiles import select_profile
from clrlayout.objects.strings import read_string
from clrlayout.runtime.structs import ClrStructs



@pytest.fixture(params=PROFILES, ids=lambda t: "-".join(t))
def profile(request):
    return select_profile(*request.param)


def walk(heap: SynthHeap, findings=None):
    space = heap.space()
    mts = MethodTables(space, heap.profile)
    findings = findings if findings is not None else Findings()
    return list(HeapWalker(space, mts, findings).iter_segment(heap.segment())), mts, findings, space


# --- structs ----------------------------------------------------------------------------------------


def test_method_table_struct_round_trip(profile):
    s = ClrStructs.of(profile)
    values = {f.name: i + 1 for i, f in enumerate(profile.method_table.fields.values())}
    values.update(m_dwFlags=0x80000002, m_BaseSize=profile.string.base_size)
    data = s.method_table.build(values)
    assert len(data) == profile.method_table.size == s.method_table.sizeof()
    parsed = s.method_table.parse(data)
    for name, v in values.items():
        assert parsed[name] == v
    assert parsed.component_size == 2 and parsed.has_component_size
    for f in profile.method_table.fields.values():  # each field at its profile offset
        assert int.from_bytes(data[f.offset : f.offset + f.size], "little") == values[f.name]


@pytest.mark.parametrize("value", ["", "a", "ab", "abc", "Grüße", "😀", "lone \ud800", "nul\0", "x" * 100])
def test_string_struct_round_trip(profile, value):
    data = string_span(profile, value, 0x1234560, sync=0x08000005)
    units = len(value.encode("utf-16-le", "surrogatepass")) // 2
    assert len(data) == profile.string_aligned_size(units)
    obj = ClrStructs.of(profile).string_object().parse(data)
    assert obj.m_FirstChar == value
    assert obj.prefix.m_StringLength == units
    assert obj.prefix.m_pMethTab == 0x1234560
    assert obj.sos_size == profile.string.base_size + 2 * units
    assert obj.terminator == 0
    # raw offsets: length and characters where the profile says
    hs = profile.object.header_size
    assert int.from_bytes(data[hs + profile.string.length_offset:][:4], "little") == units
    assert data[hs + profile.string.chars_offset:][: 2 * units] == value.encode("utf-16-le", "surrogatepass")
    assert int.from_bytes(data[hs - 4 : hs], "little") == 0x08000005


# --- heap walk --------------------------------------------------------------------------------------


def test_walk_finds_every_object_and_only_strings_are_strings(profile):
    h = SynthHeap(profile)
    expected = [h.add_string("first"), h.add_object(), h.add_string(""), h.add_free(64),
                h.add_string("after free", sync=1)]
    h.add_gap(64)  # an allocation context: zeroed
    expected.append(h.add_string("after gap"))
    objs, mts, findings, space = walk(h)
    assert [o.address for o in objs] == [a for a in expected]
    kinds = [o.type.kind for o in objs]
    assert kinds == ["string", "class", "string", "free", "string", "string"]
    assert findings.count == 0
    s = read_string(space, profile, expected[4])
    assert s.value == "after free" and s.header == 1


def test_stale_string_inside_free_object_is_not_an_object(profile):
    h = SynthHeap(profile)
    first = h.add_string("live")
    free_at = h.cursor
    stale = string_span(profile, "stale bytes", h.string_mt)
    size = profile.align(3 * profile.pointer_size + len(stale) + 16)
    h.add_free(size)
    # write a whole dead string inside the free object's payload
    inner = (free_at - h.heap_base) + 3 * profile.pointer_size
    h.heap[inner : inner + len(stale)] = stale
    last = h.add_string("live 2")
    objs, mts, findings, _ = walk(h)
    strings = [o.address for o in objs if o.type.kind == "string"]
    assert strings == [first, last]


def test_bad_method_table_is_a_finding_and_the_walk_resyncs(profile):
    h = SynthHeap(profile)
    first = h.add_string("before")
    bad = h.add_object(mt=0x0000_0BAD_0000_0000 if profile.pointer_size == 8 else 0x0BAD0000)
    after = h.add_string("after the bad one")
    objs, _, findings, _ = walk(h)
    assert [o.address for o in objs] == [first, after]
    assert [f.kind for f in findings] == [FindingKind.BAD_METHOD_TABLE]
    assert findings.items[0].address == bad


def test_object_past_segment_end(profile):
    h = SynthHeap(profile)
    ok = h.add_string("fine")
    broken = h.add_string("x" * 40)
    # claim a length far larger than what is left in the segment
    at = broken - h.heap_base + profile.string.length_offset
    h.heap[at : at + 4] = (10_000).to_bytes(4, "little")
    objs, _, findings, _ = walk(h)
    assert [o.address for o in objs] == [ok]
    assert findings.items[0].kind == FindingKind.OBJECT_PAST_SEGMENT_END


def test_missing_memory_is_a_finding(profile):
    h = SynthHeap(profile)
    h.add_string("in the dump")
    seg = h.segment()
    space = h.space()
    # the segment claims 1 MB more than the dump holds
    from clrlayout.heap.segments import Segment

    longer = Segment(seg.start, seg.end + 0x100000, "soh")
    findings = Findings()
    objs = list(HeapWalker(space, MethodTables(space, profile), findings).iter_segment(longer))
    assert len(objs) == 1
    assert [f.kind for f in findings] == [FindingKind.MEMORY_MISSING]


def test_unterminated_and_bad_padding_are_findings(profile):
    h = SynthHeap(profile)
    a = h.add_string("no terminator", terminator=0x41)
    b = h.add_string("bad pad", pad=1 if profile.object.header_size == 8 else 0)
    space = h.space()
    findings = Findings()
    s = read_string(space, profile, a, findings=findings)
    assert not s.terminated and s.value == "no terminator"
    read_string(space, profile, b, findings=findings)
    kinds = [f.kind for f in findings]
    assert FindingKind.STRING_NOT_TERMINATED in kinds
    assert (FindingKind.STRING_BAD_HEADER_PADDING in kinds) == (profile.object.header_size == 8)


def test_huge_length_is_refused_before_reading(profile):
    h = SynthHeap(profile)
    a = h.add_string("x")
    at = a - h.heap_base + profile.string.length_offset
    h.heap[at : at + 4] = (0x7FFFFFFF).to_bytes(4, "little")
    with pytest.raises(LimitExceeded):
        read_string(h.space(), profile, a)


def test_wrong_base_size_in_profile_finds_no_string_type(profile):
    import dataclasses

    h = SynthHeap(profile)
    h.add_string("x")
    wrong = dataclasses.replace(profile, string=dataclasses.replace(profile.string, base_size=profile.string.base_size + 2))
    mts = MethodTables(h.space(), wrong)
    assert mts.get(h.string_mt).kind != "string"
    assert MethodTables(h.space(), profile).get(h.string_mt).kind == "string"
    assert MethodTables(h.space(), profile).get(h.free_mt).kind == "free"
    assert MethodTables(h.space(), profile).get(h.object_mt).kind == "object"


# --- layout -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("n", range(0, 12))
def test_layout_rows_cover_the_object(profile, n):
    lay = string_layout(profile, n)
    assert lay.rows[0].offset == -profile.object.header_size
    pos = lay.rows[0].offset
    for r in lay.rows:
        assert r.offset == pos
        pos = r.end
    assert pos == lay.aligned_size - profile.object.header_size
    internal, external = lay.losses()
    assert external == lay.aligned_size - lay.sos_size
    assert internal == profile.object.header_size - 4 + profile.string_extra_bytes


# --- header word ------------------------------------------------------------------------------------


def test_header_states_core31():
    spec = select_profile("coreclr", "x64", "3.1").header
    assert decode_header(0x00000001, spec).kind == "thin_lock"
    nested = decode_header(0x00000401, spec)
    assert (nested.thread_id, nested.recursion) == (1, 1)
    h = decode_header(0x0EA125D8, spec)  # clr-layout-facts §4 [emp]
    assert h.kind == "hash" and h.hash_code == 0x02A125D8
    sb = decode_header(0x08000003, spec)
    assert sb.kind == "sync_block" and sb.sync_block_index == 3
    fast = decode_header(0x80000001, spec)
    assert fast.string_state == "no high chars" and fast.thread_id == 1
    assert decode_header(0x40000000, spec, is_string=False).flags == ("finalizer run",)


def test_header_thin_lock_widened_in_net8():
    spec = select_profile("coreclr", "x64", "8.0").header
    h = decode_header(0x00012345, spec)
    assert (h.thread_id, h.recursion) == (0x2345, 1)
    old = decode_header(0x00012345, select_profile("coreclr", "x64", "3.1").header)
    assert (old.thread_id, old.recursion) == (0x345, 8)


# --- address space ----------------------------------------------------------------------------------


def test_address_space_reads_across_adjacent_regions_and_names_missing_bytes():
    blob = bytes(range(256)) * 2
    space = AddressSpace(BytesSource(blob), [(0x1000, 256, 0), (0x1100, 256, 256), (0x3000, 16, 0)], 8)
    assert space.read(0x10F0, 32) == blob[0xF0:0x110]
    assert space.read_pointer(0x1000) == int.from_bytes(blob[:8], "little")
    with pytest.raises(AddressError) as e:
        space.read(0x11F0, 32)
    assert e.value.missing_at == 0x1200 and "0x1200" in str(e.value)
    assert space.try_read(0x11F0, 32) is None
    assert space.read_available(0x11F0, 32) == blob[256 + 0xF0 : 512]
    assert list(space.iter_runs()) == [(0x1000, 0x1200), (0x3000, 0x3010)]
    assert space.is_mapped(0x1000, 0x200) and not space.is_mapped(0x1000, 0x201)


def test_overlapping_regions_are_clipped():
    space = AddressSpace(BytesSource(b"A" * 32 + b"B" * 32), [(0x1000, 32, 0), (0x1010, 32, 32)], 4)
    assert space.overlaps == 1
    assert space.read(0x1000, 48) == b"A" * 32 + b"B" * 16


def test_pointer_size_comes_from_the_dump_not_the_host():
    blob = (0x11223344).to_bytes(4, "little") + (0x55667788).to_bytes(4, "little")
    assert AddressSpace(BytesSource(blob), [(0, 8, 0)], 4).read_pointer(0) == 0x11223344
    assert AddressSpace(BytesSource(blob), [(0, 8, 0)], 8).read_pointer(0) == 0x5566778811223344


def test_decode_error_is_typed(profile):
    from clrlayout.objects.strings import decode_string_bytes

    with pytest.raises(DecodeError):
        decode_string_bytes(profile, 0x1000, b"\0" * 4)
