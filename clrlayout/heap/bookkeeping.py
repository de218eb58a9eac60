"""The GC's own bookkeeping: the memory of its card table, brick table, card bundles, mark array and (with
regions) region map, which the GC reserves beside the heap and commits as the heap grows.

``GcDacVars.bookkeeping_start`` (.NET 8+) points at the first reservation's ``card_table_info``: its
reference count and size; the segments GC chains a larger card table to it each time the heap outgrows
the one it has (``next_card_table`` points past the next ``card_table_info``).  The layout is data
(``formats/gc-dac-vars.toml [card_table_info]``), and what is read is trusted only when it checks out: the
variable lies in the runtime module's data, the reservation is page-aligned memory of the process, its count and
size are plausible.  The DAC's ``GetGCBookkeepingMemoryRegions`` walks the same chain.
"""

from __future__ import annotations

from ..dump import DumpFile, Module
from .segments import GcDacVars, gc_interface, search_ranges

PAGE = 4096
#: a card_table_info's reference count is the number of heaps and segments that use the table
MAX_RECOUNT = 1 << 20


def gc_bookkeeping(dump: DumpFile, dac_vars: GcDacVars | None, module: Module | None) -> list[tuple[int, int]]:
    """``(start, end)`` of every reservation of the GC's bookkeeping; [] where the runtime does not say."""
    if dac_vars is None or module is None:
        return []
    variable = dac_vars.fields.get("bookkeeping_start")
    if not variable or not any(lo <= variable < hi for lo, hi in search_ranges(dump, module)):
        return []  # a static of the GC: in the runtime module's data or right after it (.bss)
    space = dump.memory
    arch = "x64" if space.pointer_size == 8 else "x86"
    spec = gc_interface().get("card_table_info")
    if not spec:
        return []
    at = {k: spec[k][arch] for k in ("recount", "size", "next_card_table", "size_of")}
    start = space.try_read_pointer(variable)
    out: list[tuple[int, int]] = []
    seen: set[int] = set()
    first_next = None
    while start and start not in seen and len(out) < spec["max_chain"]:
        seen.add(start)
        recount = space.try_read_u32(start + at["recount"])
        size = space.try_read_pointer(start + at["size"])
        nxt = space.try_read_pointer(start + at["next_card_table"])
        if recount is None or size is None or nxt is None:
            break
        if not _plausible(space, start, recount, size):
            break
        if recount and size:
            out.append((start, start + size))
        if first_next is None:
            first_next = nxt
        elif nxt == first_next:
            break
        start = nxt - at["size_of"] if nxt > at["size_of"] else 0
    return out


def _plausible(space, start: int, recount: int, size: int) -> bool:
    return (start % PAGE == 0 and size % PAGE == 0 and 0 < recount <= MAX_RECOUNT
            and PAGE <= size < (1 << (8 * space.pointer_size - 1)) and space.is_described(start))
