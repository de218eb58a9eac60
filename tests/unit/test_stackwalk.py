"""The stack walker's parts on memory made here (issue 49, item 2): x64 unwind codes as Microsoft's x64
exception-handling documentation defines them (learn.microsoft.com/cpp/build/exception-handling-x64: the prolog's
operations undone in order, only those the IP has passed, SAVE_NONVOL relative to the establisher frame, chained
entries), an interrupted epilog read from its instructions, and the nibble map's two encodings (codeman.h); then
the whole walker over random memory: it ends, and says why it stopped, whatever the bytes (the real walk is checked
against the DAC in tests/oracle/test_stacks.py)."""

from __future__ import annotations

import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clrlayout.runtime.codemap import CodeMap, CodeMapUnreadable
from clrlayout.runtime.stackwalk import StackWalker
from clrlayout.runtime.unwind import UnwindError, unwind

BASE = 0x10000
STACK = 0x7000_0000


class Memory:
    """Sparse memory: pieces of bytes at addresses; a read across a hole is None."""

    pointer_size = 8

    def __init__(self):
        self.pieces: dict[int, bytes] = {}

    def put(self, address: int, data: bytes) -> None:
        self.pieces[address] = data

    def try_read(self, address: int, size: int):
        for start, data in self.pieces.items():
            if start <= address and address + size <= start + len(data):
                return data[address - start : address - start + size]
        return None

    def try_read_pointer(self, address: int):
        data = self.try_read(address, 8)
        return None if data is None else int.from_bytes(data, "little")

    def try_read_u32(self, address: int):
        data = self.try_read(address, 4)
        return None if data is None else int.from_bytes(data, "little")


def unwind_info(prolog: int, codes: list[tuple[int, int, int]], frame_reg: int = 0, frame_off: int = 0,
                flags: int = 0, extra: list[int] = ()) -> bytes:
    """UNWIND_INFO: version 1, flags, prolog size, the codes (offset, op, info) in order, operand slots after."""
    slots = b"".join(bytes([o, op | info << 4]) for o, op, info in codes) + b"".join(struct.pack("<H", e)
                                                                                       for e in extra)
    count = len(slots) // 2
    body = bytes([1 | flags << 3, prolog, count, frame_reg | frame_off << 4]) + slots
    return body + (b"\0\0" if count % 2 else b"")


def stack(sp: int, words: list[int], mem: Memory) -> None:
    mem.put(sp, b"".join(w.to_bytes(8, "little") for w in words))


def test_push_alloc_and_frame_pointer():
    # push rbp (off 1); push rbx (2); sub rsp, 0x28 (6); lea rbp, [rsp+0x20] (11): rbp = rsp + 0x20
    mem = Memory()
    codes = [(11, 3, 0), (6, 2, 4), (2, 0, 3), (1, 0, 5)]  # SET_FPREG, ALLOC_SMALL 0x28, PUSH rbx, PUSH rbp
    mem.put(BASE + 0x100, unwind_info(11, codes, frame_reg=5, frame_off=2))
    sp = STACK
    # after the prolog: [sp, sp+0x28) locals, then saved rbx, saved rbp, return address
    stack(sp, [0] * 5 + [0xBB, 0xB0, 0x4242], mem)
    ctx = {"rip": BASE + 0x40, "rsp": sp, "rbp": sp + 0x20, "rbx": 1}
    caller = unwind(mem, ctx, BASE, (0x20, 0x80, 0x100))
    assert caller["rip"] == 0x4242 and caller["rsp"] == sp + 0x40
    assert caller["rbx"] == 0xBB and caller["rbp"] == 0xB0
    # the same frame interrupted after `push rbp; push rbx` only: the later codes are not undone
    stack(sp, [0xBB, 0xB0, 0x4343], mem)
    early = unwind(mem, {"rip": BASE + 0x20 + 2, "rsp": sp, "rbp": 5, "rbx": 1}, BASE, (0x20, 0x80, 0x100),
                   leaf=True)
    assert early["rip"] == 0x4343 and early["rsp"] == sp + 24 and (early["rbx"], early["rbp"]) == (0xBB, 0xB0)


