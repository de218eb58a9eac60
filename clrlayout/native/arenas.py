"""The native heap of a core as glibc's malloc holds it: :func:`read_native_heap` finds the malloc state
(:mod:`.libc`), follows the ring of arenas from ``main_arena``, walks each arena's heaps chunk by chunk
(:mod:`.chunks`), marks what the free lists hold (:mod:`.lists`) and finds the mmapped chunks.  What the dump lacks
(libc's writable data in a createdump heap dump) is said in one line, and what can still be read exactly is."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..errors import NativeHeapNotFound
from ..findings import FindingKind, Findings
from . import chunks as ch
from .layout import MallocLayout, for_version, layouts
from .libc import Libc, find_libc, find_main_arena, find_mp, foreign_allocators, is_libc, unnamed_libc
from .lists import Tcache, bin_chunks, fastbin_chunks, read_tcache

#: arenas followed along the ring at the most (glibc's default limit is 8 per core), and heaps per arena
MAX_ARENAS = 4096
MAX_HEAPS = 1 << 16
#: how far from a thread's TLS pointer its libc TLS variables (``tcache``, ``thread_arena``) are searched
TLS_SPAN = 16 * 1024
#: the architectures the profile lays glibc's structs out for, each with the register that is its threads' TLS
#: pointer when the dump holds it: x86-64's ``fs_base`` (in NT_PRSTATUS), arm64's TPIDR_EL0 (NT_ARM_TLS), the base
#: of the GDT entry i386's ``gs`` selects (NT_386_TLS).  A core without them (gcore's of i386, QEMU's): a thread's
#: tcache is found by its shape
ARCHES = {"x64": "fs_base", "arm64": "tpidr_el0", "x86": "gs_base"}
#: where a thread's static TLS blocks (libc's among them) lie from its thread pointer: below it (TLS variant II,
#: x86-64 and i386: the pointer is the TCB's, at the end), or above it (variant I, arm64: past a 16-byte TCB)
TLS_ABOVE = {"arm64"}
MISSING_LIBC_DATA = ("libc's writable data (main_arena, mp_) is not in this dump, as in createdump's default heap "
                     "dump: the main arena's figures, glibc's totals and its count of mmapped chunks need a full "
                     "dump (createdump's full type, dotnet-dump collect, gdb's gcore, a kernel core)")


@dataclass
class Arena:
    index: int
    address: int
    main: bool
    top: int = 0
    system_mem: int = 0
    max_system_mem: int = 0
    attached_threads: int = 0
    #: [start, end) of each heap (one for the main arena: the brk heap)
    heaps: list = field(default_factory=list)
    #: OS ids of the threads whose ``thread_arena`` is this one (where the dump has their TLS)
    threads: list = field(default_factory=list)
    #: whether the arena's own fields are in the dump (main_arena is not, in a createdump heap dump)
    readable: bool = True
    #: what its free lists hold, as glibc counts it: fastbins (count, bytes); bins (count, bytes masked, bytes as
    #: stored: malloc_info adds the size word's PREV_INUSE bit)
    fast: tuple = (0, 0)
    bins: tuple = (0, 0, 0)


@dataclass
class NativeHeap:
    """glibc's malloc state in one dump: arenas, every chunk (numpy arrays sorted by address), the tcaches."""

    libc: Libc
    layout: MallocLayout
    #: how the layout was chosen: "version" (libc said), or "shape" (the newest layout the dump's structures fit)
    layout_from: str
    main_arena: int | None
    mp: int | None
    #: mp_'s fields, when it is in the dump
    par: dict
    arenas: list
    tcaches: list
    address: np.ndarray
    size: np.ndarray
    state: np.ndarray
    arena: np.ndarray
    findings: Findings
    #: what the dump lacks, one sentence each
    missing: list = field(default_factory=list)
    #: the bytes of the mmapped chunks' mappings before their headers (prev_size: alignment corrections)
    mmapped_leads: int = 0
    warnings: list = field(default_factory=list)

    @property
    def version(self) -> str:
        v = self.libc.version
        return f"{v[0]}.{v[1]}" if v else f"unknown (the {self.layout.versions} layout fits)"


