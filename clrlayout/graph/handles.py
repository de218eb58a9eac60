"""GC handles, read from every slot of every handle table segment (``heap.handletables`` finds them): each
in-use handle's type, the object it holds and, for a dependent handle, its secondary object.

Every table is walked, not only the first ``GCHeapCount()`` ones: under server GC with DATAS the DAC's own
enumeration misses the tables of the other slots (graph-facts.md), and with them the handles that root much
of the heap.  The segment layout is data (``formats/gc-dac-vars.toml [handle_tables]``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..heap.handletables import handle_table_map, handle_table_segments
from ..heap.segments import gc_interface


@dataclass(frozen=True)
class Handle:
    address: int  # the handle (the slot that holds the object pointer)
    type: int  # HNDTYPE_*
    kind: str  # its name: strong, pinned, weak short, dependent, ...
    object: int  # the object it holds (0: none)
    secondary: int = 0  # a dependent handle's secondary object
    extra: int = 0  # a variable handle's VHT_* type
    strong: bool = False  # the GC scans it as a root
    table: int = 0  # the handle table's slot (one per GC heap under server GC)


def read_handles(dump, dac_vars) -> tuple[list[Handle] | None, str | None]:
    """(every in-use handle that holds an object, of the dump's handle tables, in address order; why there are
    none: the handle table map is neither published (before .NET 6) nor found by its shape, or the dump does
    not hold the tables)."""
    at = handle_table_map(dump, dac_vars)  # looked for once (on 2.x/3.x a search of the runtime's data)
    if at is None:
        return None, ("the GC's handle table map was not found (this runtime's GC does not publish it before "
                      ".NET 6, and nothing of its shape is in the runtime's data)")
    segments = handle_table_segments(dump, dac_vars, at)
    if not segments:
        return None, "the dump does not hold the GC's handle tables"
    spec = gc_interface()["handle_tables"]
    space = dump.memory
    ptr = space.pointer_size
    arch = "x64" if ptr == 8 else "x86"
    blocks, per_block = spec["blocks"][arch], spec["handles_per_block"]
    header = spec["segment_header"]
    names = {int(k): v for k, v in spec["types"].items()}
    dtype = np.dtype("<u8" if ptr == 8 else "<u4")
    out: list[Handle] = []
    for start, _end, table in segments:
        head = space.try_read(start, header)
        body = space.read_available(start + header, blocks * per_block * ptr)
        if head is None or not body:
            continue
        free = np.frombuffer(head, dtype="<u4", count=blocks * per_block // 32, offset=spec["free_mask"][arch])
        types = head[spec["block_type"][arch] : spec["block_type"][arch] + blocks]
        user = head[spec["user_data"][arch] : spec["user_data"][arch] + blocks]
        words = np.frombuffer(body, dtype=dtype, count=len(body) // ptr)
        for block in range(blocks):
            kind = types[block]
            if kind == spec["no_block"] or (block + 1) * per_block > len(words):
                continue
            masks = free[block * per_block // 32 : (block + 1) * per_block // 32]
            in_use = ~np.unpackbits(masks.view(np.uint8), bitorder="little").astype(bool)
            extra_block = user[block] if user[block] != spec["no_block"] else None
            for i in np.flatnonzero(in_use).tolist():
                index = block * per_block + i
                obj = int(words[index])
                if not obj:
                    continue
                extra = 0
                if extra_block is not None and (extra_block + 1) * per_block <= len(words):
                    extra = int(words[extra_block * per_block + i])
                out.append(_handle(spec, names, start + header + index * ptr, kind, obj, extra, table))
    out.sort(key=lambda h: h.address)
    return out, None


def _handle(spec: dict, names: dict, address: int, kind: int, obj: int, extra: int, table: int) -> Handle:
    strong = kind in spec["strong_types"]
    if kind == spec["variable_type"]:
        strong = bool(extra & (spec["variable_strong"] | spec["variable_pinned"]))
    secondary = extra if kind == spec["dependent_type"] else 0
    return Handle(address, kind, names.get(kind, f"type {kind}"), obj, secondary,
                  extra if kind == spec["variable_type"] else 0, strong, table)
