"""A managed thread's stack, walked as the runtime's own stack walker does (dotnet/runtime
docs/design/datacontracts/StackWalk.md), without the DAC: from the thread's registers in the dump, managed frames
are unwound by their unwind data (:mod:`.unwind`, the method found by :mod:`.codemap`); where the context is in
native code, the thread's next explicit Frame (``Thread::m_pFrame``, a list from the most recent; they mark each
transition between managed and native code) gives the context of the managed code that called out — an
InlinedCallFrame its caller's return address, stack and frame pointers, a SoftwareExceptionFrame or
FaultingExceptionFrame a whole context, a transition frame its TransitionBlock's callee-saved registers.  A Frame
that lies inside a managed frame (below its caller's stack pointer) is reported after that frame.

The Frame's type is its identifier (.NET 10: the first word; the names are the contract descriptor's
``<Name>Identifier`` globals) or its vtable (before: formats/stack-walk.toml's entries of the runtime's table of
DAC globals)."""

from __future__ import annotations

from dataclasses import dataclass, field

from .codemap import CodeInfo, CodeMap, CodeMapUnreadable
from .unwind import UnwindError, unwind

#: frames reported for one thread at the most; Frames followed along a thread's list at the most; native frames
#: unwound from where a HelperMethodFrame's FCall captured its state to managed code at the most
MAX_FRAMES, MAX_EXPLICIT, MAX_NATIVE_FRAMES = 10_000, 10_000, 16
FRAME_TOP = (1 << 64) - 1
#: where winnt.h's AMD64 CONTEXT keeps each register
CONTEXT_AMD64 = {"rax": 0x78, "rcx": 0x80, "rdx": 0x88, "rbx": 0x90, "rsp": 0x98, "rbp": 0xA0, "rsi": 0xA8,
                 "rdi": 0xB0, "r8": 0xB8, "r9": 0xC0, "r10": 0xC8, "r11": 0xD0, "r12": 0xD8, "r13": 0xE0,
                 "r14": 0xE8, "r15": 0xF0, "rip": 0xF8}
CONTEXT_SIZE = 0x100
#: the callee-saved registers of the System V ABI (a SoftwareExceptionFrame restores these, the IP and the SP)
CALLEE_SAVED = ("rbx", "rbp", "r12", "r13", "r14", "r15")
#: Frames that carry the context of the managed code below them, by how
TRANSITION_FRAMES = ("FramedMethodFrame", "PInvokeCalliFrame", "PrestubMethodFrame", "StubDispatchFrame",
                     "CallCountingHelperFrame", "ExternalMethodFrame", "DynamicHelperFrame")


@dataclass(slots=True)
class StackFrame:
    """One frame of a walk: a managed method's (``code`` set) or an explicit Frame's (``frame`` set)."""

    ip: int
    sp: int
    #: the managed method's MethodDesc (an explicit Frame's: the method it is for, where it says; else 0)
    method_desc: int = 0
    #: the explicit Frame's address and type name
    frame: int = 0
    frame_name: str = ""
    code: CodeInfo | None = None
    #: a managed frame's registers (those the walk knows), whether it is the leaf (interrupted anywhere, not at a
    #: call: its scratch registers are live), and its caller's stack pointer (0: not unwound)
    context: dict | None = field(default=None, compare=False, repr=False)
    active: bool = False
    caller_sp: int = 0


@dataclass
class Walk:
    frames: list[StackFrame] = field(default_factory=list)
    #: why the walk stopped before the end of the thread's stack ("": it did not)
    error: str = ""


