"""The WinDbg walk-through of .NET Framework strings (tests/data/netfx-windbg-strings.json), reproduced byte for byte.

Each object's recorded bytes become target memory; the dump path's decoder and profile read them back, and
every reading the walk-through states (size, padding, alignment, header bits, the extra 4 bytes on x64, the
next object's position and MethodTable) is checked against what clrlayout derives.
"""

from __future__ import annotations

import re

import pytest

from clrlayout.dump.addrspace import AddressSpace, BytesSource
from clrlayout.objects.layout import string_layout
from clrlayout.present.hexview import hex_dump
from clrlayout.runtime.profiles import select_profile
from clrlayout.objects.strings import object_span, read_string


def golden_space(arch_data: dict) -> AddressSpace:
    blob, regions = b"", []
    for obj in arch_data["objects"]:
        data = bytes.fromhex(obj["memory"]["hex"])
        regions.append((int(obj["memory"]["at"], 16), len(data), len(blob)))
        blob += data
    return AddressSpace(BytesSource(blob), regions, arch_data["pointer_size"])




@pytest.fixture(params=["x86", "x64"])
def arch(request):
    return request.param


def test_profile_offsets_match_sos(golden, arch):
    g = golden[arch]
    p = select_profile("netfx", arch, "4.8")
    assert p.pointer_size == g["pointer_size"]
    assert p.string.length_offset == g["sos_field_offsets"]["m_stringLength"]
    assert p.string.chars_offset == g["sos_field_offsets"]["m_firstChar"]


def test_every_golden_object(golden, arch):
    g = golden[arch]
    p = select_profile("netfx", arch, "4.8")
    space = golden_space(g)
    string_mt = int(g["string_method_table"], 16)
    ptr = g["pointer_size"]
    for obj in g["objects"]:
        address = int(obj["address"], 16)
        s = read_string(space, p, address)
        where = f"{arch} {obj['name']}"
        assert s.method_table == string_mt, where
        assert s.length == obj["length"], where
        assert s.value == obj["value"], where
        assert s.size == obj["size"], where  # SOS !DumpObj Size
        assert s.terminated, where

        # header: "thin lock owner 1"; "top bit set" = the string's no-high-chars bit
        state = s.header_state(p)
        assert state.kind == "thin_lock" and state.thread_id == obj["thinlock_owner"], where
        if any("top bit set" in r for r in obj["reading"]):
            assert s.header & 0x80000000, where
        assert (state.string_state == "no high chars") == bool(s.header & 0x80000000), where
        if ptr == 8:
            assert s.header_padding == 0, where

        text = " ".join(obj["reading"])
        # "(14 -> 16)": SOS size -> aligned size; "no padding": the two are equal
        m = re.search(r"\((\d+) -> (\d+)\)", text)
        if m:
            assert (s.size, s.aligned_size) == (int(m.group(1)), int(m.group(2))), where
        if "no padding" in text:
            assert s.aligned_size == s.size, where
        lay = string_layout(p, s.length, s, space.read(*object_span(p, address, s.length, False)))
        pad_rows = [r for r in lay.rows if r.role == "alignment"]
        m = re.search(r"(\d+) bytes (?:of )?padding (?:to|\()", text)  # alignment, not the header's padding
        if m:
            assert pad_rows and pad_rows[0].size == int(m.group(1)), where
        elif "00 00 padding" in text:
            assert pad_rows and pad_rows[0].size == 2, where
        if "no padding" in text:
            assert not pad_rows, where

        # the extra 4 bytes of .NET Framework x64: counted in Size, zero, right after the terminator
        extra = [r for r in lay.rows if r.role == "extra"]
        if "extra 4 bytes" in text or "the extra 4 bytes" in text:
            assert extra and extra[0].size == 4 and lay.bytes_of(extra[0]) == b"\0" * 4, where
            assert extra[0].offset == p.string.chars_offset + 2 * s.length + 2, where
        else:
            assert not extra, where

        # "<addr>: next object's header" / "C starts at <addr> (header)" / "<addr>: D's header"
        next_header = address - p.object.header_size + s.aligned_size
        for r in obj["reading"]:
            m = re.match(r"([0-9a-f]{4,8}): .*(?:next object's header|'s header)", r) or \
                re.search(r"starts at ([0-9a-f]{4,8}) \(header\)", r)
            if m:
                digits = m.group(1)  # WinDbg's readings give the low hex digits of the address
                assert next_header % (16 ** len(digits)) == int(digits, 16), (where, r)
            m = re.search(r"its MethodTable ([0-9a-f]{8,16})", r)
            if m:
                assert space.read_pointer(next_header + p.object.header_size) == int(m.group(1), 16), (where, r)

        # the annotated hex view prints the same bytes db printed
        lines = hex_dump(lay)
        printed = []
        for line in lines[0::2]:
            hexpart = line.split(" ", 1)[1][:48]  # after the address: 16 columns of " xx"
            printed += hexpart.replace("-", " ").split()
        recorded = obj["memory"]["hex"].split()
        assert printed == recorded[: len(printed)], where
        assert len(printed) == s.aligned_size, where


def test_word_read_rule_stated_by_the_source(golden):
    """'the extra 4 bytes make every 8-byte read of the chars stay inside the object' (x64); x86 4-byte reads."""
    rules = " ".join(golden["rules_stated_by_the_source"])
    assert "14 + 2*length" in rules and "26 + 2*length" in rules
    for arch in ("x86", "x64"):
        p = select_profile("netfx", arch, "4.8")
        for n in range(0, 64):
            assert string_layout(p, n).word_read_overrun() == (0, 0), (arch, n)
            assert p.string_size(n) == (14 if arch == "x86" else 26) + 2 * n
    # without the extra bytes (CoreCLR 3.0+ x64) the same reads do run past the object
    core = select_profile("coreclr", "x64", "3.1")
    assert max(string_layout(core, n).word_read_overrun()[0] for n in range(64)) == 4
