"""The public .NET Core 2.0 triage core (tests/data, from dotnet/symstore): BaseSize 26, almost no heap in the dump."""

from __future__ import annotations

import clrlayout
from clrlayout.session import open_session  # the engine under the model: the profile and MethodTable it chose


def test_exactly_the_strings_of_the_heap_page(triage_core, triage_truth):
    with open_session(str(triage_core)) as a:
        assert a.runtime.version.startswith("2.0.0-preview3")
        assert a.profile.string.base_size == 26  # the pre-3.0 layout, chosen by version
        assert not a.heap.exact  # the heap segments are not in a triage dump
        assert a.string_method_table() == int(triage_truth["string_method_table"], 16)
        mt = a.mts.get(a.string_method_table())
        assert (mt.flags, mt.base_size) == (int(triage_truth["string_mt_flags_basesize"][0], 16),
                                            triage_truth["string_mt_flags_basesize"][1])
        got = [(s.address, s.length, s.value) for s in a.iter_strings()]
    want = [(int(s["obj_addr"], 16), s["length"], s["value"]) for s in triage_truth["strings_in_heap_page"]]
    # the String MethodTable also sits in CoreLib's image: no false zero-length strings from there
    assert got == want
    for address, length, _ in got:
        assert address >> 12 == 0x7F7948037  # all in the one dumped heap page


def test_sizes_use_the_base_size_of_26(triage_core):
    with clrlayout.open(str(triage_core)) as d:
        strings = list(d.runtime.heap.strings())
    assert strings
    for s in strings:
        assert s.size == 26 + 2 * s.count
        assert s.aligned_size == (s.size + 7) & ~7
