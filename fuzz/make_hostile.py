#!/usr/bin/env python3
"""The hand-made hostile dumps, one per hazard the code guards (tests/samples/test_robustness.py builds them).

    python fuzz/make_hostile.py OUT_DIR          # write them, to look at or to seed a fuzzer
    python fuzz/make_hostile.py --regressions    # rewrite the reduced fuzz crashers of tests/corpus/regressions/

Crashers found by the fuzz campaign are kept in tests/corpus/regressions/ (libFuzzer's file, renamed to say
what it hit), and the suite runs every file there.  A crasher reduced to a generator is listed in
REGRESSIONS, and the suite checks that the kept file is still what the generator writes.
"""

from __future__ import annotations

import struct
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT)]  # a script: the repository, for clrlayout and the tests' support package

from tests.support.synth import SynthHeap  # noqa: E402
from tests.support.synth_dump import build_minidump  # noqa: E402

from clrlayout.runtime.profiles import select_profile  # noqa: E402


def _synthetic(mutate=None) -> bytes:
    p = select_profile("coreclr", "x64", "3.1.23")
    h = SynthHeap(p)
    for i in range(20):
        h.add_string("hostile" * (i % 4))
    if mutate:
        mutate(h, p)
    return build_minidump(p, h)


def _patch_word(data: bytes, old: int, new: int, size: int = 8) -> bytes:
    """Replace every aligned occurrence of ``old`` (a pointer-sized value) with ``new``."""
    out = bytearray(data)
    needle = old.to_bytes(size, "little")
    at = out.find(needle)
    while at >= 0:
        if at % size == 0:
            out[at : at + size] = new.to_bytes(size, "little")
        at = out.find(needle, at + 1)
    return bytes(out)


def minidump_huge_counts() -> bytes:
    data = bytearray(_synthetic())
    struct.pack_into("<I", data, 8, 0xFFFFFFFF)  # NumberOfStreams
    n_rva = struct.unpack_from("<I", data, 12)[0]
    for i in range(3):  # every stream's count field
        kind, size, rva = struct.unpack_from("<III", data, n_rva + 12 * i)
        if kind == 9:
            struct.pack_into("<Q", data, rva, 1 << 63)
        elif kind == 4:
            struct.pack_into("<I", data, rva, 0xFFFFFFFF)
    return bytes(data)


def minidump_streams_past_the_end() -> bytes:
    data = bytearray(_synthetic())
    rva = struct.unpack_from("<I", data, 12)[0]
    for i in range(3):
        struct.pack_into("<II", data, rva + 12 * i + 4, 0xFFFFFFF0, 0xFFFFFF00)
    return bytes(data)


def minidump_overlapping_memory() -> bytes:
    data = bytearray(_synthetic())
    n_rva = struct.unpack_from("<I", data, 12)[0]
    for i in range(3):
        kind, size, rva = struct.unpack_from("<III", data, n_rva + 12 * i)
        if kind == 9:
            count = struct.unpack_from("<Q", data, rva)[0]
            first = struct.unpack_from("<Q", data, rva + 16)[0]
            for j in range(1, count):  # every range starts where the first does
                struct.pack_into("<Q", data, rva + 16 + 16 * j, first)
    return bytes(data)


def _elf_core(phdrs: list[bytes], notes: bytes = b"", phnum: int | None = None, phentsize: int = 56) -> bytes:
    header = b"\x7fELF\x02\x01\x01" + b"\0" * 9
    header += struct.pack("<HHIQQQIHHHHHH", 4, 62, 1, 0, 64, 0, 0, 64, phentsize,
                          len(phdrs) if phnum is None else phnum, 64, 0, 0)
    return header + b"".join(phdrs) + notes


def elf_note_bomb() -> bytes:
    notes = b"".join(struct.pack("<III", 0, 0, 1) for _ in range(200_000))
    offset = 64 + 56
    return _elf_core([struct.pack("<IIQQQQQQ", 4, 0, offset, 0, 0, len(notes), 0, 4)], notes)


def elf_huge_phnum() -> bytes:
    return _elf_core([struct.pack("<IIQQQQQQ", 1, 6, 0, 0x1000, 0, 1 << 40, 1 << 40, 0x1000)], phnum=65535)


def elf_zero_phentsize() -> bytes:
    return _elf_core([struct.pack("<IIQQQQQQ", 1, 6, 0, 0x1000, 0, 64, 64, 0x1000)], phentsize=0)


