"""The precise references a thread's stack holds, as the GC finds them (EECodeManager::EnumGcRefs and
GcInfoDecoder::EnumerateLiveSlots): for each managed frame of a walk (:mod:`.stackwalk`), the slots its method's
GC info (:mod:`.gcinfo`) says are live at the frame's IP — stack slots at their base (the caller's SP, the SP or
the frame register) plus their offset, registers from the frame's context — and its untracked slots.

As the runtime does: a frame that is not the leaf stopped at a call, so its scratch registers and the slots of
its outgoing argument area are dead; a method with a funclet on the stack above it (a catch or finally handler
running) is reported by the funclet only, and the frames an exception has unwound between the handler and its
method are not reported at all."""

from __future__ import annotations

from dataclasses import dataclass, field

from .gcinfo import CALLER_SP_REL, FRAMEREG_REL, SP_REL, GcInfoError, live_slots
from .stackwalk import TRANSITION_FRAMES, StackFrame, Walk
from .unwind import REGISTERS

#: the registers a System V x64 callee preserves (the others are scratch: dead in a frame that made a call)
PRESERVED = frozenset({3, 5, 12, 13, 14, 15})
#: the System V argument registers a TransitionBlock saves (rdi, rsi, rdx, rcx, r8, r9)
ARGUMENT_REGISTERS = 6
#: .NET 8's Frames that protect object references of an FCall: how many pointers each holds (_PROTECTOBJ: an array)
PROTECTING = {"HelperMethodFrame_1OBJ": 1, "HelperMethodFrame_2OBJ": 2, "HelperMethodFrame_3OBJ": 3,
              "HelperMethodFrame_PROTECTOBJ": 0}
MAX_PROTECTED = 64


@dataclass(frozen=True)
class StackRef:
    """One live reference on a thread's stack."""

    #: where it is: a stack address (0 for a register) and the register (None for a stack slot)
    address: int
    register: int | None
    #: what it holds (an interior pointer points inside an object), and GC_SLOT_INTERIOR | GC_SLOT_PINNED
    object: int
    flags: int
    #: the frame: its IP, SP and method
    ip: int
    sp: int
    method_desc: int
    #: the slot as the GC info says it: ``[frame-0x38]``, ``[rsp+0x20]``, ``rbx``
    slot: str


@dataclass
class FrameRefs:
    refs: list
    #: managed frames whose GC info could not be decoded (their references are unknown): (frame, why)
    failed: list
    #: words a transition Frame saved from its method's argument registers, whose types are in a signature this
    #: walker does not decode: (address, value, the Frame) for a conservative scan to keep those that point into
    #: the heap
    unsure: list = field(default_factory=list)


def frame_references(space, walk: Walk, version: int, types: dict | None = None,
                     cache: dict | None = None) -> FrameRefs:
    """The live references of every managed frame of ``walk`` (``version``: the runtime's GCINFO_VERSION), and
    the argument registers each transition Frame saved (``types``: the Frames' layout, as the contract descriptor
    names it; ``cache``: the live slots decoded so far, by GC info, offset and leaf)."""
    out = FrameRefs([], [])
    skipping: int | None = None  # the method whose funclet is running: frames up to its own are not reported
    for f in walk.frames:
        if f.frame and f.frame_name in TRANSITION_FRAMES and types is not None and f.ip != 0:
            out.unsure += _transition_arguments(space, f, types)
            continue
        if f.frame and f.frame_name in PROTECTING and types is not None:
            out.refs += _protected(space, f, types)
            continue
        if f.frame and f.frame_name == "GCFrame" and types is not None and "GCFrame" in types:
            out.refs += _gc_frame(space, f, types["GCFrame"])
            continue
        info = f.code
        if info is None or f.context is None:
            continue
        if skipping is not None:
            if f.method_desc == skipping and not info.funclet:
                skipping = None  # the funclet's parent: the funclet reported what is live in it
            continue
        if info.funclet:
            skipping = f.method_desc
        try:
            out.refs += _frame(space, f, version, cache)
        except GcInfoError as e:
            out.failed.append((f, str(e)))
    return out


