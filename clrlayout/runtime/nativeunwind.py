"""One step of unwinding through native x64 code of a shared library by its DWARF call frame information
(``.eh_frame``, found through ``.eh_frame_hdr``'s sorted table), read with pyelftools from the library's file:
what a debugger does to get from the runtime's own C++ code back to the managed code that called it.  Used where
the runtime left only where it was (a .NET 8 HelperMethodFrame whose machine state was never computed: its
captured IP, SP and callee-saved registers inside the FCall).

Only the rules compilers emit for x64 code are followed — the CFA as a register plus an offset, registers saved
at an offset from it, the return address at CFA - 8; an expression rule ends the unwind (None)."""

from __future__ import annotations

import bisect

#: DWARF register numbers of x86-64 (System V psABI)
DWARF = {0: "rax", 1: "rdx", 2: "rcx", 3: "rbx", 4: "rsi", 5: "rdi", 6: "rbp", 7: "rsp", 8: "r8", 9: "r9",
         10: "r10", 11: "r11", 12: "r12", 13: "r13", 14: "r14", 15: "r15"}
RETURN_ADDRESS = 16
#: .eh_frame_hdr table entries read at the most
MAX_FDES = 1 << 20


class NativeUnwinder:
    """The call frame information of one ELF shared library mapped at ``bias`` (its vaddr 0)."""

    def __init__(self, path: str, bias: int):
        from elftools.dwarf.callframe import CallFrameInfo
        from elftools.elf.elffile import ELFFile

        self._file = open(path, "rb")  # kept open for pyelftools' lazy reads; closed by close()
        elf = ELFFile(self._file)
        dwarf = elf.get_dwarf_info(follow_links=False)
        hdr = elf.get_section_by_name(".eh_frame_hdr")
        frame = dwarf.eh_frame_sec
        if hdr is None or frame is None:
            raise ValueError("no .eh_frame_hdr")
        data = hdr.data()
        if len(data) < 12 or data[0] != 1 or data[3] != 0x3B:  # version 1; table: datarel | sdata4
            raise ValueError("an .eh_frame_hdr of an encoding not read")
        count = int.from_bytes(data[8:12], "little") if data[2] == 0x03 else 0  # fde_count: udata4
        count = min(count, (len(data) - 12) // 8, MAX_FDES)
        table = [(int.from_bytes(data[12 + 8 * i : 16 + 8 * i], "little", signed=True),
                  int.from_bytes(data[16 + 8 * i : 20 + 8 * i], "little", signed=True)) for i in range(count)]
        self._starts = [hdr["sh_addr"] + start for start, _ in table]
        self._fdes = [hdr["sh_addr"] + fde - frame.address for _, fde in table]
        self._cfi = CallFrameInfo(stream=frame.stream, size=frame.size, address=frame.address,
                                  base_structs=dwarf.structs, for_eh_frame=True)
        self.bias = bias
        self._rows: dict[int, tuple] = {}

    def close(self) -> None:
        self._file.close()

    def _table(self, pc: int):
        i = bisect.bisect_right(self._starts, pc) - 1
        if i < 0:
            return None
        if i not in self._rows:
            try:
                fde = self._cfi._parse_entry_at(self._fdes[i])
                decoded = fde.get_decoded()
                self._rows[i] = (fde.header["initial_location"], fde.header["address_range"], decoded.table)
            except Exception:  # damaged or unusual call frame information: no unwind from there
                self._rows[i] = (0, 0, [])
        return self._rows[i]

    def unwind(self, space, ctx: dict) -> dict | None:
        """The caller's context of native code at ``ctx["rip"]``, or None where the library says nothing of it
        (or says it in a way not followed), or the stack is not in the dump."""
        pc = ctx["rip"] - self.bias
        found = self._table(pc)
        if found is None:
            return None
        start, size, rows = found
        if not start <= pc < start + size or not rows:
            return None
        row = None
        for r in rows:
            if r["pc"] <= pc:
                row = r
            else:
                break
        if row is None or "cfa" not in row:
            return None
        cfa_rule = row["cfa"]
        if cfa_rule.expr is not None or cfa_rule.reg not in DWARF or DWARF[cfa_rule.reg] not in ctx:
            return None
        cfa = ctx[DWARF[cfa_rule.reg]] + cfa_rule.offset
        new = dict(ctx)
        for reg, rule in row.items():
            if not isinstance(reg, int):
                continue
            if rule.type == "OFFSET":
                value = space.try_read_pointer(cfa + rule.arg)
                if value is None:
                    return None
                if reg == RETURN_ADDRESS:
                    new["rip"] = value
                elif reg in DWARF:
                    new[DWARF[reg]] = value
            elif rule.type not in ("UNDEFINED", "SAME_VALUE"):
                return None
        if RETURN_ADDRESS not in row:
            value = space.try_read_pointer(cfa - 8)
            if value is None:
                return None
            new["rip"] = value
        new["rsp"] = cfa
        return new
