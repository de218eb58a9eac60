"""``clrlayout memory``: where the memory went, as ``!address -summary`` and ``!eeheap -gc`` print it."""

from __future__ import annotations

from ..analyses.memory import KINDS, LOADER_HEAP_OWNERS, MemoryMap
from ..heap.segments import HEAPS
from .results import Result
from .text import hexaddr, table


def _pct(part: int, whole: int) -> str:
    return f"{100.0 * part / whole:.2f}%" if whole else "-"


def record(mm: MemoryMap, with_ranges: bool, pointer_size: int) -> dict:
    """The JSON of ``memory`` (its fields: docs/guide/memory.md)."""
    kinds = mm.kinds()
    out = {"total_bytes": mm.total_bytes,
           "kinds": [{"kind": k, "bytes": kinds[k][1], "ranges": kinds[k][0]} for k in KINDS]}
    if mm.gc is not None:
        heaps = []
        keys = sorted(set(mm.gc.objects) | set(mm.gc.free), key=lambda k: (k[0], HEAPS.index(k[1])))
        for heap, gen in keys:
            objects = mm.gc.objects.get((heap, gen), [0, 0])
            free = mm.gc.free.get((heap, gen), [0, 0])
            heaps.append({"heap": heap, "generation": gen, "objects": objects[0], "object_bytes": objects[1],
                          "free_objects": free[0], "free_bytes": free[1]})
        segments = [{"heap": heap, "kind": kind, "segments": v[0], "allocated_bytes": v[1], "committed_bytes": v[2],
                     "reserved_bytes": v[3]} for (heap, kind), v in sorted(mm.gc.segments.items())]
        out["gc"] = {
            "heaps": heaps, "segments": segments,
            "object_bytes": sum(v[1] for v in mm.gc.objects.values()),
            "free_bytes": sum(v[1] for v in mm.gc.free.values()),
            "allocated_bytes": sum(v[1] for v in mm.gc.segments.values()),
            "committed_bytes": sum(v[2] for v in mm.gc.segments.values()),
        }
    else:
        out["gc"] = None
    if mm.loader_heaps is not None:
        out["loader_heaps"] = _loader_heaps(mm)
    out["gc_bookkeeping"] = _bookkeeping(mm)
    out["native_heap"] = mm.native_heap
    out["gc_handle_tables"] = _handle_tables(mm)
    if mm.address_space:
        out["address_space"] = [{"what": w, "value": v, "ranges": n, "bytes": b}
                                for (w, v), (n, b) in sorted(mm.address_space.items())]
    if with_ranges:
        out["regions"] = [{"start": f"{p.start:#x}", "size": p.size, "kind": p.kind, "owner": p.owner}
                          for p in mm.pieces]
    return out


def _held(mm: MemoryMap, *owners: str) -> int:
    """The bytes of runtime memory the dump holds that these owners claim."""
    return sum(p.size for p in mm.pieces if p.kind == "runtime" and p.owner in owners)


def _loader_heaps(mm: MemoryMap) -> dict:
    """The runtime's loader heaps: blocks, the lists (heaps) they are in, reserved bytes and bytes the dump
    holds of them (of which code)."""
    lh = mm.loader_heaps
    return {"blocks": len(lh.blocks), "lists": lh.lists, "reserved_bytes": lh.reserved_bytes,
            "dump_bytes": _held(mm, *LOADER_HEAP_OWNERS.values()), "code_dump_bytes": _held(mm,
                                                                                            LOADER_HEAP_OWNERS[True])}


def _bookkeeping(mm: MemoryMap) -> dict:
    """The GC's bookkeeping: its reservations, their bytes and the bytes the dump holds of them."""
    return {"reservations": len(mm.bookkeeping), "reserved_bytes": sum(hi - lo for lo, hi in mm.bookkeeping),
            "dump_bytes": _held(mm, "GC bookkeeping")}


def _handle_tables(mm: MemoryMap) -> dict:
    """The GC's handle tables: their segments, bytes, and the bytes the dump holds of them."""
    return {"segments": len(mm.handle_tables), "bytes": sum(hi - lo for lo, hi in mm.handle_tables),
            "dump_bytes": _held(mm, "GC handle table")}


def result(mm: MemoryMap, with_ranges: bool, pointer_size: int) -> Result:
    """``memory``'s answer: the JSON record, and the tables."""
    return Result(lambda: _lines(mm, with_ranges, pointer_size), document=record(mm, with_ranges, pointer_size))


