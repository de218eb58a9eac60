"""One step of x64 stack unwinding by Windows unwind data (UNWIND_INFO and its codes), which CoreCLR uses for
managed code on every OS (learn.microsoft.com/cpp/build/exception-handling-x64; dotnet/runtime
src/coreclr/unwinder/amd64/unwinder.cpp ``RtlVirtualUnwind``): the establisher frame from the frame register,
the prolog's codes undone in order (those whose prolog offset the IP has passed), chained entries followed, and
the return address popped.  A leaf IP in an epilog (``add rsp``/``lea rsp``, ``pop``s, ``ret``) is unwound by
reading those instructions, as the Windows unwinder does.

A context is a dict of register names (``rax``... ``r15``, ``rip``, ``rsp``); registers unknown stay absent.
Every read is bounded; bad unwind data raises :class:`UnwindError`."""

from __future__ import annotations

#: x64 register numbers in unwind codes
REGISTERS = ("rax", "rcx", "rdx", "rbx", "rsp", "rbp", "rsi", "rdi", "r8", "r9", "r10", "r11", "r12", "r13", "r14",
             "r15")
PUSH_NONVOL, ALLOC_LARGE, ALLOC_SMALL, SET_FPREG, SAVE_NONVOL, SAVE_NONVOL_FAR = range(6)
EPILOG, SPARE, SAVE_XMM128, SAVE_XMM128_FAR, PUSH_MACHFRAME = range(6, 11)
#: unwind codes (slots of 2 bytes) each operation takes (ALLOC_LARGE: 2 with op info 0, else 3)
SLOTS = {PUSH_NONVOL: 1, ALLOC_SMALL: 1, SET_FPREG: 1, SAVE_NONVOL: 2, SAVE_NONVOL_FAR: 3, EPILOG: 2, SPARE: 3,
         SAVE_XMM128: 2, SAVE_XMM128_FAR: 3, PUSH_MACHFRAME: 1}
FLAG_CHAININFO = 0x4
#: chained entries followed at the most; epilog instructions read at the most
MAX_CHAIN, MAX_EPILOG = 32, 64


class UnwindError(Exception):
    """The unwind data, or the stack it describes, cannot be read."""


def _u64(space, address: int) -> int:
    value = space.try_read_pointer(address)
    if value is None:
        raise UnwindError(f"the stack at {address:#x} is not in the dump")
    return value


def unwind(space, ctx: dict, image_base: int, function: tuple[int, int, int], leaf: bool = False,
           cache: dict | None = None) -> dict:
    """The caller's context of the frame ``ctx`` is in: ``function`` is the RUNTIME_FUNCTION (begin, end, unwind
    data; relative to ``image_base``) that covers ``ctx["rip"]``.  ``leaf``: the frame was interrupted (not at a
    return address), so the IP may be in an epilog.  ``cache``: unwind data already read, by address."""
    ctx = dict(ctx)
    begin, _, data = function
    info, codes = _info(space, image_base + data, cache)
    frame_reg, frame_off = info[3] & 0xF, (info[3] >> 4) * 16
    offset = ctx["rip"] - (image_base + begin)
    if not frame_reg:
        establisher = ctx["rsp"]
    elif offset >= info[1] or info[0] >> 3 & FLAG_CHAININFO:
        establisher = ctx[REGISTERS[frame_reg]] - frame_off
    else:
        set_at = next((c[0] for c in codes if c[1] == SET_FPREG), None)
        established = set_at is not None and offset >= set_at
        establisher = ctx[REGISTERS[frame_reg]] - frame_off if established else ctx["rsp"]
    if leaf and offset >= info[1] and _epilog(space, ctx, frame_reg):
        return ctx
    machine_frame = False
    for _ in range(MAX_CHAIN):
        i = 0
        offset = ctx["rip"] - (image_base + begin)
        while i < len(codes):
            code_offset, op, op_info = codes[i]
            if offset < code_offset:  # not executed yet: skip it
                i += 3 if op == ALLOC_LARGE and op_info else SLOTS.get(op, 2 if op == ALLOC_LARGE else 1)
                continue
            if op == PUSH_NONVOL:
                ctx[REGISTERS[op_info]] = _u64(space, ctx["rsp"])
                ctx["rsp"] += 8
            elif op == ALLOC_LARGE:
                if op_info == 0:
                    ctx["rsp"] += _slot(codes, i + 1) * 8
                    i += 1
                else:
                    ctx["rsp"] += _slot(codes, i + 1) | (_slot(codes, i + 2) << 16)
                    i += 2
            elif op == ALLOC_SMALL:
                ctx["rsp"] += op_info * 8 + 8
            elif op == SET_FPREG:
                ctx["rsp"] = ctx[REGISTERS[frame_reg]] - frame_off
            elif op == SAVE_NONVOL:
                ctx[REGISTERS[op_info]] = _u64(space, establisher + _slot(codes, i + 1) * 8)
                i += 1
            elif op == SAVE_NONVOL_FAR:
                ctx[REGISTERS[op_info]] = _u64(space, establisher + (_slot(codes, i + 1)
                                                                      | (_slot(codes, i + 2) << 16)))
                i += 2
            elif op in (EPILOG, SAVE_XMM128):
                i += 1
            elif op in (SPARE, SAVE_XMM128_FAR):
                i += 2
            elif op == PUSH_MACHFRAME:
                at = ctx["rsp"] + (8 if op_info else 0)
                ctx["rip"], ctx["rsp"] = _u64(space, at), _u64(space, at + 24)
                machine_frame = True
            else:
                raise UnwindError(f"unknown unwind operation {op}")
            i += 1
        if not info[0] >> 3 & FLAG_CHAININFO:
            break
        chained = image_base + data + 4 + 2 * ((len(codes) + 1) & ~1)
        raw = space.try_read(chained, 12)
        if raw is None:
            raise UnwindError("the chained unwind entry is not in the dump")
        begin, _, data = (int.from_bytes(raw[k : k + 4], "little") for k in (0, 4, 8))
        info, codes = _info(space, image_base + data, cache)
    else:
        raise UnwindError("unwind entries chain without end")
    if not machine_frame:
        ctx["rip"] = _u64(space, ctx["rsp"])
        ctx["rsp"] += 8
    return ctx


