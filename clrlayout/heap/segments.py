"""Where the GC heap is: its segments or regions, what each holds and where its objects end, without the DAC.

The exact way (``gc-dac-vars``): CoreCLR's GC publishes a ``GcDacVars`` structure in the runtime module's
writable data (two version bytes, the size of its generation class, then a pointer per DAC variable; the
layouts are data in ``formats/gc-dac-vars.toml``).  It is found by that shape and trusted only after what
its pointers lead to checks out: ``max_gen`` is 2, and the generation tables lead to consistent heap
segments.  Under server GC the variables sit in each heap's ``gc_heap`` (from ``GcDacVars.g_heaps``).  Since
.NET 6 the GC also exports the offsets of its ``gc_heap`` and ``generation`` fields, which are read instead
of assumed; older runtimes use the ``dac_gc_heap`` / ``dac_generation`` layouts of the data file.

Each generation's table entry starts a list of ``heap_segment`` records:

- the segments GC (.NET Core, .NET 5-6, 32-bit): generation 2's list holds the small-object segments, the
  last of them the ephemeral one (generations 0 and 1 at its end, from their ``allocation_start``);
  generation 3's the large object heap, generation 4's (.NET 5+) the pinned object heap;
- regions (.NET 7+ on 64-bit): every generation has its own list of regions, gen0, gen1, gen2, LOH, POH.

Read-only segments at the head of generation 2's list are the frozen (non-GC) heap of .NET 8+: string
literals and RuntimeType objects.  Each segment is walked from ``mem`` to ``allocated``, the ephemeral one
(the region gen0 allocates in) to ``alloc_allocated``: its own ``allocated`` is only updated at GC time.

When no such structure can be used (.NET Framework, dumps without the runtime's data) ``find_gc_heap``
says why; the caller falls back to a checked object scan (``scan.py``), inside whatever bounds the
bookkeeping that could be read gives.
"""

from __future__ import annotations

import bisect
import functools
import struct
from dataclasses import dataclass, field

import numpy as np

from ..dump import DumpFile, Module
from ..dump.addrspace import AddressSpace
from ..formats import load as load_format

#: the heap an object is on, by code: the GC's generation number for the first five (SOS's gen 3 is the LOH,
#: 4 the POH), then the frozen (non-GC) heap, and "soh" for a small object whose generation is not known
HEAPS = ("gen0", "gen1", "gen2", "loh", "poh", "frozen", "soh")
HEAP_CODES = {name: code for code, name in enumerate(HEAPS)}
LARGE_HEAPS = (HEAP_CODES["loh"], HEAP_CODES["poh"])


def generation_number(code: int) -> int | None:
    """SOS's generation number of a heap code (0, 1, 2; 3 LOH, 4 POH); None for the frozen heap and for a
    generation that is not known."""
    return code if code <= HEAP_CODES["poh"] else None


@dataclass(frozen=True)
class Segment:
    """A range of the GC heap that holds objects back to back from ``start`` to ``end``."""

    start: int
    end: int
    #: "gen0" | "gen1" | "gen2" (regions) | "soh" (a small-object segment: generations by address) | "loh"
    #: | "poh" | "frozen"
    kind: str
    header: int | None = None  # address of the heap_segment structure
    ephemeral: bool = False
    used: int | None = None
    committed: int | None = None
    reserved: int | None = None
    flags: int = 0
    #: the GC heap it belongs to (server GC has one per core)
    heap: int = 0
    #: a small-object segment's generation starts: where generation 1 and generation 0 begin (the ephemeral
    #: segment; the others are all generation 2)
    generation_starts: tuple = ()

    @property
    def large(self) -> bool:
        """Objects aligned as the large object heap aligns them (8 bytes, also on 32-bit)."""
        return self.kind in ("loh", "poh")

    @property
    def size(self) -> int:
        return self.end - self.start

    def generation(self, address: int) -> str:
        """The heap an object at ``address`` is on: gen0, gen1, gen2, loh, poh or frozen."""
        if self.kind != "soh":
            return self.kind
        if not self.generation_starts:
            return "gen2"
        gen1, gen0 = self.generation_starts
        return "gen0" if address >= gen0 else "gen1" if address >= gen1 else "gen2"

    def heap_codes(self, addresses: np.ndarray) -> np.ndarray:
        """The heap code (:data:`HEAPS`) of the objects at ``addresses`` (uint64), as :meth:`generation` says."""
        if self.kind != "soh":
            return np.full(len(addresses), HEAP_CODES[self.kind], dtype=np.uint8)
        out = np.full(len(addresses), HEAP_CODES["gen2"], dtype=np.uint8)
        if self.generation_starts:
            gen1, gen0 = (np.uint64(a) for a in self.generation_starts)
            out -= (addresses >= gen1).astype(np.uint8) + (addresses >= gen0).astype(np.uint8)
        return out