def _frame(space, f: StackFrame, version: int, cache: dict | None) -> list[StackRef]:
    info = f.code
    ctx = f.context or {}
    key = (info.gc_info, f.ip - info.start, f.active)
    live = cache.get(key) if cache is not None else None
    if live is None:
        live = live_slots(space.try_read, info.gc_info, f.ip - info.start, version, f.active)
        if cache is not None and len(cache) < 1 << 16:
            cache[key] = live
    out = []
    for slot in (*live.tracked, *live.untracked):
        if slot.register is not None:
            name = REGISTERS[slot.register] if slot.register < len(REGISTERS) else None
            if name is None or name not in ctx or (not f.active and slot.register not in PRESERVED):
                continue
            out.append(StackRef(0, slot.register, ctx[name], slot.flags, f.ip, f.sp, f.method_desc,
                                slot.describe()))
            continue
        if slot.base == SP_REL:
            if not f.active and slot.offset < live.outgoing_area:
                continue  # the outgoing argument area of a frame that made a call
            base = ctx["rsp"]
        elif slot.base == CALLER_SP_REL:
            if not f.caller_sp:
                continue
            base = f.caller_sp
        elif slot.base == FRAMEREG_REL and live.stack_base_register is not None:
            name = REGISTERS[live.stack_base_register]
            if name not in ctx:
                continue
            base = ctx[name]
        else:
            continue
        address = (base + slot.offset) & ((1 << 64) - 1)
        value = space.try_read_pointer(address)
        if value is None:
            raise GcInfoError(f"the stack slot at {address:#x} is not in the dump")
        out.append(StackRef(address, None, value, slot.flags, f.ip, f.sp, f.method_desc,
                            _describe(slot, live.stack_base_register)))
    return out


def _protected(space, f: StackFrame, types: dict) -> list[StackRef]:
    """The object references a .NET 8 HelperMethodFrame_NOBJ (or _PROTECTOBJ) protects for its FCall
    (HelperMethodFrame_1OBJ::GcScanRoots): each a pointer to an OBJECTREF, reported as a strong reference."""
    at = types.get("HelperMethodFrame", {}).get("GcPtrs")
    if at is None:
        return []
    ptr = space.try_read_pointer
    if f.frame_name == "HelperMethodFrame_PROTECTOBJ":
        array, count = ptr(f.frame + at), ptr(f.frame + at + 8)
        if not array or count is None or count > MAX_PROTECTED:
            return []
        slots = [array + 8 * k for k in range(count)]
    else:
        slots = [s for k in range(PROTECTING[f.frame_name]) if (s := ptr(f.frame + at + 8 * k))]
    out = []
    for slot in slots:
        value = ptr(slot)
        if value is not None:
            out.append(StackRef(slot, None, value, 0, f.frame, f.sp, f.method_desc,
                                f"[{f.frame_name} protected object]"))
    return out


def _gc_frame(space, f: StackFrame, layout: dict) -> list[StackRef]:
    """The object references a GCFrame protects (GCPROTECT in the runtime's own code, before .NET 10: a Frame of
    the chain): its array of OBJECTREFs, interior pointers where it says so."""
    array = space.try_read_pointer(f.frame + layout["ObjRefs"])
    count = space.try_read_u32(f.frame + layout["NumObjRefs"])
    interior = space.try_read_u32(f.frame + layout["MaybeInterior"])
    if not array or count is None or count > MAX_PROTECTED or interior is None:
        return []
    out = []
    for k in range(count):
        value = space.try_read_pointer(array + 8 * k)
        if value is not None:
            out.append(StackRef(array + 8 * k, None, value, 1 if interior & 0xFF else 0, f.frame, f.sp,
                                f.method_desc, "[GCFrame protected object]"))
    return out


def _transition_arguments(space, f: StackFrame, types: dict) -> list:
    """(address, value, Frame) of the argument registers a transition Frame's TransitionBlock saved."""
    try:
        block_at = types["FramedMethodFrame"]["TransitionBlockPtr"]
        args_at = types["TransitionBlock"]["ArgumentRegisters"]
    except KeyError:
        return []
    block = space.try_read_pointer(f.frame + block_at)
    data = space.try_read(block + args_at, 8 * ARGUMENT_REGISTERS) if block else None
    if data is None:
        return []
    return [(block + args_at + 8 * k, int.from_bytes(data[8 * k : 8 * k + 8], "little"), f)
            for k in range(ARGUMENT_REGISTERS)]


def _describe(slot, stack_base: int | None) -> str:
    if slot.base == FRAMEREG_REL and stack_base is not None:
        return f"[{REGISTERS[stack_base]}{slot.offset:+#x}]"
    return slot.describe()