def read_native_heap(dump, exclude=()) -> NativeHeap:
    """glibc's malloc state of a Linux core.  ``exclude``: ``(start, end)`` ranges known to be no malloc memory
    (the GC heap's segments), where no mmapped chunk is looked for; file mappings never hold one."""
    if dump.format != "elf-core":
        raise NativeHeapNotFound("the Windows heap is not read yet: the native heap is read from Linux cores "
                                 "(glibc's malloc)")
    if dump.arch not in ARCHES:
        raise NativeHeapNotFound(f"glibc's malloc is read from x64, arm64 and x86 cores; this core is {dump.arch}")
    foreign = foreign_allocators(dump)
    if foreign and not any(is_libc(m.path) for m in dump.file_mappings):
        raise NativeHeapNotFound(f"the process allocates with {', '.join(foreign)}, which is not read")
    libc = find_libc(dump) or unnamed_libc(dump)
    chosen = for_version(libc.version, dump.arch)
    candidates = [chosen] if chosen else ([] if libc.version else list(layouts(dump.arch)))
    if not candidates:
        raise NativeHeapNotFound(f"glibc {libc.version[0]}.{libc.version[1]} has no tcache (before 2.26): its "
                                 f"malloc is not read")
    best = None
    for layout in candidates:
        try:
            heap = _read(dump, libc, layout, "version" if chosen else "shape", exclude)
        except NativeHeapNotFound:
            if foreign:  # glibc's malloc was never used: the other one is the process's allocator
                raise NativeHeapNotFound(f"the process allocates with {', '.join(foreign)}, which is not read "
                                         f"(no glibc malloc state in the dump)") from None
            raise
        if heap.main_arena is not None and not heap.findings.anomalies:
            best = heap
            break
        if best is None or (heap.main_arena is not None and
                            (best.main_arena is None or heap.findings.anomalies < best.findings.anomalies)):
            best = heap
    assert best is not None
    if best.main_arena is not None and foreign and not best.par.get("sbrk_base") and not len(best.address):
        raise NativeHeapNotFound(f"the process allocates with {', '.join(foreign)}, which is not read (glibc's "
                                 f"malloc holds nothing)")
    if foreign:
        best.warnings.append(f"{', '.join(foreign)} is loaded too: only what glibc's malloc holds is reported")
    return best


def _read(dump, libc: Libc, layout: MallocLayout, layout_from: str, exclude=()) -> NativeHeap:
    memory, findings = dump.memory, Findings()
    table = ch.ChunkTable()
    main = find_main_arena(dump, libc, layout)
    arenas: list[Arena] = []
    par: dict = {}
    mp = None
    missing: list[str] = []
    if main is not None:
        fields = _fields(memory, main, layout.arena, word=layout.word)
        mp = find_mp(dump, libc, layout, fields["top"], fields["system_mem"])
        if mp is not None:
            par = _fields(memory, mp, layout.par, ints=("n_mmaps", "n_mmaps_max", "max_n_mmaps", "no_dyn_threshold",
                                                        "hp_flags"), word=layout.word)
        addresses = _ring(memory, main, layout, findings)
    else:
        addresses = _arenas_by_heap_info(dump, layout)
        if not addresses:
            raise NativeHeapNotFound("no glibc malloc state found: neither main_arena in libc's data nor an arena's "
                                     "heap in the dump")
        missing.append(MISSING_LIBC_DATA)
    for i, address in enumerate(addresses):
        arena = _arena(memory, i, address, address == main, layout)
        arenas.append(arena)
        _walk_arena(memory, arena, layout, par, table, findings)
    if main is None:
        _main_heap_from_tls(dump, layout, arenas, table, findings)
    heaps = sorted((s, e) for a in arenas for s, e in a.heaps)
    # no mmapped chunk lies in a file's mapping or in memory known to be something else (the GC heap)
    skip = sorted(heaps + [(s, e) for s, e in dump.file_backed_ranges()] + list(exclude))
    runs = [(r.start, r.end) for r in memory.iter_regions()]
    ch.mmapped_chunks(memory, runs, skip, 4096, table, limit=1 << 24, word=layout.word)
    found = sum(1 for st in table.state if st == ch.MMAPPED)
    if found < par.get("n_mmaps", 0) or not par:  # glibc's count not met, or not known (no mp_): every page
        ch.mmapped_by_pages(memory, runs, skip, 4096, table, limit=1 << 24, word=layout.word)
    if not par:  # one line for what the dump lacks: the mmapped chunks' count is part of it
        note = "the mmapped chunks are found by their headers alone, with no count of glibc's to check them against"
        if missing:
            missing[0] += f"; {note}"
        else:
            missing.append(f"mp_ is not in this dump: {note}")
    order = np.argsort(np.frombuffer(table.address, dtype=np.uint64), kind="stable")
    cols = {}
    table.raw = None  # the size words served the walk (PREV_INUSE); the lists read their own
    for name, dtype in (("address", np.uint64), ("size", np.uint64), ("state", np.uint8),
                        ("arena", np.uint16)):  # a column at a time, each list let go once sorted: a smaller peak
        cols[name] = np.frombuffer(getattr(table, name), dtype=dtype)[order]
        setattr(table, name, None)
    del order
    heap = NativeHeap(libc, layout, layout_from, main, mp, par, arenas, [], findings=findings, missing=missing,
                      mmapped_leads=table.mmapped_leads, **cols)
    _mark_free_lists(dump, heap)
    from ..util.allocator import release_freed

    release_freed()  # the walk's lists and temporaries: what comes next (figures, leaks) starts from the columns
    return heap


