"""The GC's handle tables: where GC handles (strong, weak, pinned, dependent) live, 64 KB segments of them.

``GcDacVars.handle_table_map`` leads through the map's buckets to one ``HandleTable`` per slot (one under
workstation GC, one per CPU under server GC), each with a list of ``TableSegment``s.  The GC of .NET Core 2.x
and 3.x (GcDacVars 1.0) does not publish the map: it is then found by its shape in the runtime's data
(``g_HandleTableMap``: a pointer to its buckets, the next map, and ``dwMaxIndex``, which is the number of
buckets of the first map, 10), each candidate followed to a table whose segment points back at it.  The list's place in
``HandleTable`` is not part of the GC's interface with the DAC, so it is found by what it holds: the
segment-aligned pointer among the table's first words whose segment points back at the table (at any byte
of its header: .NET 10 packs the header); each segment's next one is the pointer just before that back
pointer.  The layout is data (``formats/gc-dac-vars.toml [handle_tables]``); every bound is a limit on
what a dump makes it read.
"""

from __future__ import annotations

import numpy as np

from ..dump import DumpFile
from .segments import GcDacVars, gc_interface, search_ranges


def handle_table_map(dump: DumpFile, dac_vars: GcDacVars | None) -> int | None:
    """The address of the GC's first handle table map: from GcDacVars, else (GcDacVars 1.0) found by its shape
    in the runtime module's data; None when neither says."""
    if dac_vars is None:
        return None
    if dac_vars.fields.get("handle_table_map"):
        return dac_vars.fields["handle_table_map"]
    # the runtime's module: the one GcDacVars is in, or (an ELF core's .bss) the last one before it
    before = [m for m in dump.modules if m.base <= dac_vars.address]
    module = max(before, key=lambda m: m.base) if before else None
    return _map_by_shape(dump, module) if module is not None else None


def _map_by_shape(dump: DumpFile, module) -> int | None:
    spec = gc_interface().get("handle_tables")
    space = dump.memory
    ptr = space.pointer_size
    arch = "x64" if ptr == 8 else "x86"
    dtype = np.dtype("<u8" if ptr == 8 else "<u4")
    count_at = (spec["map_next"][arch] + ptr) // ptr  # dwMaxIndex follows pNext
    for lo, hi in search_ranges(dump, module):
        for addr, data in space.iter_windows(lo, hi, record=False):
            head = (-addr) % ptr
            n = (len(data) - head) // ptr
            if n <= count_at:
                continue
            w = np.frombuffer(data, dtype=dtype, count=n, offset=head)
            low = w[count_at:] & np.uint64(0xFFFFFFFF) if ptr == 8 else w[count_at:]
            hits = np.flatnonzero((low == spec["buckets_per_map"]) & (w[: n - count_at] != 0)
                                  & (w[: n - count_at] % ptr == 0))
            for i in hits.tolist():
                at = addr + head + i * ptr
                if _tables(space, at, spec, ptr, arch, first_only=True):
                    space.note(at, (count_at + 1) * ptr)  # the words the shape was told by (a trim keeps them)
                    return at
    return None


def handle_table_segments(dump: DumpFile, dac_vars: GcDacVars | None, at: int | None = None) -> list[tuple[int, int,
                                                                                                           int]]:
    """``(start, end, slot)`` of every handle table segment (from the map at ``at``, else the one
    :func:`handle_table_map` finds); [] where the runtime does not say."""
    spec = gc_interface().get("handle_tables")
    at = at or (handle_table_map(dump, dac_vars) if spec else None)
    if not at or not spec:
        return []
    return _tables(dump.memory, at, spec, dump.memory.pointer_size, "x64" if dump.memory.pointer_size == 8 else "x86")


def _tables(space, at: int, spec: dict, ptr: int, arch: str, first_only: bool = False) -> list:
    """The segments of every table the map at ``at`` leads to (``first_only``: of its first table, to tell a
    map from another structure)."""
    out: list[tuple[int, int, int]] = []
    seen_maps: set[int] = set()
    while at and at not in seen_maps and len(seen_maps) < spec["max_maps"]:
        seen_maps.add(at)
        buckets = space.try_read_pointer(at + spec["map_buckets"][arch])
        for i in range(spec["buckets_per_map"] if buckets else 0):
            bucket = space.try_read_pointer(buckets + i * ptr)
            tables = space.try_read_pointer(bucket + spec["bucket_table"][arch]) if bucket else None
            for slot in range(spec["max_slots"] if tables else 0):
                table = space.try_read_pointer(tables + slot * ptr)
                segments = _segments(space, table, spec, ptr) if table else None
                if segments is None:
                    break  # past the last slot (workstation GC has one)
                out += [(s, s + spec["segment_size"], slot) for s in segments]
                if first_only:
                    return out
        at = space.try_read_pointer(at + spec["map_next"][arch])
    return sorted(set(out))


def _segments(space, table: int, spec: dict, ptr: int) -> list[int] | None:
    """The segments of the HandleTable at ``table`` (None: not a HandleTable with segments)."""
    size = spec["segment_size"]
    words = space.try_read(table, spec["table_words"] * ptr)
    if words is None:
        return None
    order = "little" if space.little_endian else "big"
    for k in range(spec["table_words"]):
        first = int.from_bytes(words[k * ptr : (k + 1) * ptr], order)
        if not first or first % size or not space.is_described(first):
            continue
        back = _back_pointer(space, first, table, spec, ptr)
        if back is None:
            continue
        found: dict[int, None] = {}  # in list order, with a set's membership test
        seg = first
        while seg and len(found) < spec["max_segments"]:
            if seg % size or space.try_read_pointer(seg + back) != table or seg in found:
                break
            found[seg] = None
            seg = space.try_read_pointer(seg + back - ptr)
        return list(found)
    return None


def _back_pointer(space, segment: int, table: int, spec: dict, ptr: int) -> int | None:
    """Where in a segment's header its pointer back to ``table`` is (TableSegment.pHandleTable): at any byte,
    not only at a pointer-aligned one (the header of .NET 10 packs it at +0x7d6, of .NET 8 at +0x7d0)."""
    header = space.try_read(segment, spec["segment_header"])
    if header is None:
        return None
    at = header.find(table.to_bytes(ptr, "little" if space.little_endian else "big"))
    return at if at >= ptr else None