@dataclass
class GcDacVars:
    address: int
    major: int
    minor: int
    generation_size: int
    generation_count: int
    fields: dict  # name -> address of the variable (the pointer stored in GcDacVars)
    layout: dict = field(default_factory=dict, repr=False)
    #: the GC's own offsets of its gc_heap and generation fields (name -> offset, -1: no such field), when
    #: it exports them (.NET 6+)
    gc_heap_offsets: dict | None = None
    generation_offsets: dict | None = None


@dataclass
class GcHeap:
    method: str  # "gc-dac-vars" | "object-scan"
    segments: list = field(default_factory=list)
    gc_mode: str | None = None  # "workstation" | "server"
    dac_vars: GcDacVars | None = None
    #: "segments" or "regions" (.NET 7+), when the GC's bookkeeping says
    layout: str | None = None
    #: how many GC heaps (server GC: one per core)
    heap_count: int = 0
    #: known ranges inside segments that hold no objects (allocation contexts)
    gaps: list = field(default_factory=list)
    warnings: list = field(default_factory=list)
    #: where objects can be, as far as the GC's bookkeeping could be read, also when the exact walk is not
    #: possible: (start, end) ranges, end None for "as far as the dump's memory goes"; None when nothing of
    #: the bookkeeping could be read (a scan then looks at all of the process's own memory)
    bounds: list | None = None

    @property
    def exact(self) -> bool:
        return self.method == "gc-dac-vars"

    def segment_at(self, address: int) -> Segment | None:
        """The segment whose objects' range holds ``address``."""
        starts = getattr(self, "_starts", None)
        if starts is None or len(starts) != len(self.segments):
            self._order = sorted(self.segments, key=lambda s: s.start)
            self._starts = starts = [s.start for s in self._order]
        i = bisect.bisect_right(starts, address) - 1
        if i >= 0 and address < self._order[i].end:
            return self._order[i]
        return None


@functools.lru_cache(maxsize=4)
def gc_interface(directory: str | None = None) -> dict:
    """The GC's interface to the DAC (``formats/gc-dac-vars.toml``)."""
    return load_format("gc-dac-vars", directory)


# --- finding GcDacVars ------------------------------------------------------------------------------


def search_ranges(dump: DumpFile, module: Module) -> list[tuple[int, int]]:
    """The runtime image and, for ELF cores, the anonymous mappings right after it (its .bss)."""
    hi = module.end
    if dump.format == "elf-core":
        hi = module.end + 64 * 1024 * 1024
        # stop at the next other module
        for m in dump.modules:
            if module.end <= m.base < hi and m.path != module.path:
                hi = m.base
    return [(module.base, hi)]


def find_gc_dac_vars(dump: DumpFile, module: Module, warnings: list) -> GcDacVars | None:
    space = dump.memory
    ptr = space.pointer_size
    dtype = np.dtype("<u8" if ptr == 8 else "<u4") if space.little_endian else np.dtype(">u8" if ptr == 8 else ">u4")
    layouts = {layout["major"]: layout for layout in gc_interface()["layouts"]}
    rejected = 0
    for lo, hi in search_ranges(dump, module):
        for addr, data in space.iter_windows(lo, hi, record=False):
            head = (-addr) % ptr
            n = (len(data) - head) // ptr
            if n < 4:
                continue
            w = np.frombuffer(data, dtype=dtype, count=n, offset=head)
            version = w[:-2]
            major = version & 0xFF
            minor = (version >> 8) & 0xFF
            gen_size = w[1:-1]
            ok = ((version >> 16) == 0) & np.isin(major, list(layouts)) & (minor < 64) \
                & (gen_size >= 8 * ptr) & (gen_size <= 4096) & (gen_size % ptr == 0)
            for i in np.flatnonzero(ok):
                at = addr + head + int(i) * ptr
                found = _check_dac_vars(space, at, layouts[int(major[i])], module)
                if found is not None:
                    return found
                rejected += 1
    if rejected:
        warnings.append(f"{rejected} GcDacVars look-alikes in the runtime's data did not check out")
    return None