def _lines(mm: MemoryMap, with_ranges: bool, pointer_size: int) -> list[str]:
    kinds = mm.kinds()
    total = mm.total_bytes
    lines = ["Memory the dump holds, by what it is:"]
    rows = [[k, n, f"{b:,}", _pct(b, total)] for k, (n, b) in kinds.items() if n]
    rows.append(["total", sum(n for n, _ in kinds.values()), f"{total:,}", _pct(total, total)])
    lines += table(["Usage", "Ranges", "Bytes", "% of dump"], rows, "lrrr", indent="  ")
    if mm.native_heap is not None:
        n = mm.native_heap
        lines += ["", f"Native memory, by what glibc's malloc says of it ({n['arenas']} arenas; `clrlayout native` "
                      f"for each):"]
        rows = [[what, f"{n[key]:,}"] for what, key in (("in use (malloc'd blocks)", "in_use"),
                                                        ("free in the arenas (tcache, fastbins, bins, top)",
                                                         "free_in_arenas"),
                                                        ("arena overhead (heap_info, malloc_state, fenceposts)",
                                                         "arena_overhead"),
                                                        ("mmapped chunks", "mmapped_chunks"),
                                                        ("other native memory", "other_native"))]
        lines += table(["What", "Bytes"], rows, "lr", indent="  ")
    if mm.loader_heaps is not None and mm.loader_heaps.blocks:
        lh = _loader_heaps(mm)
        lines += ["", "Loader heaps (the runtime's MethodTables, EEClasses, stubs and JIT-compiled code):"]
        lines += table(["Heaps", "Blocks", "Reserved", "In the dump", "Executable (code, stubs)"],
                       [[f"{lh['lists']:,}", f"{lh['blocks']:,}", f"{lh['reserved_bytes']:,}",
                         f"{lh['dump_bytes']:,}", f"{lh['code_dump_bytes']:,}"]], "rrrrr", indent="  ")
    if mm.bookkeeping or mm.handle_tables:
        bk, ht = _bookkeeping(mm), _handle_tables(mm)
        lines += ["", "The GC's own memory:"]
        rows = [["bookkeeping (card table, brick table, mark array, region map)", f"{bk['reservations']:,}",
                 f"{bk['reserved_bytes']:,}", f"{bk['dump_bytes']:,}"],
                ["handle tables (GC handles)", f"{ht['segments']:,}", f"{ht['bytes']:,}", f"{ht['dump_bytes']:,}"]]
        lines += table(["What", "Ranges", "Reserved", "In the dump"], rows, "lrrr", indent="  ")
    if mm.address_space:
        space = sum(b for (w, _), (_, b) in mm.address_space.items() if w == "state")
        for what, title in (("state", "State"), ("type", "Type"), ("protect", "Protect")):
            items = sorted(((v, n, b) for (w, v), (n, b) in mm.address_space.items() if w == what),
                           key=lambda x: -x[2])
            if items:
                lines += ["", f"Address space by {title.lower()} (the dump's memory-info list):"]
                lines += table([title, "Ranges", "Bytes", "% of address space"],
                               [[v, n, f"{b:,}", _pct(b, space)] for v, n, b in items], "lrrr", indent="  ")
    if mm.gc is not None:
        lines += ["", "GC heap (object and free-object bytes, aligned, from the heap walk):"]
        keys = sorted(set(mm.gc.objects) | set(mm.gc.free), key=lambda k: (k[0], HEAPS.index(k[1])))
        rows = []
        for heap, gen in keys:
            o = mm.gc.objects.get((heap, gen), [0, 0])
            f = mm.gc.free.get((heap, gen), [0, 0])
            rows.append([heap, gen, f"{o[0]:,}", f"{o[1]:,}", f"{f[0]:,}", f"{f[1]:,}", _pct(f[1], o[1] + f[1])])
        lines += table(["Heap", "Gen", "Objects", "Object bytes", "Free", "Free bytes", "Fragmentation"], rows,
                       "rlrrrrr", indent="  ")
        lines += ["", "GC segments:"]
        lines += table(["Heap", "Kind", "Segments", "Allocated", "Committed", "Reserved"],
                       [[h, k, v[0], f"{v[1]:,}", f"{v[2]:,}", f"{v[3]:,}"]
                        for (h, k), v in sorted(mm.gc.segments.items())], "rlrrrr", indent="  ")
    if with_ranges:
        lines += ["", "Ranges:"]
        lines += table(["Start", "Size", "Kind", "Owner"],
                       [[hexaddr(p.start, pointer_size), f"{p.size:,}", p.kind, p.owner] for p in mm.pieces],
                       "lrll", indent="  ")
    return lines