class StackWalker:
    """Walks threads of one runtime: ``types``/``globals_`` as the contract descriptor names them."""

    def __init__(self, space, code_map: CodeMap, types: dict, globals_: dict, frame_names: dict[int, str],
                 native=None):
        self.space = space
        #: the native libraries' call frame information (``unwinder(ip)``), for what only native code leads to
        self.native = native
        #: the runtime's GCINFO_VERSION
        self.gc_version: int | None = None
        self.code = code_map
        self.t = types
        self.g = globals_
        #: a Frame's identifier (or vtable) -> its type's name
        self.frame_names = frame_names
        #: unwind data read, by address; the live slots decoded, by (GC info, offset, leaf) (:mod:`.stackrefs`)
        self._unwind: dict = {}
        self.gc_cache: dict = {}

    def frame_chain(self, first: int) -> list[int]:
        out, seen, at = [], set(), first
        nxt = self.t["Frame"]["Next"]
        while at and at != FRAME_TOP and at not in seen and len(out) < MAX_EXPLICIT:
            seen.add(at)
            out.append(at)
            at = self.space.try_read_pointer(at + nxt) or 0
        return out

    def frame_name(self, frame: int) -> str:
        ident = self.space.try_read_pointer(frame)
        return self.frame_names.get(ident, "") if ident is not None else ""

    def walk(self, registers: dict, first_frame: int) -> Walk:
        """The frames of a thread whose registers (names as :data:`CONTEXT_AMD64`'s) and top Frame are given;
        where the code map cannot tell whether an address is managed code, the walk stops there, saying why."""
        out = Walk()
        try:
            self._walk(out, registers, first_frame)
        except CodeMapUnreadable as e:
            out.error = str(e)
        return out

    def _walk(self, out: Walk, registers: dict, first_frame: int) -> None:
        if not {"rip", "rsp"} <= registers.keys():
            out.error = "the dump has no registers for this thread"
            return
        ctx = dict(registers)
        frames, fi = self.frame_chain(first_frame), 0
        leaf = True
        info = self.code.find(ctx["rip"])
        current = 0  # the managed frame being unwound
        if info is not None:
            out.frames.append(StackFrame(ctx["rip"], ctx["rsp"], info.method_desc, code=info, context=dict(ctx),
                                         active=True))
        while len(out.frames) < MAX_FRAMES:
            if info is not None:
                try:
                    caller = unwind(self.space, ctx, info.image_base, info.function, leaf=leaf, cache=self._unwind)
                except UnwindError as e:
                    out.error = f"unwinding {ctx['rip']:#x}: {e}"
                    break
                if caller["rsp"] <= ctx["rsp"]:
                    out.error = f"the stack does not grow back at {ctx['rip']:#x}"
                    break
                while fi < len(frames) and frames[fi] < caller["rsp"]:  # Frames inside this managed frame
                    out.frames.append(StackFrame(ctx["rip"], ctx["rsp"], frame=frames[fi],
                                                 frame_name=self.frame_name(frames[fi])))
                    fi += 1
                out.frames[current].caller_sp = caller["rsp"]
                ctx, leaf = caller, False
            else:
                if fi >= len(frames):
                    break
                f = frames[fi]
                fi += 1
                name = self.frame_name(f)
                md = self.frame_method(f, name)
                out.frames.append(StackFrame(ctx["rip"], ctx["rsp"], md, frame=f, frame_name=name))
                updated = self._through(ctx, f, name)
                if updated is None:
                    continue
                ctx, leaf = updated, name in ("FaultingExceptionFrame", "ResumableFrame", "RedirectedThreadFrame")
                if name == "InlinedCallFrame":  # as the runtime's walker: again, at the caller it leads to
                    out.frames.append(StackFrame(ctx["rip"], ctx["rsp"], md, frame=f, frame_name=name))
            info = self.code.find(ctx["rip"])
            if info is not None:
                current = len(out.frames)
                out.frames.append(StackFrame(ctx["rip"], ctx["rsp"], info.method_desc, code=info, context=dict(ctx),
                                             active=leaf))
        else:  # the bound, not the end of the stack
            out.error = f"the walk stopped after {MAX_FRAMES:,} frames"

    def frame_method(self, frame: int, name: str) -> int:
        """The method a Frame is for, where it says (InlinedCallFrame::GetFunction: the P/Invoke's MethodDesc,
        its Datum while a call is in progress, unless odd — a CALLI's target — or a small marker)."""
        if name.startswith("HelperMethodFrame"):
            return self._fcall_method(frame)
        if name in TRANSITION_FRAMES:  # FramedMethodFrame::GetFunction: the method being called (0: not known yet)
            at = self.t.get("FramedMethodFrame", {}).get("MethodDescPtr")
            return (self.space.try_read_pointer(frame + at) or 0) if at is not None else 0
        if name != "InlinedCallFrame":
            return 0
        icf, ptr = self.t["InlinedCallFrame"], self.space.try_read_pointer
        datum = ptr(frame + icf["Datum"]) if "Datum" in icf else None
        if not datum or datum & 1 or datum < 0x10000 or not ptr(frame + icf["CallerReturnAddress"]):
            return 0
        return datum

    # --- the context a Frame gives -------------------------------------------------------------------------

    def _context(self, at: int, names) -> dict | None:
        raw = self.space.try_read(at, CONTEXT_SIZE)
        if raw is None:
            return None
        return {n: int.from_bytes(raw[CONTEXT_AMD64[n] : CONTEXT_AMD64[n] + 8], "little") for n in names}

    def _through(self, ctx: dict, frame: int, name: str) -> dict | None:
        """The context of the managed code the Frame leads back to, or None where it gives none (or where its
        type's layout is not known)."""
        try:
            return self._through_frame(ctx, frame, name)
        except KeyError:
            return None

    def _through_frame(self, ctx: dict, frame: int, name: str) -> dict | None:
        t, ptr = self.t, self.space.try_read_pointer
        if name.startswith("HelperMethodFrame"):
            return self._helper_method_frame(ctx, frame + t["HelperMethodFrame"]["MachState"])
        new = dict(ctx)
        if name == "InlinedCallFrame":
            icf = t["InlinedCallFrame"]
            ret = ptr(frame + icf["CallerReturnAddress"])
            if not ret:
                return None  # no call in progress
            sp, fp = ptr(frame + icf["CallSiteSP"]), ptr(frame + icf["CalleeSavedFP"])
            if sp is None or fp is None:
                return None
            new.update(rip=ret, rsp=sp, rbp=fp)
            return new
        if name == "SoftwareExceptionFrame":
            saved = self._context(frame + t["SoftwareExceptionFrame"]["TargetContext"], ("rip", "rsp") + CALLEE_SAVED)
            if saved is None:
                return None
            new.update(saved)
            return new
        if name == "FaultingExceptionFrame":
            return self._context(frame + t["FaultingExceptionFrame"]["TargetContext"], CONTEXT_AMD64)
        if name in ("ResumableFrame", "RedirectedThreadFrame"):
            at = ptr(frame + t["ResumableFrame"]["TargetContextPtr"])
            return self._context(at, CONTEXT_AMD64) if at else None
        if name in TRANSITION_FRAMES:
            block = ptr(frame + t["FramedMethodFrame"]["TransitionBlockPtr"])
            tb = t["TransitionBlock"]
            if not block:
                return None
            return self._callee_saved(new, block + tb["CalleeSavedRegisters"], ptr(block + tb["ReturnAddress"]),
                                      block + tb["!"])
        if name == "HijackFrame":
            h = t["HijackFrame"]
            args = ptr(frame + h["HijackArgsPtr"])
            if not args:
                return None
            return self._callee_saved(new, args + t["HijackArgs"]["CalleeSavedRegisters"],
                                      ptr(frame + h["ReturnAddress"]), args + t["HijackArgs"]["!"])
        return None

    def _fcall_method(self, frame: int) -> int:
        """The FCall a .NET 8 HelperMethodFrame is for (HelperMethodFrame::GetFunction): its entry point looked up
        in the runtime's hash of FCalls (ECall::MapTargetBackToMethod); 0 where it is not found."""
        table, h = self.g.get("FCallMethods"), self.t.get("FCallHash")
        at = self.t.get("HelperMethodFrame", {}).get("FCallEntry")
        ptr = self.space.try_read_pointer
        entry = ptr(frame + at) if table and h and at is not None else None
        if not entry:
            return 0
        node, seen = ptr(table + 8 * (entry % h["Buckets"])), 0
        while node and seen < MAX_EXPLICIT:
            if ptr(node + h["Implementation"]) == entry:
                return ptr(node + h["MethodDesc"]) or 0
            node, seen = ptr(node + h["Next"]), seen + 1
        return 0

    def _helper_method_frame(self, ctx: dict, state: int) -> dict | None:
        """.NET 8's HelperMethodFrame (an FCall that may trigger a GC): its LazyMachState (amd64 gmscpu.h) holds the
        managed caller's IP, SP and callee-saved registers once computed (``_pRetAddr`` set; a register's value
        through its pointer, or where none, the unwound copy); before, only where the FCall captured its own
        state, from which native frames are unwound (the library's call frame information) to managed code."""
        m, ptr = self.t["MachState"], self.space.try_read_pointer
        regs = [r for r in self.t["CalleeSavedRegisters"] if r != "!"]
        new = dict(ctx)
        if ptr(state + m["RetAddrPtr"]):
            rip, rsp = ptr(state + m["Rip"]), ptr(state + m["Rsp"])
            if not rip or rsp is None:
                return None
            for k, reg in enumerate(regs):
                at = ptr(state + m["Ptrs"] + 8 * k)
                value = ptr(at) if at else ptr(state + m["Unwound"] + 8 * k)
                if value is None:
                    return None
                new[reg.lower()] = value
            new.update(rip=rip, rsp=rsp)
            return new
        rip, rsp = ptr(state + m["CaptureRip"]), ptr(state + m["CaptureRsp"])
        if not rip or not rsp or self.native is None:
            return None
        for k, reg in enumerate(regs):
            value = ptr(state + m["Capture"] + 8 * k)
            if value is None:
                return None
            new[reg.lower()] = value
        new.update(rip=rip, rsp=rsp)
        for _ in range(MAX_NATIVE_FRAMES):
            if self.code.find(new["rip"]) is not None:
                return new
            unwinder = self.native.unwinder(new["rip"])
            step = unwinder.unwind(self.space, new) if unwinder is not None else None
            if step is None or step["rsp"] <= new["rsp"]:
                return None
            new = step
        return None

    def _callee_saved(self, new: dict, at: int, ret: int | None, sp: int) -> dict | None:
        regs = self.t["CalleeSavedRegisters"]
        if not ret:
            return None
        for reg, off in regs.items():
            if reg == "!":
                continue
            value = self.space.try_read_pointer(at + off)
            if value is None:
                return None
            new[reg.lower()] = value
        new.update(rip=ret, rsp=sp)
        return new