def _info(space, at: int, cache: dict | None) -> tuple[bytes, list[tuple[int, int, int]]]:
    """The UNWIND_INFO header at ``at`` and its codes."""
    found = cache.get(at) if cache is not None else None
    if found is None:
        info = space.try_read(at, 4)
        if info is None:
            raise UnwindError(f"the unwind data at {at:#x} is not in the dump")
        found = info, _codes(space, at, info[2])
        if cache is not None and len(cache) < 1 << 16:
            cache[at] = found
    return found


def _codes(space, at: int, count: int) -> list[tuple[int, int, int]]:
    """(prolog offset, operation, op info) of each 2-byte slot; a slot that is an operand reads the same way."""
    raw = space.try_read(at + 4, 2 * count) if count else b""
    if raw is None:
        raise UnwindError(f"the unwind codes at {at:#x} are not in the dump")
    return [(raw[2 * k], raw[2 * k + 1] & 0xF, raw[2 * k + 1] >> 4) for k in range(count)]


def _slot(codes: list, i: int) -> int:
    if i >= len(codes):
        raise UnwindError("an unwind operation's operand is missing")
    lo, op, info = codes[i]
    return lo | (op | info << 4) << 8


def _epilog(space, ctx: dict, frame_reg: int) -> bool:
    """If ``ctx["rip"]`` is in an epilog, unwind it in place from the instructions (``add rsp, imm`` or ``lea rsp,
    [frame + disp]``, then ``pop``s, then ``ret``) and answer True; else leave ``ctx`` alone."""
    code = next((c for n in (MAX_EPILOG, 32, 16, 8) if (c := space.try_read(ctx["rip"], n))), None)
    if not code:
        return False
    regs = dict(ctx)
    i = 0
    if code[i : i + 3] == b"\x48\x83\xc4":
        regs["rsp"] += code[i + 3]
        i += 4
    elif code[i : i + 3] == b"\x48\x81\xc4":
        regs["rsp"] += int.from_bytes(code[i + 3 : i + 7], "little")
        i += 7
    elif code[i : i + 2] in (b"\x48\x8d", b"\x4c\x8d") and len(code) > i + 3 and (code[i + 2] >> 3) & 7 == 4:
        modrm, base = code[i + 2], code[i + 2] & 7
        reg = REGISTERS[base + (8 if code[i] & 1 else 0)]
        if modrm >> 6 == 1:
            regs["rsp"] = regs[reg] + int.from_bytes(code[i + 3 : i + 4], "little", signed=True)
            i += 4
        elif modrm >> 6 == 2:
            regs["rsp"] = regs[reg] + int.from_bytes(code[i + 3 : i + 7], "little", signed=True)
            i += 7
        else:
            return False
    while i < len(code):
        b = code[i]
        if 0x58 <= b <= 0x5F:
            regs[REGISTERS[b - 0x58]] = _u64(space, regs["rsp"])
            regs["rsp"] += 8
            i += 1
        elif b == 0x41 and i + 1 < len(code) and 0x58 <= code[i + 1] <= 0x5F:
            regs[REGISTERS[code[i + 1] - 0x58 + 8]] = _u64(space, regs["rsp"])
            regs["rsp"] += 8
            i += 2
        elif b == 0xC3:
            regs["rip"] = _u64(space, regs["rsp"])
            regs["rsp"] += 8
            ctx.update(regs)
            return True
        else:
            return False
    return False
