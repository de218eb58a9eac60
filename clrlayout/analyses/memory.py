"""Where the process's memory went: every byte the dump holds, by kind, and the GC heap by generation.

Each range of the dump's memory gets the kind of what claims it, the first of: the GC heap (its segments or
regions, from their start to their committed end), a thread's stack (the thread list), an image (the module
list, or on Linux the file mappings of a module's file), the runtime's own memory (its loader heaps, found by
their block lists, ``runtime/loaderheaps.py``: MethodTables, EEClasses, stubs and JIT-compiled code; the GC's
bookkeeping, ``heap/bookkeeping.py``: card table, brick table, mark array; its handle tables,
``heap/handletables.py``; and on Linux the memfd the runtime double-maps its executable memory through,
.NET 7+), a mapped file (any other file mapping, or a minidump's MEM_MAPPED range), else native memory
(private memory: the C heaps, the runtime's other data).  The loader heaps and the GC's bookkeeping and
handle tables are the runtime's own records of its reservations: they come before a thread's stack on a
Linux core, which is the whole mapping that holds the stack pointer.
The kinds add up to the dump's memory byte for byte.  The GC figures (object and free-object bytes per heap
and generation) come from the same vectorised walk ``stats`` uses; on minidumps with a memory-info list, the
whole address space is summarised by state, type and protection as ``!address -summary`` does.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import numpy as np

from ..heap.segments import HEAPS
from ..runtime.loaderheaps import LoaderHeaps
from ..util.arrays import distinct

#: kinds, in the order they claim memory (the first wins where claims overlap) and are shown
KINDS = ("gc-heap", "stack", "image", "runtime", "mapped-file", "native")
#: the memfd through which CoreCLR 7+ on Linux maps its executable memory twice (W^X: a writable view and an
#: executable one; ExecutableAllocator's double mapper)
DOUBLE_MAPPER = "/memfd:doublemapper"
#: a loader heap block's owner by whether its memory is executable (the JIT's code heaps and the stub and
#: precode heaps are; the heaps of MethodTables, EEClasses, FieldDescs and statics are not; None: the dump
#: does not say)
LOADER_HEAP_OWNERS = {True: "loader heap: code", False: "loader heap: data", None: "loader heap"}
#: a segment's header (the GC's heap_segment) lies this close below its first object at most
SEGMENT_HEADER_ROOM = 0x1000

PROTECTIONS = {0x01: "PAGE_NOACCESS", 0x02: "PAGE_READONLY", 0x04: "PAGE_READWRITE", 0x08: "PAGE_WRITECOPY",
               0x10: "PAGE_EXECUTE", 0x20: "PAGE_EXECUTE_READ", 0x40: "PAGE_EXECUTE_READWRITE",
               0x80: "PAGE_EXECUTE_WRITECOPY"}


@dataclass(frozen=True)
class Piece:
    start: int
    end: int
    kind: str
    owner: str  # a module's file name, "thread 1234", "heap 0 gen2", a mapped file's path, or ""

    @property
    def size(self) -> int:
        return self.end - self.start


@dataclass
class GcFigures:
    """Object and free-object bytes (aligned, as on the heap) per (heap, generation), and the segments'
    allocated, committed and reserved bytes per (heap, segment kind)."""

    objects: dict = field(default_factory=dict)  # (heap, generation) -> [count, bytes]
    free: dict = field(default_factory=dict)  # (heap, generation) -> [count, bytes]
    segments: dict = field(default_factory=dict)  # (heap, kind) -> [segments, allocated, committed, reserved]

    def merge(self, other: GcFigures) -> None:
        for mine, theirs in ((self.objects, other.objects), (self.free, other.free)):
            for k, (n, b) in theirs.items():
                cur = mine.setdefault(k, [0, 0])
                cur[0] += n
                cur[1] += b


@dataclass
class MemoryMap:
    total_bytes: int
    pieces: list
    gc: GcFigures | None
    #: minidumps with a memory-info list: (what, value) -> [ranges, bytes] for state, type and protection
    address_space: dict = field(default_factory=dict)
    #: the runtime's loader heaps (None: not looked for)
    loader_heaps: LoaderHeaps | None = None
    #: (start, end) of the GC's bookkeeping reservations
    bookkeeping: list = field(default_factory=list)
    #: (start, end) of the GC's handle table segments
    handle_tables: list = field(default_factory=list)
    #: glibc's malloc in a Linux core (:func:`native_split`): what its native bytes are; None: not read
    native_heap: dict | None = None

    def kinds(self) -> dict:
        out = {k: [0, 0] for k in KINDS}
        for p in self.pieces:
            out[p.kind][0] += 1
            out[p.kind][1] += p.size
        return out


def claims(session, loader_heaps: LoaderHeaps | None = None, bookkeeping=(),
           handle_tables=(), native=()) -> list[tuple[int, int, float, str, str]]:
    """(start, end, rank, kind, owner) of everything that claims memory; lower rank wins (a fraction ranks a
    claim between two kinds).  ``loader_heaps``:
    the runtime's loader heap blocks (``Session.loader_heaps``); ``bookkeeping``: the GC's bookkeeping
    reservations (``Session.gc_bookkeeping``); ``handle_tables``: the GC's handle table segments
    (``Session.gc_handle_tables``); ``native``: (start, end, owner) of glibc's heaps and mmapped chunks."""
    d = session.dump
    out = []
    rank = {k: i for i, k in enumerate(KINDS)}
    for seg in session.heap.segments if session.heap.exact else []:
        lo = seg.header if seg.header is not None and 0 <= seg.start - seg.header <= SEGMENT_HEADER_ROOM \
            else seg.start
        hi = max(seg.end, seg.committed or 0)  # committed but not yet allocated memory is the heap's too
        out.append((lo, hi, rank["gc-heap"], "gc-heap", f"heap {seg.heap} {seg.kind}"))
    for t in d.threads:
        if t.stack_start is not None and t.stack_end is not None and t.stack_start < t.stack_end:
            out.append((t.stack_start, t.stack_end, rank["stack"], "stack", f"thread {t.id}"))
    module_paths = {m.path for m in d.modules}
    if d.file_mappings:
        for m in d.file_mappings:
            if m.path.startswith(DOUBLE_MAPPER):
                # the runtime's, after the loader heap blocks that lie in it (they say more)
                out.append((m.start, m.end, rank["runtime"] + 0.5, "runtime",
                            "executable memory (W^X double mapping)"))
                continue
            kind = "image" if m.path in module_paths or _looks_like_image(m.path) else "mapped-file"
            out.append((m.start, m.end, rank[kind], kind, os.path.basename(m.path) if kind == "image" else m.path))
    else:
        for m in d.modules:
            out.append((m.base, m.end, rank["image"], "image", m.path.replace("\\", "/").rsplit("/", 1)[-1]))
    for i in d.memory_info:
        if i.type in ("image", "mapped") and i.state == "commit":
            kind = "image" if i.type == "image" else "mapped-file"
            out.append((i.base, i.end, rank[kind], kind, ""))
    # the runtime's own records of its reservations are exact: they come before a Linux core's thread stack,
    # which is the whole mapping that holds the stack pointer (the kernel merges neighbouring mappings of the
    # same protection, a stack with the GC's bookkeeping after it)
    exact = rank["stack"] - 0.5
    for b in loader_heaps.blocks if loader_heaps is not None else ():
        out.append((b.start, b.end, exact, "runtime", LOADER_HEAP_OWNERS[d.executable(b.start)]))
    for lo, hi in bookkeeping:
        out.append((lo, hi, exact, "runtime", "GC bookkeeping"))
    for lo, hi in handle_tables:
        out.append((lo, hi, exact, "runtime", "GC handle table"))
    for lo, hi, owner in native:  # glibc's own record of its heaps: exact, as the runtime's are
        out.append((lo, hi, exact, "native", owner))
    return out


