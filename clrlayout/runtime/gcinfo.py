"""The JIT's GC info for x64 code: which stack slots and registers hold live object references at an instruction
(dotnet/runtime src/coreclr/vm/gcinfodecoder.cpp ``GcInfoDecoder`` and ``GcSlotDecoder``, gcinfotypes.h's AMD64
encoding bases; docs/design/datacontracts/GCInfo.md).

A bit stream read least significant bit first: a slim or fat header (code length, prolog, GS cookie, generic
context, stack base register, the outgoing argument area, the number of safe points and interruptible ranges),
the safe points (call return offsets, minus one), the interruptible ranges, the slot table (registers, tracked
stack slots, untracked stack slots; each with its base — caller SP, SP or the frame register — and flags:
interior, pinned), then the live states: one bit vector per safe point (or run-length encoded, through an offset
table), and for fully interruptible code, chunks of 64 code offsets each with the slots that could be live, their
state at the chunk's end and their transitions.  Untracked slots are live everywhere in the method.

``version``: the runtime's GCINFO_VERSION (the contract descriptor's ``GCInfoVersion``): 4 from .NET 10 (no return
kind, no PSPSym); before, the header also holds the return kind and, on x64, the PSPSym's slot."""

from __future__ import annotations

from dataclasses import dataclass

#: gcinfotypes.h, AMD64
CODE_LENGTH, NORM_PROLOG_SIZE, NORM_EPILOG_SIZE = 8, 5, 3
GS_COOKIE_SLOT, PSP_SYM_SLOT, GENERICS_CONTEXT_SLOT, SECURITY_OBJECT_SLOT = 6, 6, 6, 6
STACK_BASE_REGISTER, SIZE_OF_STACK_AREA, ENC_PRESERVED_AREA, REVERSE_PINVOKE_FRAME = 3, 3, 4, 6
NUM_SAFE_POINTS, NUM_INTERRUPTIBLE_RANGES, RANGE_DELTA1, RANGE_DELTA2 = 2, 1, 6, 6
NUM_REGISTERS, NUM_STACK_SLOTS, NUM_UNTRACKED = 2, 2, 1
REGISTER, REGISTER_DELTA, STACK_SLOT, STACK_SLOT_DELTA = 3, 2, 6, 4
POINTER_SIZE, RLE_RUN, RLE_SKIP = 3, 2, 4
CHUNK_LOG2 = 6
CHUNK = 1 << CHUNK_LOG2
FLAGS_BITS, FLAGS_BITS_V1 = 10, 9
RETURN_KIND_SLIM, RETURN_KIND_FAT = 2, 4
HAS_SECURITY_OBJECT, HAS_GS_COOKIE, HAS_PSP_SYM, GENERICS_MASK = 0x2, 0x4, 0x8, 0x30
HAS_STACK_BASE_REGISTER, WANTS_REPORT_ONLY_LEAF, HAS_ENC_INFO, HAS_REVERSE_PINVOKE = 0x40, 0x80, 0x100, 0x200
#: slot flags and bases
INTERIOR, PINNED = 0x1, 0x2
CALLER_SP_REL, SP_REL, FRAMEREG_REL = 0, 1, 2
#: bounds on what a dump's bytes can make the decoder do
MAX_SLOTS, MAX_SAFE_POINTS, MAX_RANGES, MAX_BITS = 1 << 16, 1 << 20, 1 << 16, 1 << 26


class GcInfoError(Exception):
    """The GC info cannot be decoded (not in the dump, or not GC info)."""