def _main_heap_from_tls(dump, layout: MallocLayout, arenas: list, table, findings: Findings) -> None:
    """Without main_arena: the main (brk) heap, found by its first chunk, the main thread's tcache (the first
    block a process allocates) — through the main thread's TLS pointer, or at the start of a mapping — and walked
    to the end of the memory that holds it (its top is the chunk that reaches there)."""
    memory, w, header = dump.memory, layout.word, layout.chunk["header"]
    spans = [(s, e) for a in arenas for s, e in a.heaps]
    size = layout.tcache_chunk_size
    candidates = []
    tp = _thread_pointer(dump, dump.threads[0]) if dump.threads else None
    if tp:
        candidates += [v - header for v in _tls_words(dump, tp, w) if v > header]
    candidates += [_first_chunk(r.start, layout) for r in memory.iter_regions()]
    for first in candidates:
        if any(s <= first < e for s, e in spans):
            continue
        head = memory.try_read(first, header)
        if head is None or int.from_bytes(head[:w], "little") or int.from_bytes(head[w:], "little") != size | 1:
            continue
        end = memory.mapped_end(first)
        main = Arena(len(arenas), 0, True, readable=False, threads=[dump.threads[0].id] if dump.threads else [])
        arenas.append(main)
        before = len(table)
        ch.walk_heap(memory, first, end, None, main.index, table, findings, open_end=True, word=w)
        last = len(table) - 1
        main.heaps = [(first, table.address[last] + table.size[last] if last >= before else first)]
        return


def _first_chunk(at: int, layout: MallocLayout) -> int:
    """The first chunk at or after ``at``: where its user data (past the header) is aligned, as sysmalloc and
    _int_new_arena correct the brk start and the end of a new arena's malloc_state."""
    header, align = layout.chunk["header"], layout.chunk["alignment"]
    return (at + header + align - 1) // align * align - header