def native_split(totals: dict, arenas: list, mmapped: dict, native_bytes: int, reason: str | None) -> dict:
    """The native memory by what glibc's malloc says of it: in use, free in the arenas (tcache, fastbins, bins,
    top), the arenas' own overhead, the mmapped chunks, and the rest of the native memory (other allocators,
    the runtime's own mappings)."""
    free = sum(totals[k]["bytes"] for k in ("tcache", "fastbins", "bins")) + totals["top_bytes"]
    split = {"in_use": totals["in_use"]["bytes"], "free_in_arenas": free, "arena_overhead": totals["overhead_bytes"],
             "mmapped_chunks": mmapped["bytes"], "arenas": len(arenas)}
    split["other_native"] = max(0, native_bytes - sum(v for k, v in split.items() if k != "arenas"))
    split["missing"] = reason
    return split


def _looks_like_image(path: str) -> bool:
    name = path.rsplit("/", 1)[-1].lower()
    return name.endswith((".dll", ".exe")) or ".so" in name


def paint(runs, claimed) -> list[Piece]:
    """Cut the dump's memory runs at every claim's edges; each piece takes its best claim (or native)."""
    events = []
    for lo, hi, rank, kind, owner in claimed:
        if lo < hi:
            events.append((lo, 0, rank, kind, owner))
            events.append((hi, 1, rank, kind, owner))
    events.sort(key=lambda e: e[0])
    pieces: list[Piece] = []
    active: dict = {}
    k = 0
    for start, end in runs:
        while k < len(events) and events[k][0] <= start:
            _apply(active, events[k])
            k += 1
        pos = start
        while pos < end:
            nxt = events[k][0] if k < len(events) and events[k][0] < end else end
            if nxt > pos:
                best = min(active, default=None)
                kind, owner = (best[1], best[2]) if best is not None else ("native", "")
                if pieces and pieces[-1].end == pos and (pieces[-1].kind, pieces[-1].owner) == (kind, owner):
                    pieces[-1] = Piece(pieces[-1].start, nxt, kind, owner)
                else:
                    pieces.append(Piece(pos, nxt, kind, owner))
            pos = nxt
            while k < len(events) and events[k][0] <= pos:
                _apply(active, events[k])
                k += 1
    return pieces