class _Bits:
    """A bit stream over bytes read on demand: ``read(address, size)`` gives the bytes (None: not there)."""

    def __init__(self, read, address: int):
        self._read = read
        self._address = address
        self._data = b""
        self.pos = 0

    def _ensure(self, end_bit: int) -> None:
        need = (end_bit + 7) // 8
        if need <= len(self._data):
            return
        if end_bit > MAX_BITS:
            raise GcInfoError("GC info runs on without end")
        want = max(need, len(self._data) * 2, 256)
        data = self._read(self._address, want)
        while data is None and want > need:
            want = max(need, want // 2)
            data = self._read(self._address, want)
        if data is None or len(data) < need:
            raise GcInfoError(f"the GC info at {self._address:#x} is not in the dump")
        self._data = data

    def read(self, n: int) -> int:
        if n == 0:
            return 0
        self._ensure(self.pos + n)
        byte, bit = self.pos >> 3, self.pos & 7
        chunk = int.from_bytes(self._data[byte : byte + (bit + n + 7) // 8], "little")
        self.pos += n
        return (chunk >> bit) & ((1 << n) - 1)

    def one(self) -> int:
        return self.read(1)

    def unsigned(self, base: int) -> int:
        result, shift = 0, 0
        for _ in range(64 // base + 1):
            chunk = self.read(base + 1)
            result |= (chunk & ((1 << base) - 1)) << shift
            if not chunk >> base:
                return result
            shift += base
        raise GcInfoError("a variable-length number runs on without end")

    def signed(self, base: int) -> int:
        result, shift = 0, 0
        for _ in range(64 // base + 1):
            chunk = self.read(base + 1)
            result |= (chunk & ((1 << base) - 1)) << shift
            shift += base
            if not chunk >> base:
                return result - (1 << shift) if result >> (shift - 1) & 1 else result
        raise GcInfoError("a variable-length number runs on without end")


@dataclass(frozen=True)
class Slot:
    """A place a reference may live: a register (its x64 number) or a stack slot (offset from its base)."""

    register: int | None
    offset: int
    base: int
    flags: int

    def describe(self) -> str:
        from .unwind import REGISTERS

        if self.register is not None:
            return REGISTERS[self.register] if self.register < len(REGISTERS) else f"r{self.register}"
        base = {CALLER_SP_REL: "caller-sp", SP_REL: "rsp", FRAMEREG_REL: "frame"}[self.base]
        return f"[{base}{self.offset:+#x}]"


@dataclass(frozen=True)
class LiveSlots:
    #: the tracked slots live at the offset, and the untracked ones (live wherever the method is)
    tracked: tuple[Slot, ...]
    untracked: tuple[Slot, ...]
    #: the register a FRAMEREG_REL slot is relative to (None: none), and the size of the outgoing argument area
    stack_base_register: int | None
    outgoing_area: int


def live_slots(read, address: int, offset: int, version: int, active: bool) -> LiveSlots:
    """The slots of the method whose GC info is at ``address`` that hold live references at code ``offset``
    (``active``: the leaf frame, interrupted anywhere; else stopped at a call, ``offset`` its return address's).

    Raises:
        GcInfoError: the GC info is not in the dump or cannot be decoded.
    """
    b = _Bits(read, address)
    slim = b.one() == 0
    if slim:
        flags = HAS_STACK_BASE_REGISTER if b.one() else 0
    else:
        flags = b.read(FLAGS_BITS_V1 if version == 1 else FLAGS_BITS)
    if version < 4:
        b.read(RETURN_KIND_SLIM if slim else RETURN_KIND_FAT)
    code_length = b.unsigned(CODE_LENGTH)
    if flags & HAS_GS_COOKIE:
        b.unsigned(NORM_PROLOG_SIZE)
        b.unsigned(NORM_EPILOG_SIZE)
    elif flags & (HAS_SECURITY_OBJECT | GENERICS_MASK):
        b.unsigned(NORM_PROLOG_SIZE)
    if flags & HAS_SECURITY_OBJECT and version < 4:
        b.signed(SECURITY_OBJECT_SLOT)
    if flags & HAS_GS_COOKIE:
        b.signed(GS_COOKIE_SLOT)
    if flags & HAS_PSP_SYM and version < 4:
        b.signed(PSP_SYM_SLOT)
    if flags & GENERICS_MASK:
        b.signed(GENERICS_CONTEXT_SLOT)
    stack_base = None
    if flags & HAS_STACK_BASE_REGISTER:
        stack_base = (0 if slim else b.unsigned(STACK_BASE_REGISTER)) ^ 5
    if flags & HAS_ENC_INFO:
        b.unsigned(ENC_PRESERVED_AREA)
    if flags & HAS_REVERSE_PINVOKE:
        b.signed(REVERSE_PINVOKE_FRAME)
    outgoing = 0 if slim else b.unsigned(SIZE_OF_STACK_AREA) << 3
    safe_points = b.unsigned(NUM_SAFE_POINTS)
    ranges = 0 if slim else b.unsigned(NUM_INTERRUPTIBLE_RANGES)
    if safe_points > MAX_SAFE_POINTS or ranges > MAX_RANGES:
        raise GcInfoError("implausible GC info header")
    # the safe points: call sites' return offsets, recorded one less (x64)
    bits_per_offset = max(code_length - 1, 0).bit_length() if code_length > 1 else 0
    # a frame that is not the leaf stopped at a call, its offset its return address's: version 4 records the safe
    # points there (measured on .NET 10: every call site's state as the DAC reports it); before, one byte less,
    # where EECodeManager::EnumGcRefs looks a caller's state up
    brk = offset if active or version >= 4 else offset - 1
    table = b.pos
    index = safe_points
    if not active:
        for i in range(safe_points):  # sorted: a binary search would read fewer bits; the table is small
            if b.read(bits_per_offset) == brk:
                index = i
                break
    b.pos = table + safe_points * bits_per_offset
    # the interruptible ranges: where the break offset is, in code of all the ranges laid end to end
    pseudo, length, last_stop, inside = 0, 0, 0, False
    for _ in range(ranges):
        start = last_stop + b.unsigned(RANGE_DELTA1)
        stop = start + b.unsigned(RANGE_DELTA2) + 1
        if start <= brk < stop and index == safe_points:
            pseudo, inside = length + brk - start, True
        length += stop - start
        last_stop = stop
    slots, tracked = _slot_table(b)
    live: list[Slot] = []
    if tracked:
        live = _tracked_live(b, slots[:tracked], safe_points, index, ranges, inside, pseudo, length)
    return LiveSlots(tuple(live), tuple(slots[tracked:]), stack_base, outgoing)


def _slot_table(b: _Bits) -> tuple[list[Slot], int]:
    registers = b.unsigned(NUM_REGISTERS) if b.one() else 0
    stack = untracked = 0
    if b.one():
        stack = b.unsigned(NUM_STACK_SLOTS)
        untracked = b.unsigned(NUM_UNTRACKED)
    if registers + stack + untracked > MAX_SLOTS:
        raise GcInfoError("implausible slot table")
    slots: list[Slot] = []
    flags = 0
    reg = 0
    for i in range(registers):
        if i == 0 or flags:
            reg = b.unsigned(REGISTER)
            flags = b.read(2)
        else:
            reg += b.unsigned(REGISTER_DELTA) + 1
        slots.append(Slot(reg, 0, 0, flags))
    for count in (stack, untracked):
        norm = 0
        for i in range(count):
            base = b.read(2)
            if i == 0 or flags:
                norm = b.signed(STACK_SLOT)
                flags = b.read(2)
            else:
                norm += b.unsigned(STACK_SLOT_DELTA)
            slots.append(Slot(None, norm << 3, base, flags))
    return slots, registers + stack


def _tracked_live(b: _Bits, slots: list[Slot], safe_points: int, index: int, ranges: int, inside: bool,
                  pseudo: int, length: int) -> list[Slot]:
    n = len(slots)
    bits_per_offset = b.unsigned(POINTER_SIZE) + 1 if safe_points and b.one() else 0
    if index != safe_points:  # at a call site: its live state
        if bits_per_offset:
            table = b.pos
            b.pos = table + index * bits_per_offset
            state_at = b.read(bits_per_offset)
            b.pos = ((table + safe_points * bits_per_offset + 7) & ~7) + state_at
            if b.one():  # run-length encoded
                return [slots[i] for i in _runs(b, n)]
        else:
            b.pos += index * n
        return [slots[i] for i in range(n) if b.one()]
    b.pos += safe_points * n  # as the runtime skips them
    if not ranges or not inside:
        return []
    # fully interruptible: the chunk of 64 code offsets holding the break offset, or the last one before it
    # that has lifetimes
    chunks = (length + CHUNK - 1) // CHUNK
    chunk = pseudo // CHUNK
    bits_per_pointer = b.unsigned(POINTER_SIZE)
    if not bits_per_pointer:
        return []
    table = b.pos
    at_break = chunk
    while True:
        b.pos = table + chunk * bits_per_pointer
        pointer = b.read(bits_per_pointer)
        if pointer:
            break
        if chunk == 0:
            return []
        chunk -= 1
    b.pos = ((table + chunks * bits_per_pointer + 7) & ~7) + pointer - 1
    if b.one():
        candidates = _runs(b, n)
    else:
        candidates = [i for i in range(n) if b.one()]
    final_states = b.pos
    b.pos += len(candidates)
    live = []
    delta = pseudo % CHUNK
    for k, slot in enumerate(candidates):
        save = b.pos
        b.pos = final_states + k
        is_live = b.one()
        b.pos = save
        if chunk == at_break:
            while b.one():
                if b.read(CHUNK_LOG2) > delta:
                    is_live ^= 1
        if is_live:
            live.append(slots[slot])
    return live


def _runs(b: _Bits, n: int) -> list[int]:
    """The slots a run-length encoded bit vector sets, read as the runtime reads it: a first count of slots not
    set (skip- or run-encoded as the first bit says), then alternately counts set and not set."""
    out = []
    skip = b.one() == 0
    report = True
    read = b.unsigned(RLE_SKIP if skip else RLE_RUN)
    skip = not skip
    guard = 0
    while read < n:
        cnt = b.unsigned(RLE_SKIP if skip else RLE_RUN) + 1
        if report:
            out.extend(range(read, min(read + cnt, n)))
        read += cnt
        skip, report = not skip, not report
        guard += 1
        if guard > MAX_SLOTS:
            raise GcInfoError("a run-length live state runs on without end")
    return out