def _check_dac_vars(space: AddressSpace, at: int, layout: dict, module: Module) -> GcDacVars | None:
    ptr = space.pointer_size
    nhead = len(layout["header"]) - 1  # the two version bytes share one word
    names = layout["fields"] + layout.get("appended", [])
    raw = space.try_read(at, (nhead + len(names)) * ptr)
    if raw is None:
        raw = space.read_available(at, (nhead + len(names)) * ptr)  # a later variable may lie past the dump
        if len(raw) < (nhead + names.index("g_heaps") + 1) * ptr:
            return None
    words = [space.unpack_pointer(raw, i * ptr) for i in range(len(raw) // ptr)]
    version, gen_size = words[0], words[1]
    gen_count = layout["generations"] or (words[2] if nhead >= 3 else 0)
    if not 4 <= gen_count <= 8:
        return None
    fields = dict(zip(names, words[nhead:]))
    max_gen = space.try_read_u32(fields["max_gen"]) if fields.get("max_gen") else None
    if max_gen != 2:
        return None
    if fields.get("generation_table"):  # workstation GC: one heap, its variables are globals
        if not space.is_mapped(fields["generation_table"], gen_count * gen_size):
            return None
    else:  # server GC: n_heaps heaps, their variables inside each gc_heap
        n = space.try_read_u32(fields["n_heaps"]) if fields.get("n_heaps") else None
        if not n or n > 1024 or not fields.get("g_heaps") or space.try_read_pointer(fields["g_heaps"]) is None:
            return None
    dv = GcDacVars(at, version & 0xFF, (version >> 8) & 0xFF, gen_size, gen_count, fields, layout)
    dv.gc_heap_offsets = _offsets(space, fields.get("gc_heap_field_offsets"), layout.get("gc_heap_fields"), module)
    dv.generation_offsets = _offsets(space, fields.get("generation_field_offsets"), layout.get("generation_fields"),
                                     module, limit=gen_size)
    return dv


def _offsets(space: AddressSpace, address: int | None, names: list | None, module: Module,
             limit: int = 1 << 20) -> dict | None:
    """An array of the GC's field offsets (int32, -1 for a field this build lacks), by field name, when
    ``address`` points at one in the runtime module's data and every entry is plausible."""
    if not address or not names or not module.contains(address):
        return None
    raw = space.try_read(address, 4 * len(names))
    if raw is None:
        return None
    values = struct.unpack(("<" if space.little_endian else ">") + f"{len(names)}i", raw)
    if any(v != -1 and not 0 <= v < limit for v in values):
        return None
    return dict(zip(names, values))


# --- one GC heap, as its bookkeeping describes it ------------------------------------------------------


@dataclass
class _HeapRef:
    index: int
    generation_table: int
    alloc_allocated: int | None
    ephemeral_segment: int | None


class _Interface:
    """Where the fields of the GC's structures are in this dump: the GC's own offsets where it exports
    them, else the data file's layouts (by pointer size)."""

    def __init__(self, space: AddressSpace, dv: GcDacVars, spec: dict):
        self.space = space
        self.dv = dv
        self.spec = spec
        self.arch = "x64" if space.pointer_size == 8 else "x86"
        self.segment_fields = spec["heap_segment"]["fields"]

    def generation_field(self, name: str) -> int | None:
        """The offset of a generation field (None: this GC has no such field)."""
        if self.dv.generation_offsets is not None:
            off = self.dv.generation_offsets.get(name, -1)
            return None if off < 0 else off
        table = self.spec["generation"]
        key = {"allocation_context": "alloc_ptr"}.get(name, name)
        return table[key][self.arch] if key in table else None

    def gc_heap_field(self, name: str) -> int | None:
        if self.dv.gc_heap_offsets is not None:
            off = self.dv.gc_heap_offsets.get(name, -1)
            return None if off < 0 else off
        table = self.spec["gc_heap"]
        return table[name][self.arch] if name in table else None

    def heaps(self) -> list[_HeapRef] | None:
        """Each GC heap's generation table, alloc_allocated and ephemeral segment (None: unreadable)."""
        space, f = self.space, self.dv.fields
        if f.get("generation_table"):  # workstation GC: the variables are globals
            eph = space.try_read_pointer(f["ephemeral_heap_segment"]) if f.get("ephemeral_heap_segment") else None
            allocated = space.try_read_pointer(f["alloc_allocated"]) if f.get("alloc_allocated") else None
            return [_HeapRef(0, f["generation_table"], allocated, eph)]
        n = space.try_read_u32(f["n_heaps"])
        array = space.try_read_pointer(f["g_heaps"])  # the variable g_heaps holds the array's address
        table_at = self.gc_heap_field("generation_table")
        if not array or table_at is None:
            return None
        out = []
        for i in range(n or 0):
            gc_heap = space.try_read_pointer(array + i * space.pointer_size)
            if not gc_heap:
                return None
            allocated_at, eph_at = self.gc_heap_field("alloc_allocated"), self.gc_heap_field("ephemeral_heap_segment")
            out.append(_HeapRef(i, gc_heap + table_at,
                                None if allocated_at is None else space.try_read_pointer(gc_heap + allocated_at),
                                None if eph_at is None else space.try_read_pointer(gc_heap + eph_at)))
        return out

    def generation(self, heap: _HeapRef, g: int) -> tuple[int | None, int | None, int | None, int | None]:
        """(start segment, allocation start, allocation context pointer, its limit) of generation ``g``."""
        space, ptr = self.space, self.space.pointer_size
        base = heap.generation_table + g * self.dv.generation_size

        def word(name: str, extra: int = 0):
            off = self.generation_field(name)
            return None if off is None else space.try_read_pointer(base + off + extra)

        return word("start_segment"), word("allocation_start"), word("allocation_context"), \
            word("allocation_context", ptr)

    def segment(self, address: int) -> dict | None:
        ptr = self.space.pointer_size
        raw = self.space.try_read(address, len(self.segment_fields) * ptr)
        if raw is None:
            return None
        return {name: self.space.unpack_pointer(raw, i * ptr) for i, name in enumerate(self.segment_fields)}


def finalize_queues(dump: DumpFile, dv: GcDacVars | None) -> list[int]:
    """The address of each GC heap's finalization queue (``CFinalize``, whose first words are its fill
    pointers: ``gcinterface.dac.h`` dac_finalize_queue); [] where the GC does not say."""
    if dv is None:
        return []
    space, f = dump.memory, dv.fields
    if f.get("generation_table"):  # workstation GC: the variable holds the queue's address
        queue = space.try_read_pointer(f["finalize_queue"]) if f.get("finalize_queue") else None
        return [queue] if queue else []
    gc = _Interface(space, dv, gc_interface())
    at = gc.gc_heap_field("finalize_queue")
    heaps = gc.heaps() or []
    table_at = gc.gc_heap_field("generation_table")
    if at is None or table_at is None:
        return []
    queues = [space.try_read_pointer(h.generation_table - table_at + at) for h in heaps]
    return [q for q in queues if q]


def _segment_ok(seg: dict, pointer_size: int) -> bool:
    """A plausible heap_segment: its objects pointer-aligned, and its marks in order."""
    return seg["mem"] % pointer_size == 0 and seg["mem"] <= seg["allocated"] <= seg["reserved"] \
        and seg["mem"] <= seg["committed"] <= seg["reserved"]


def find_gc_heap(dump: DumpFile, module: Module | None, limits=None) -> GcHeap:
    """The exact heap from GcDacVars; else a GcHeap of method "object-scan" whose warnings say why."""
    heap = GcHeap(method="gc-dac-vars")
    if module is None:
        return _fallback(heap, "no runtime module")
    dv = find_gc_dac_vars(dump, module, heap.warnings)
    if dv is None:
        return _fallback(heap, "no GcDacVars structure in the runtime's data" + (
            " that the file holds" if dump.truncated_bytes else ""))
    space = dump.memory
    limits = limits or space.limits
    gc = _Interface(space, dv, gc_interface())
    heap.dac_vars = dv
    heap.gc_mode = "workstation" if dv.fields.get("generation_table") else "server"
    heaps = gc.heaps()
    if heaps is None:
        return _fallback(heap, "the server GC's heaps are not in the dump")
    heap.heap_count = len(heaps)
    seen: set[int] = set()
    heap.bounds = []
    problems = []
    for h in heaps:
        problem = _segments(heap, gc, h, seen, limits)
        if problem:
            problems.append(problem)
    if problems:
        return _fallback(heap, problems[0])
    ephemeral = sum(s.ephemeral for s in heap.segments)
    if ephemeral != len(heaps):
        heap.bounds = None  # a layout these lists do not describe: they bound nothing
        return _fallback(heap, f"{len(heaps) - ephemeral} of {len(heaps)} ephemeral segments are not in their "
                               f"generation's segment list")
    return heap


def _segments(heap: GcHeap, gc: _Interface, h: _HeapRef, seen: set, limits) -> str | None:
    """Add one GC heap's segments or regions; a problem, or None."""
    space = gc.space
    gens = [gc.generation(h, g) for g in range(gc.dv.generation_count)]
    # regions: each generation has its own list (ClrMD's test: gen0 and gen1 do not share a start)
    regions = gens[0][0] != gens[1][0] or gc.generation_field("allocation_start") is None
    heap.layout = "regions" if regions else "segments"
    if not regions and h.ephemeral_segment and h.alloc_allocated is not None \
            and h.ephemeral_segment < h.alloc_allocated:
        # the ephemeral segment's objects lie between its header and alloc_allocated, whatever is missing (a
        # region's header is in the GC's bookkeeping, away from its objects: no such bound)
        heap.bounds.append((h.ephemeral_segment, h.alloc_allocated))
    if not h.ephemeral_segment or h.alloc_allocated is None:
        return "GcDacVars found, but an ephemeral segment or alloc_allocated is not in the dump"
    _, _, ctx_ptr, ctx_limit = gens[0]
    if ctx_ptr and ctx_limit and ctx_ptr < ctx_limit:
        heap.gaps.append((ctx_ptr, ctx_limit))
    if regions:
        lists = [(2, "gen2"), (1, "gen1"), (0, "gen0"), (3, "loh")]
    else:
        lists = [(2, "soh"), (3, "loh")]
    if gc.dv.generation_count >= 5:
        lists.append((4, "poh"))
    flags = gc.spec["heap_segment"]
    for g, kind in lists:
        address = gens[g][0]
        while address:
            if address in seen or len(seen) >= limits.max_segments:
                heap.warnings.append(f"segment list of generation {g} loops or is too long; stopped at {address:#x}")
                break
            seen.add(address)
            seg = gc.segment(address)
            if seg is None or not _segment_ok(seg, space.pointer_size):
                heap.warnings.append(f"heap_segment at {address:#x} is missing or inconsistent; its list is cut there")
                if address != h.ephemeral_segment:
                    heap.bounds.append((address, None))  # a segment starts there; where it ends is unknown
                break
            ephemeral = address == h.ephemeral_segment
            end = h.alloc_allocated if ephemeral else seg["allocated"]
            if ephemeral and not seg["mem"] <= h.alloc_allocated <= seg["reserved"]:
                return "alloc_allocated is outside the ephemeral segment"
            seg_kind = "frozen" if seg["flags"] & flags["flag_readonly"] else kind
            starts = ()
            if ephemeral and seg_kind == "soh":  # the segments GC: generations 1 and 0 at the end
                starts = (gens[1][1] or seg["mem"], gens[0][1] or seg["mem"])
            heap.segments.append(Segment(start=seg["mem"], end=end, kind=seg_kind, header=address,
                                         ephemeral=ephemeral, used=seg["used"], committed=seg["committed"],
                                         reserved=seg["reserved"], flags=seg["flags"], heap=h.index,
                                         generation_starts=starts))
            heap.bounds.append((seg["mem"], end))
            address = seg["next"]
    return None


def _fallback(heap: GcHeap, reason: str) -> GcHeap:
    heap.method = "object-scan"
    heap.segments = []
    if not heap.bounds:  # nothing of the bookkeeping was readable
        heap.bounds = None
    heap.warnings.append(f"exact heap walk unavailable: {reason}")
    return heap