def synthetic_segment_loop() -> bytes:
    """The ephemeral heap_segment's `next` points to itself."""
    p = select_profile("coreclr", "x64", "3.1.23")
    data = bytearray(_synthetic())
    seg = 0x0000_0200_0000_0000
    at = data.find(struct.pack("<Q", seg + 0x1000), 0)  # the segment header's `mem` field
    while at >= 0 and at % 8:
        at = data.find(struct.pack("<Q", seg + 0x1000), at + 1)
    struct.pack_into("<Q", data, at + 2 * p.pointer_size, seg)  # mem @4P -> next @6P
    return bytes(data)


def synthetic_length_bomb() -> bytes:
    def mutate(h, p):
        a = h.add_string("x" * 40)
        at = a - h.heap_base + p.string.length_offset
        h.heap[at : at + 4] = (0x3FFFFFDF).to_bytes(4, "little")
        h.add_string("after")
    return _synthetic(mutate)


def synthetic_method_table_is_its_own_parent() -> bytes:
    def mutate(h, p):
        at = h.object_mt - h.mt_base + p.method_table.fields["m_pParentMethodTable"].offset
        h.mts[at : at + 8] = h.object_mt.to_bytes(8, "little")
        h.mts[h.string_mt - h.mt_base + 4 : h.string_mt - h.mt_base + 8] = (0xFFFFFFF0).to_bytes(4, "little")
    return _synthetic(mutate)


def synthetic_gcdacvars_lookalike() -> bytes:
    """max_gen says 2, but every other pointer of GcDacVars leads nowhere."""
    data = bytearray(_synthetic())
    at = data.find(struct.pack("<QQ", 1, 240))
    for i in range(2, 28):
        if i != 6:  # keep max_gen
            struct.pack_into("<Q", data, at + 8 * i, 0xDEAD0000 + 8 * i)
    return bytes(data)


def synthetic_garbage_heap(size: int = 3 << 20) -> bytes:
    """3 MB of random words at the start of the heap, before the only string: every word is a resync probe
    (this once took seconds per MB, copying the rest of the window for each word)."""
    import random

    p = select_profile("coreclr", "x64", "3.1.23")
    h = SynthHeap(p)
    h.add_raw(random.Random(6).randbytes(size))
    h.add_string("after the garbage")
    return build_minidump(p, h)


def synthetic_high_addresses() -> bytes:
    """Module, MethodTables and heap all above 2**63 (addresses do not fit a signed 64-bit integer).

    The reduction of the campaign's first crasher: an OverflowError in numpy index arithmetic (fixed in
    77818e8, address arithmetic in uint64)."""
    p = select_profile("coreclr", "x64", "3.1.23")
    h = SynthHeap(p, mt_base=0xFFFF_8000_0000_1000)
    for i in range(20):
        h.add_string("high" * (i % 5))
    return build_minidump(p, h, module_base=0xFFFF_9000_0000_0000, segment_base=0xFFFF_A000_0000_0000)


HOSTILE = {
    "minidump-huge-counts.dmp": minidump_huge_counts,
    "minidump-streams-past-the-end.dmp": minidump_streams_past_the_end,
    "minidump-overlapping-memory.dmp": minidump_overlapping_memory,
    "elf-note-bomb.core": elf_note_bomb,
    "elf-huge-phnum.core": elf_huge_phnum,
    "elf-zero-phentsize.core": elf_zero_phentsize,
    "synthetic-segment-loop.dmp": synthetic_segment_loop,
    "synthetic-length-bomb.dmp": synthetic_length_bomb,
    "synthetic-method-table-own-parent.dmp": synthetic_method_table_is_its_own_parent,
    "synthetic-gcdacvars-lookalike.dmp": synthetic_gcdacvars_lookalike,
    "synthetic-garbage-heap.dmp": synthetic_garbage_heap,
}


REGRESSIONS = {
    "crash-overflow-high-addresses.dmp": synthetic_high_addresses,
}


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    if sys.argv[1] == "--regressions":
        out, made = ROOT / "tests" / "corpus" / "regressions", REGRESSIONS
    else:
        out, made = Path(sys.argv[1]), HOSTILE
    out.mkdir(parents=True, exist_ok=True)
    for name, make in made.items():
        (out / name).write_bytes(make())
    print(f"{len(made)} dumps in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