def _tls_words(dump, tp: int, word: int) -> list[int]:
    """The words of a thread's static TLS, nearest its thread pointer first (another thread's TLS may lie
    further on)."""
    if dump.arch in TLS_ABOVE:
        data = dump.memory.read_available(tp, TLS_SPAN)
    else:  # from the start of the memory that holds the pointer, when that is nearer than the span
        start = max(tp - TLS_SPAN, dump.memory.mapped_start(max(tp - 1, 0)), 0)
        data = dump.memory.read_available(start, tp - start)
    words = np.frombuffer(data[: len(data) // word * word], dtype=f"<u{word}").tolist()
    return words if dump.arch in TLS_ABOVE else words[::-1]


def _thread_pointer(dump, thread) -> int | None:
    """The thread's TLS pointer (below which x86-64's glibc keeps its TLS variables), None where not read."""
    name = ARCHES.get(dump.arch)
    return thread.register(dump.arch, name) if name else None


def _fields(memory, at: int, layout: dict, ints=(), word: int = 8) -> dict:
    size = layout.get("size") or layout.get("sizeof")
    data = memory.read_available(at, size)
    out = {}
    for name, off in layout.items():
        width = 4 if name in ints or name in ("mutex", "flags", "have_fastchunks") else word
        if name in ("size", "sizeof") or off + width > len(data):
            continue
        out[name] = int.from_bytes(data[off : off + width], "little")
    return out


def _ring(memory, main: int, layout: MallocLayout, findings: Findings) -> list[int]:
    """main_arena, then each arena its ``next`` reaches, until the ring closes."""
    out, seen, p = [main], {main}, memory.try_read_pointer(main + layout.arena["next"])
    while p and p != main:
        if p in seen or len(out) >= MAX_ARENAS or memory.try_read(p, layout.arena["size"]) is None:
            findings.add(FindingKind.NATIVE_BAD_LIST, p, "the ring of arenas does not close: a loop, or an arena "
                                                         "that is not in the dump")
            break
        out.append(p)
        seen.add(p)
        p = memory.try_read_pointer(p + layout.arena["next"])
    return out


def _arenas_by_heap_info(dump, layout: MallocLayout) -> list[int]:
    """Without main_arena: the non-main arenas, each inside the first heap_info of a 64 MB-aligned heap."""
    hmax, hi = layout.chunk["heap_max_size"], layout.heap_info
    out = []
    for r in dump.memory.iter_regions():
        h = (r.start + hmax - 1) // hmax * hmax
        while h + hi["sizeof"] <= r.end:
            ar = dump.memory.try_read_pointer(h + hi["ar_ptr"])
            size = dump.memory.try_read_pointer(h + hi["size"]) or 0
            if ar == h + hi["sizeof"] and 0 < size <= hmax:
                out.append(ar)
            h += hmax
    return out


def _arena(memory, index: int, address: int, main: bool, layout: MallocLayout) -> Arena:
    data = memory.try_read(address, layout.arena["size"])
    if data is None:
        return Arena(index, address, main, readable=False)
    f = _fields(memory, address, layout.arena, word=layout.word)
    return Arena(index, address, main, f["top"], f["system_mem"], f["max_system_mem"], f["attached_threads"])


def _walk_arena(memory, arena: Arena, layout: MallocLayout, par: dict, table, findings: Findings) -> None:
    c, hi, w = layout.chunk, layout.heap_info, layout.word
    top_raw = memory.try_read_pointer(arena.top + c["size"]) if arena.top else None
    top_end = arena.top + (top_raw & ~7) if top_raw is not None else None
    if arena.main:
        base = par.get("sbrk_base")
        if base and top_end:
            arena.heaps.append((base, top_end))
            first = _first_chunk(base, layout)
            if first > base:  # sysmalloc's correction of the brk start: part of system_mem, no chunk's
                table.add(base, first - base, 0, ch.ARENA, arena.index)
            ch.walk_heap(memory, first, top_end, arena.top, arena.index, table, findings, word=w)
        return
    hmax = c["heap_max_size"]
    h = arena.top & ~(hmax - 1) if arena.top else (arena.address - hi["sizeof"])
    seen: set[int] = set()
    top: int | None = arena.top or None
    while h and h not in seen and len(seen) < MAX_HEAPS:
        seen.add(h)
        ar = memory.try_read_pointer(h + hi["ar_ptr"])
        size = memory.try_read_pointer(h + hi["size"])
        if ar != arena.address or not size or size > hmax:
            findings.add(FindingKind.NATIVE_BAD_LIST, h, f"the heap at {h:#x} does not belong to the arena at "
                                                         f"{arena.address:#x} (heap_info.ar_ptr {ar!r})")
            break
        if arena.address == h + hi["sizeof"]:
            first = _first_chunk(arena.address + layout.arena["size"], layout)
        else:
            first = h + hi["sizeof"]
        arena.heaps.append((h, h + size))
        table.add(h, first - h, 0, ch.ARENA, arena.index)
        ch.walk_heap(memory, first, h + size, top, arena.index, table, findings, word=w)
        top = None
        h = memory.try_read_pointer(h + hi["prev"]) or 0
    arena.heaps.sort()


def _mark_free_lists(dump, heap: NativeHeap) -> None:
    """tcache and fastbin chunks (which look in use in a walk) marked as such; every bin's ring checked against
    the chunks the walk found free."""
    memory, layout, findings = dump.memory, heap.layout, heap.findings
    spans = sorted((s, e) for a in heap.arenas for s, e in a.heaps)

    def inside(p: int) -> bool:
        return any(s <= p < e for s, e in spans)

    def position(p: int) -> int | None:
        i = int(np.searchsorted(heap.address, p))
        return i if i < len(heap.address) and int(heap.address[i]) == p else None

    for tc in _tcaches(dump, heap, inside, position):
        heap.tcaches.append(tc)
        for p in tc.chunks:
            i = position(p)
            if i is None or heap.state[i] != ch.IN_USE:
                findings.add(FindingKind.NATIVE_BAD_LIST, p, "a tcache entry is not an in-use chunk of the walk")
                continue
            heap.state[i] = ch.TCACHE
    for arena in heap.arenas:
        if not arena.readable or not arena.heaps:
            continue
        fast = fastbin_chunks(memory, arena.address, layout, inside, findings)
        arena.fast = (len(fast), sum(fast.values()))
        for p in fast:
            i = position(p)
            if i is None or heap.state[i] != ch.IN_USE:
                findings.add(FindingKind.NATIVE_BAD_LIST, p, "a fastbin chunk is not an in-use chunk of the walk")
                continue
            heap.state[i] = ch.FASTBIN
        listed = bin_chunks(memory, arena.address, layout, inside, findings)
        arena.bins = (len(listed), sum(raw & ~7 for _, raw in listed.values()), sum(raw for _, raw in listed.values()))
        free = {int(heap.address[i]) for i in np.flatnonzero((heap.state == ch.BIN) & (heap.arena == arena.index))}
        for p in set(listed) ^ free:
            findings.add(FindingKind.NATIVE_MISMATCH, p, "a chunk the walk found free is in no bin" if p in free
                         else "a chunk in a bin is not free in the walk")


def _tcaches(dump, heap: NativeHeap, inside, position) -> list[Tcache]:
    """Each thread's tcache, from the ``tcache`` pointer among its libc TLS variables (by its thread pointer), its
    arena from ``thread_arena`` beside it; without the threads' TLS pointers, every chunk of the tcache struct's
    size whose counts and lists are a tcache's and hold something."""
    layout, memory = heap.layout, dump.memory
    size = layout.tcache_chunk_size
    arenas = {a.address: a for a in heap.arenas}
    found: dict[int, Tcache] = {}
    scratch = Findings()
    for thread in dump.threads:
        tp = _thread_pointer(dump, thread)
        if not tp:
            continue
        arena_seen = tcache_seen = False
        for w in _tls_words(dump, tp, layout.word):
            if not w or (arena_seen and tcache_seen):
                continue
            if w in arenas and not arena_seen:
                arenas[w].threads.append(thread.id)
                arena_seen = True
                continue
            i = position(w - layout.chunk["header"]) if not tcache_seen else None
            if i is not None and int(heap.size[i]) == size and heap.state[i] == ch.IN_USE:
                tc = found.get(w) or read_tcache(memory, w, layout, inside, scratch)
                if tc is not None:
                    tc.thread = thread.id
                    found[w] = tc
                    tcache_seen = True
    if not any(_thread_pointer(dump, t) for t in dump.threads):
        for i in np.flatnonzero((heap.size == size) & (heap.state == ch.IN_USE)):
            w = int(heap.address[i]) + layout.chunk["header"]
            tc = read_tcache(memory, w, layout, inside, scratch)
            if tc is not None and tc.chunks:
                found[w] = tc
        heap.missing.append(f"the dump has no thread's TLS pointer ({ARCHES[dump.arch]}): tcaches are found by "
                            "their shape, without their threads or the arenas' threads")
    for tc in found.values():  # the lists once more, their faults now counted
        read_tcache(memory, tc.address, layout, inside, heap.findings)
    return sorted(found.values(), key=lambda t: t.address)