def test_large_allocation_saved_register_and_chain():
    mem = Memory()
    # ALLOC_LARGE info 0 (size/8 in one slot): 0x1000; SAVE_NONVOL rsi at establisher + 0x18 (slot: 3)
    info = bytes([1, 9, 4, 0]) + bytes([9, 4 | 6 << 4]) + struct.pack("<H", 3) + bytes([7, 1]) + \
        struct.pack("<H", 0x1000 // 8)
    mem.put(BASE + 0x200, info)
    sp = STACK
    stack(sp, [0, 0, 0, 0x51] + [0] * (0x1000 // 8 - 4) + [0x4444], mem)
    caller = unwind(mem, {"rip": BASE + 0x50, "rsp": sp, "rsi": 7}, BASE, (0x30, 0x90, 0x200))
    assert caller["rsi"] == 0x51 and caller["rsp"] == sp + 0x1008 and caller["rip"] == 0x4444
    # a chained entry (a funclet's or a split function's): its own codes, then its parent's
    parent = unwind_info(1, [(1, 0, 5)])  # push rbp
    mem.put(BASE + 0x300, parent)
    child = unwind_info(4, [(4, 2, 1)], flags=4)  # ALLOC_SMALL 0x10, chained to the parent
    mem.put(BASE + 0x400, child + struct.pack("<III", 0x10, 0x20, 0x300))
    stack(sp, [0, 0, 0xB0, 0x4545], mem)
    caller = unwind(mem, {"rip": BASE + 0x60, "rsp": sp, "rbp": 1}, BASE, (0x50, 0x70, 0x400))
    assert caller["rsp"] == sp + 32 and caller["rbp"] == 0xB0 and caller["rip"] == 0x4545


def test_an_interrupted_epilog_is_read_from_its_instructions():
    mem = Memory()
    mem.put(BASE + 0x100, unwind_info(2, [(2, 0, 3), (1, 0, 5)]))  # push rbp; push rbx
    # add rsp, 16; pop rbx; pop rbp; ret (then int3 padding)
    mem.put(BASE + 0x58, bytes([0x48, 0x83, 0xC4, 0x10, 0x5B, 0x5D, 0xC3]) + b"\xcc" * 9)
    sp = STACK
    stack(sp, [0, 0, 0xBB, 0xB0, 0x4646], mem)
    caller = unwind(mem, {"rip": BASE + 0x58, "rsp": sp, "rbx": 1, "rbp": 2}, BASE, (0x20, 0x80, 0x100), leaf=True)
    assert (caller["rip"], caller["rsp"], caller["rbx"], caller["rbp"]) == (0x4646, sp + 40, 0xBB, 0xB0)


def test_unreadable_unwind_data_and_stack_say_so():
    mem = Memory()
    with pytest.raises(UnwindError, match="unwind data"):
        unwind(mem, {"rip": BASE + 1, "rsp": STACK}, BASE, (0, 8, 0x100))
    mem.put(BASE + 0x100, unwind_info(0, []))
    with pytest.raises(UnwindError, match="stack"):
        unwind(mem, {"rip": BASE + 1, "rsp": STACK}, BASE, (0, 8, 0x100))


TYPES = {"RangeSectionMap": {"TopLevelData": 0}, "RangeSectionFragment": {"Next": 0, "RangeBegin": 8,
                                                                         "RangeEndOpen": 16, "RangeSection": 24},
         "RangeSection": {"RangeBegin": 0, "RangeEndOpen": 8, "Flags": 16, "JitManager": 24, "R2RModule": 32,
                          "HeapList": 40, "NextForDelete": 64},
         "CodeHeapListNode": {"Next": 0, "StartAddress": 16, "EndAddress": 24, "MapBase": 32, "HeaderMap": 40},
         "RealCodeHeader": {"MethodDesc": 24, "GCInfo": 16, "NumUnwindInfos": 32, "UnwindInfos": 36},
         "Module": {"ReadyToRunInfo": 704}, "ReadyToRunInfo": {"RuntimeFunctions": 80, "NumRuntimeFunctions": 88,
                                                               "EntryPointToMethodDescMap": 360},
         "HashMap": {"Buckets": 16}, "Bucket": {"!": 64, "Keys": 0, "Values": 32}, "Frame": {"Next": 8},
         "InlinedCallFrame": {"CallSiteSP": 24, "CallerReturnAddress": 32, "CalleeSavedFP": 40, "Datum": 16}}


@pytest.mark.parametrize("pointers", [False, True])
def test_the_nibble_map_finds_a_method_s_start(pointers):
    """Code at map_base + 0x130 (bucket 9, nibble 5: the second nibble of the second unit); an IP 0x200 bytes into
    it is found by the backward search (the linear map), or by the relative pointer .NET 10 writes into every unit
    the code covers (the constant-time map)."""
    mem = Memory()
    map_base, header_map = 0x40_0000, 0x50_0000
    units = [0] * 16
    units[1] = 0x5 << 24
    if pointers:
        for u in range(2, 6):
            units[u] = 0x130 & ~0xF | ((0x130 & 0xF) >> 2) + 9
    mem.put(header_map, b"".join(struct.pack("<I", u) for u in units))
    cm = CodeMap(mem, TYPES, {"ExecutionManagerCodeRangeMapAddress": 0}, pointers)
    assert cm._method_start(map_base, header_map, map_base + 0x132) == map_base + 0x130
    assert cm._method_start(map_base, header_map, map_base + 0x330) == map_base + 0x130
    assert cm._method_start(map_base, header_map, map_base + 0x12E) is None


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(st.binary(min_size=64, max_size=4096), st.integers(0, 255), st.binary(min_size=0, max_size=2048))
def test_the_walker_ends_on_any_bytes(code_map, level, stack_bytes):
    """The range section map, its levels, fragments and the stack filled with arbitrary bytes: every walk ends with
    frames and, where it stopped early, a reason — never another exception, never a loop."""
    mem = Memory()
    top = 0x1000_0000
    mem.put(top, code_map)
    for i in range(0, len(code_map) - 8, 8):  # pointers inside the map lead back into it
        word = int.from_bytes(code_map[i : i + 8], "little")
        if word % 7 == 0:
            mem.put(top + i, (top + (word % len(code_map)) // 8 * 8).to_bytes(8, "little"))
    mem.put(STACK, stack_bytes)
    globals_ = {"ExecutionManagerCodeRangeMapAddress": top, "StubCodeBlockLast": 0xF}
    walker = StackWalker(mem, CodeMap(mem, TYPES, globals_, level % 2 == 0), TYPES, globals_, {1: "InlinedCallFrame"})
    ip = top + level * 8
    walk = walker.walk({"rip": ip, "rsp": STACK, "rbp": STACK}, STACK + 16)
    assert len(walk.frames) <= 10_000
    assert isinstance(walk.error, str)
    try:
        CodeMap(mem, TYPES, globals_, False).find(ip)
    except CodeMapUnreadable:
        pass


@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(st.binary(min_size=0, max_size=512), st.integers(0, 4096), st.sampled_from([1, 2, 4]), st.booleans())
def test_gc_info_of_any_bytes_decodes_or_says_why(data, offset, version, active):
    """Random bytes as GC info: the decoder answers, or raises GcInfoError, within its bounds (no other exception,
    no endless number, no huge table)."""
    from clrlayout.runtime.gcinfo import GcInfoError, live_slots

    mem = Memory()
    mem.put(BASE, data)
    try:
        live = live_slots(mem.try_read, BASE, offset, version, active)
    except GcInfoError:
        return
    assert len(live.tracked) + len(live.untracked) <= 1 << 16
