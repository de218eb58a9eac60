"""Where the GC heap is: its segments and where each one's objects end, found without the DAC.

The exact way (``gc-dac-vars``): CoreCLR's GC publishes a ``GcDacVars`` structure in the runtime module's
writable data (two version bytes, the size of its generation class, then a pointer per DAC variable; the
layouts are data in ``formats/gc-dac-vars.toml``).  It is found by that shape and trusted only after what
its pointers lead to checks out: ``max_gen`` is 2, the ephemeral segment's header is consistent and
``alloc_allocated`` lies inside it.  Under server GC the same variables sit in each heap's ``gc_heap``
(``dac_gc_heap`` layout, from GcDacVars.g_heaps).  The generation tables then give the segment lists, and each segment
is walked from ``mem`` to ``allocated`` -- the ephemeral one to ``alloc_allocated``, since its own
``allocated`` is only updated at GC time and the bytes past the real end are stale.

When no such structure can be used (.NET Framework, regions, dumps without the runtime's data)
``find_gc_heap`` says so and the caller falls back to a checked object scan (``objscan``).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

try:
    import tomllib
except ModuleNotFoundError:  # pragma: no cover
    import tomli as tomllib

from ..dump.addrspace import AddressSpace
from ..runtime.profiles import formats_dir
from ..dump import Dump, Module


@dataclass(frozen=True)
class Segment:
    """A range of the GC heap that holds objects back to back from ``start`` to ``end``."""

    start: int
    end: int
    kind: str  # "soh" | "loh" | "poh" | "readonly"
    header: int | None = None  # address of the heap_segment structure
    ephemeral: bool = False
    used: int | None = None
    committed: int | None = None
    reserved: int | None = None
    flags: int = 0

    @property
    def large(self) -> bool:
        return self.kind in ("loh", "poh")

    @property
    def size(self) -> int:
        return self.end - self.start


@dataclass
class GcDacVars:
    address: int
    major: int
    minor: int
    generation_size: int
    generation_count: int
    fields: dict  # name -> address of the variable (the pointer stored in GcDacVars)


@dataclass
class GcHeap:
    method: str  # "gc-dac-vars" | "object-scan"
    segments: list = field(default_factory=list)
    gc_mode: str | None = None  # "workstation" | "server"
    dac_vars: GcDacVars | None = None
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


@functools.lru_cache(maxsize=4)
def gc_interface(directory: str | None = None) -> dict:
    with open((Path(directory) if directory else formats_dir()) / "gc-dac-vars.toml", "rb") as f:
        return tomllib.load(f)


# --- finding GcDacVars ------------------------------------------------------------------------------


def _search_ranges(dump: Dump, module: Module) -> list[tuple[int, int]]:
    """The runtime image and, for ELF cores, the anonymous mappings right after it (its .bss)."""
    hi = module.end
    if dump.format == "elf-core":
        hi = module.end + 64 * 1024 * 1024
        # stop at the next other module
        for m in dump.modules:
            if module.end <= m.base < hi and m.path != module.path:
                hi = m.base
    return [(module.base, hi)]


def find_gc_dac_vars(dump: Dump, module: Module, warnings: list) -> GcDacVars | None:
    space = dump.memory
    ptr = space.pointer_size
    dtype = np.dtype("<u8" if ptr == 8 else "<u4") if space.little_endian else np.dtype(">u8" if ptr == 8 else ">u4")
    layouts = {l["major"]: l for l in gc_interface()["layouts"]}
    rejected = 0
    for lo, hi in _search_ranges(dump, module):
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
                found = _check_dac_vars(space, at, layouts[int(major[i])])
                if found is not None:
                    return found
                rejected += 1
    if rejected:
        warnings.append(f"{rejected} GcDacVars look-alikes in the runtime's data did not check out")
    return None


def _check_dac_vars(space: AddressSpace, at: int, layout: dict) -> GcDacVars | None:
    ptr = space.pointer_size
    nhead = len(layout["header"]) - 1  # the two version bytes share one word
    names = layout["fields"]
    raw = space.try_read(at, (nhead + len(names)) * ptr)
    if raw is None:
        return None
    words = [space.unpack_pointer(raw, i * ptr) for i in range(nhead + len(names))]
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
    return GcDacVars(at, version & 0xFF, (version >> 8) & 0xFF, gen_size, gen_count, fields)


# --- segments ---------------------------------------------------------------------------------------


def _read_segment(space: AddressSpace, address: int, names: list) -> dict | None:
    ptr = space.pointer_size
    raw = space.try_read(address, len(names) * ptr)
    if raw is None:
        return None
    return {name: space.unpack_pointer(raw, i * ptr) for i, name in enumerate(names)}


def _segment_ok(seg: dict, address: int, pointer_size: int) -> bool:
    """A plausible heap_segment: its objects start after it, pointer-aligned, and its marks are in order."""
    return (seg["mem"] > address or seg["mem"] == address) and seg["mem"] % pointer_size == 0 \
        and seg["mem"] <= seg["allocated"] <= seg["reserved"] and seg["mem"] <= seg["committed"] <= seg["reserved"]


def find_gc_heap(dump: Dump, module: Module | None, limits=None) -> GcHeap:
    """The exact heap from GcDacVars; else a GcHeap of method "object-scan" whose warnings say why."""
    heap = GcHeap(method="gc-dac-vars")
    if module is None:
        return _fallback(heap, "no runtime module")
    dv = find_gc_dac_vars(dump, module, heap.warnings)
    if dv is None:
        return _fallback(heap, "no GcDacVars structure in the runtime's data")
    space = dump.memory
    limits = limits or space.limits
    spec = gc_interface()
    arch_key = "x64" if space.pointer_size == 8 else "x86"
    heap.dac_vars = dv
    heaps = _heaps(space, dv, spec, arch_key)
    if heaps is None:
        return _fallback(heap, "the server GC's heaps are not in the dump")
    heap.gc_mode = "workstation" if dv.fields.get("generation_table") else "server"
    seen: set[int] = set()
    heap.bounds = []
    problems = []
    for table, alloc_allocated, eph_ptr in heaps:
        problem = _segments(heap, space, dv, spec, table, alloc_allocated, eph_ptr, seen, limits)
        if problem:
            problems.append(problem)
    if problems:
        return _fallback(heap, problems[0])
    if sum(s.ephemeral for s in heap.segments) != len(heaps):
        heap.bounds = None  # a layout these lists do not describe (regions): they bound nothing
        return _fallback(heap, "an ephemeral segment is not in its generation 2 segment list")
    return heap


def _heaps(space: AddressSpace, dv: GcDacVars, spec: dict, arch_key: str):
    """(generation table, alloc_allocated, ephemeral segment) of each GC heap, or None if unreadable."""
    f = dv.fields
    if f.get("generation_table"):  # workstation GC
        eph = space.try_read_pointer(f["ephemeral_heap_segment"]) if f.get("ephemeral_heap_segment") else None
        allocated = space.try_read_pointer(f["alloc_allocated"]) if f.get("alloc_allocated") else None
        return [(f["generation_table"], allocated, eph)]
    layout = spec["gc_heap"]
    n = space.try_read_u32(f["n_heaps"])
    array = space.try_read_pointer(f["g_heaps"])  # the variable g_heaps holds the array's address
    if not array:
        return None
    out = []
    for i in range(n or 0):
        gc_heap = space.try_read_pointer(array + i * space.pointer_size)
        if not gc_heap:
            return None
        out.append((gc_heap + layout["generation_table"][arch_key],
                    space.try_read_pointer(gc_heap + layout["alloc_allocated"][arch_key]),
                    space.try_read_pointer(gc_heap + layout["ephemeral_heap_segment"][arch_key])))
    return out


def _segments(heap: GcHeap, space: AddressSpace, dv: GcDacVars, spec: dict, table: int, alloc_allocated: int,
              eph_ptr: int, seen: set, limits) -> str | None:
    """Add one GC heap's segments (SOH, LOH, POH lists of its generation table); a problem, or None."""
    gen = spec["generation"]
    arch_key = "x64" if space.pointer_size == 8 else "x86"
    seg_names = spec["heap_segment"]["fields"]

    def generation(g: int):
        base = table + g * dv.generation_size
        return (space.try_read_pointer(base + gen["start_segment"][arch_key]),
                space.try_read_pointer(base + gen["alloc_ptr"][arch_key]),
                space.try_read_pointer(base + gen["alloc_limit"][arch_key]))

    if eph_ptr and alloc_allocated is not None and eph_ptr < alloc_allocated:
        # the ephemeral segment's objects lie between its header and alloc_allocated, whatever is missing
        heap.bounds.append((eph_ptr, alloc_allocated))
    if not eph_ptr or alloc_allocated is None:
        return "GcDacVars found, but an ephemeral segment or alloc_allocated is not in the dump"
    _, ctx_ptr, ctx_limit = generation(0)
    if ctx_ptr and ctx_limit and ctx_ptr < ctx_limit:
        heap.gaps.append((ctx_ptr, ctx_limit))
    kinds = [(2, "soh"), (3, "loh")] + ([(4, "poh")] if dv.generation_count >= 5 else [])
    for g, kind in kinds:
        first, _, _ = generation(g)
        address = first
        while address:
            if address in seen or len(seen) >= limits.max_segments:
                heap.warnings.append(f"segment list of generation {g} loops or is too long; stopped at {address:#x}")
                break
            seen.add(address)
            seg = _read_segment(space, address, seg_names)
            if seg is None or not _segment_ok(seg, address, space.pointer_size):
                heap.warnings.append(f"heap_segment at {address:#x} is missing or inconsistent; its list is cut there")
                if address != eph_ptr:
                    heap.bounds.append((address, None))  # a segment starts there; where it ends is unknown
                break
            ephemeral = address == eph_ptr
            end = alloc_allocated if ephemeral else seg["allocated"]
            if ephemeral and not seg["mem"] <= alloc_allocated <= seg["reserved"]:
                return "alloc_allocated is outside the ephemeral segment"
            seg_kind = "readonly" if seg["flags"] & spec["heap_segment"]["flag_readonly"] else kind
            heap.segments.append(Segment(start=seg["mem"], end=end, kind=seg_kind, header=address,
                                         ephemeral=ephemeral, used=seg["used"], committed=seg["committed"],
                                         reserved=seg["reserved"], flags=seg["flags"]))
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
