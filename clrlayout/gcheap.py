"""Where the GC heap is: its segments and where each one's objects end, found without the DAC.

The exact way (``gc-dac-vars``): CoreCLR's GC publishes a ``GcDacVars`` structure in the runtime module's
writable data (two version bytes, the size of its generation class, then a pointer per DAC variable; the
layouts are data in ``formats/gc-dac-vars.toml``).  It is found by that shape and trusted only after what
its pointers lead to checks out: ``max_gen`` is 2, the ephemeral segment's header is consistent and
``alloc_allocated`` lies inside it.  The generation table then gives the segment lists, and each segment
is walked from ``mem`` to ``allocated`` -- the ephemeral one to ``alloc_allocated``, since its own
``allocated`` is only updated at GC time and the bytes past the real end are stale.

When no such structure can be used (.NET Framework, server GC, regions, dumps without the runtime's data)
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

from .addrspace import AddressSpace
from .profiles import formats_dir
from .readers import Dump, Module


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
    if max_gen != 2 or not fields.get("generation_table"):
        return None
    if not space.is_mapped(fields["generation_table"], gen_count * gen_size):
        return None
    return GcDacVars(at, version & 0xFF, (version >> 8) & 0xFF, gen_size, gen_count, fields)


# --- segments ---------------------------------------------------------------------------------------


def _read_segment(space: AddressSpace, address: int, names: list) -> dict | None:
    ptr = space.pointer_size
    raw = space.try_read(address, len(names) * ptr)
    if raw is None:
        return None
    return {name: space.unpack_pointer(raw, i * ptr) for i, name in enumerate(names)}


def _segment_ok(seg: dict, address: int) -> bool:
    return (seg["mem"] > address or seg["mem"] == address) and seg["mem"] <= seg["allocated"] <= seg["reserved"] \
        and seg["mem"] <= seg["committed"] <= seg["reserved"]


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
    seg_names = spec["heap_segment"]["fields"]
    gen = spec["generation"]
    arch_key = "x64" if space.pointer_size == 8 else "x86"
    heap.dac_vars = dv
    f = dv.fields

    built_with_svr = space.try_read(f["built_with_svr"], 1) if f.get("built_with_svr") else None
    n_heaps = space.try_read_u32(f["n_heaps"]) if f.get("n_heaps") else None
    if (built_with_svr and built_with_svr[0]) and f.get("g_heaps") and n_heaps:
        heap.gc_mode = "server"
        return _fallback(heap, f"server GC with {n_heaps} heaps: its per-heap data is not read yet")
    heap.gc_mode = "workstation"

    eph_ptr = space.try_read_pointer(f["ephemeral_heap_segment"]) if f.get("ephemeral_heap_segment") else None
    alloc_allocated = space.try_read_pointer(f["alloc_allocated"]) if f.get("alloc_allocated") else None
    if not eph_ptr or alloc_allocated is None:
        return _fallback(heap, "GcDacVars found, but the ephemeral segment or alloc_allocated is not in the dump")

    table = f["generation_table"]

    def generation(g: int) -> tuple[int | None, int | None, int | None]:
        base = table + g * dv.generation_size
        start_segment = space.try_read_pointer(base + gen["start_segment"][arch_key])
        alloc_ptr = space.try_read_pointer(base + gen["alloc_ptr"][arch_key])
        alloc_limit = space.try_read_pointer(base + gen["alloc_limit"][arch_key])
        return start_segment, alloc_ptr, alloc_limit

    _, ctx_ptr, ctx_limit = generation(0)
    if ctx_ptr and ctx_limit and ctx_ptr < ctx_limit:
        heap.gaps.append((ctx_ptr, ctx_limit))

    kinds = [(2, "soh"), (3, "loh")] + ([(4, "poh")] if dv.generation_count >= 5 else [])
    seen: set[int] = set()
    for g, kind in kinds:
        first, _, _ = generation(g)
        address = first
        while address:
            if address in seen or len(seen) >= limits.max_segments:
                heap.warnings.append(f"segment list of generation {g} loops or is too long; stopped at {address:#x}")
                break
            seen.add(address)
            seg = _read_segment(space, address, seg_names)
            if seg is None or not _segment_ok(seg, address):
                heap.warnings.append(f"heap_segment at {address:#x} is missing or inconsistent; its list is cut there")
                break
            ephemeral = address == eph_ptr
            end = alloc_allocated if ephemeral else seg["allocated"]
            if ephemeral and not seg["mem"] <= alloc_allocated <= seg["reserved"]:
                return _fallback(heap, "alloc_allocated is outside the ephemeral segment")
            seg_kind = "readonly" if seg["flags"] & spec["heap_segment"]["flag_readonly"] else kind
            heap.segments.append(Segment(start=seg["mem"], end=end, kind=seg_kind, header=address,
                                         ephemeral=ephemeral, used=seg["used"], committed=seg["committed"],
                                         reserved=seg["reserved"], flags=seg["flags"]))
            address = seg["next"]
    if not any(s.ephemeral for s in heap.segments):
        return _fallback(heap, "the ephemeral segment is not in the generation 2 segment list")
    return heap


def _fallback(heap: GcHeap, reason: str) -> GcHeap:
    heap.method = "object-scan"
    heap.segments = []
    heap.warnings.append(f"exact heap walk unavailable: {reason}")
    return heap