def _apply(active: dict, event) -> None:
    _, closing, rank, kind, owner = event
    key = (rank, kind, owner)
    if closing:
        active[key] -= 1
        if not active[key]:
            del active[key]
    else:
        active[key] = active.get(key, 0) + 1


def gc_window(win, mts) -> GcFigures:
    """The object and free-object bytes of one window of the heap walk, per (heap, generation)."""
    g = GcFigures()
    if not len(win.method_tables):
        return g
    seg = win.segment
    codes = seg.heap_codes(win.offsets.astype(np.uint64) + np.uint64(win.base))
    free = np.zeros(len(win.method_tables), dtype=bool)
    for mt in distinct(win.method_tables).tolist():
        t = mts.get(mt)
        if t is not None and t.kind == "free":
            free |= win.method_tables == mt
    for which, mask in ((g.objects, ~free), (g.free, free)):
        counts = np.bincount(codes[mask], minlength=len(HEAPS))
        sums = np.bincount(codes[mask], weights=win.aligned[mask], minlength=len(HEAPS))
        for code in np.flatnonzero(counts).tolist():
            which[(seg.heap, HEAPS[code])] = [int(counts[code]), int(sums[code])]
    return g


def segment_figures(segments) -> dict:
    out: dict = {}
    for s in segments:
        cur = out.setdefault((s.heap, s.kind), [0, 0, 0, 0])
        cur[0] += 1
        cur[1] += s.end - s.start
        cur[2] += max(0, (s.committed or s.end) - s.start)
        cur[3] += max(0, (s.reserved or s.committed or s.end) - s.start)
    return out


def address_space(memory_info) -> dict:
    """``!address -summary``'s totals: (what, value) -> [ranges, bytes] by state, type and protection."""
    out: dict = {}
    for i in memory_info:
        keys = [("state", i.state)]
        if i.state != "free":
            keys.append(("type", i.type or "private"))
        if i.state == "commit":
            keys.append(("protect", protection(i.protect)))
        for key in keys:
            cur = out.setdefault(key, [0, 0])
            cur[0] += 1
            cur[1] += i.size
    return out


def protection(value: int) -> str:
    base = PROTECTIONS.get(value & 0xFF, f"{value & 0xFF:#x}")
    extra = [n for bit, n in ((0x100, "PAGE_GUARD"), (0x200, "PAGE_NOCACHE"), (0x400, "PAGE_WRITECOMBINE"))
             if value & bit]
    return "|".join([base] + extra)
