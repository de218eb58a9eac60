"""A complete, tiny minidump of a synthetic CoreCLR process (for tests and fuzz seeds).

It holds what the dump path needs, laid out as CoreCLR 3.1 lays it out: a ModuleList naming coreclr.dll,
the module's data with a GcDacVars structure (version 1.0), its generation table, max_gen and
alloc_allocated, two heap segments (SOH, LOH) with their heap_segment headers, and the MethodTables of
a SynthHeap.  Built with the reader's own construct structs.
"""

from __future__ import annotations

import struct

from .synth import SynthHeap, string_span

from clrlayout.heap.segments import gc_interface
from clrlayout.runtime.profiles import Profile
from clrlayout.dump.minidump import (MINIDUMP_DIRECTORY, MINIDUMP_HEADER, MINIDUMP_MEMORY64_LIST_HEADER,
                                        MINIDUMP_MEMORY_DESCRIPTOR64, MINIDUMP_MODULE)

MODULE_BASE = {8: 0x7FFE_1000_0000, 4: 0x6000_0000}
SEGMENT_BASE = {8: 0x0000_0200_0000_0000, 4: 0x0200_0000}
PAGE = 0x1000


def _ptr(profile: Profile, v: int) -> bytes:
    return v.to_bytes(profile.pointer_size, "little")


def build_minidump(profile: Profile, heap: SynthHeap, large: SynthHeap | None = None,
                   module_base: int | None = None, segment_base: int | None = None,
                   stale: list[str] = ()) -> bytes:
    """``stale``: strings left past the small-object segment's allocated end (alloc_allocated), back to
    back with its last object, as the gen0 tail of a real process often holds them."""
    ptr = profile.pointer_size
    arch = {8: 9, 4: 0}[ptr]
    layout = next(l for l in gc_interface()["layouts"] if l["major"] == 1)
    gen = gc_interface()["generation"]
    key = "x64" if ptr == 8 else "x86"
    gen_size = 240 if ptr == 8 else 136

    # --- heap segments: a header page, then the objects (the segment's mem) --------------------------
    def segment(h: SynthHeap, base: int, flags: int, tail: bytes = b"") -> tuple[int, bytes, int, int]:
        seg = h.segment()
        body = bytes(h.heap) + tail + b"\0" * profile.object.header_size
        mem = base + PAGE  # heap_segment_mem: the page after the header
        shift = mem - (h.heap_base + profile.object.header_size)
        end = seg.end + shift
        header = b"".join(_ptr(profile, v) for v in (end, mem + len(body) + PAGE, mem + max(0x100000, 2 * len(body) + PAGE), end, mem, flags,
                                                       0, 0, 0))
        page = header + b"\0" * (PAGE - len(header) - profile.object.header_size)
        return base, page + body, mem, end

    # objects carry absolute MethodTable addresses: rebuild the heaps at their final addresses
    soh_base = SEGMENT_BASE[ptr] if segment_base is None else segment_base
    loh_base = soh_base + 0x1000_0000
    heap.heap_base = soh_base + PAGE - profile.object.header_size
    tail = b"".join(string_span(profile, v, heap.string_mt) for v in stale)
    soh = segment(heap, soh_base, 0, tail)
    loh = segment(large, loh_base, 8) if large is not None else None

    # --- the runtime module's data: GcDacVars, its variables, the generation table -----------------
    mod_base = MODULE_BASE[ptr] if module_base is None else module_base
    data = bytearray(0x3000)
    dac_at = 0x100
    vars_at = 0x400
    table_at = 0x800
    names = layout["fields"]
    variables = {name: mod_base + vars_at + i * 8 for i, name in enumerate(names)}
    words = [0x0001, gen_size] + [variables[n] for n in names]
    variables["generation_table"] = mod_base + table_at
    words[2 + names.index("generation_table")] = mod_base + table_at
    words[2 + names.index("n_heaps")] = 0
    words[2 + names.index("g_heaps")] = 0
    data[dac_at : dac_at + ptr * len(words)] = b"".join(_ptr(profile, w) for w in words)

    def put(name: str, value: bytes) -> None:
        at = variables[name] - mod_base
        data[at : at + len(value)] = value

    put("max_gen", struct.pack("<I", 2))
    put("built_with_svr", b"\0")
    put("ephemeral_heap_segment", _ptr(profile, soh[0]))
    put("alloc_allocated", _ptr(profile, soh[3]))
    for g, seg in ((2, soh), (3, loh)):
        if seg is not None:
            at = table_at + g * gen_size + gen["start_segment"][key]
            data[at : at + ptr] = _ptr(profile, seg[0])

    # --- the file ------------------------------------------------------------------------------------
    memory = [(mod_base, bytes(data)), (heap.mt_base, bytes(heap.mts)), (soh[0], soh[1])]
    if large is not None:
        memory.append((loh[0], loh[1]))
    name = "C:\\Program Files\\dotnet\\shared\\Microsoft.NETCore.App\\3.1.23\\coreclr.dll"
    name_bytes = struct.pack("<I", 2 * len(name)) + name.encode("utf-16-le") + b"\0\0"
    sysinfo = struct.pack("<HHHBBIIII", arch, 6, 0, 1, 1, 10, 0, 19041, 2) + b"\0" * 32
    n_streams = 3
    base = MINIDUMP_HEADER.sizeof() + n_streams * MINIDUMP_DIRECTORY.sizeof()
    blob = bytearray()

    def add(b: bytes) -> int:
        blob.extend(b"\0" * (-len(blob) % 8))
        at = base + len(blob)
        blob.extend(b)
        return at

    sys_rva = add(sysinfo)
    name_rva = add(name_bytes)
    zero = {k: 0 for k in ("dwSignature", "dwStrucVersion", "dwFileVersionMS", "dwFileVersionLS",
                           "dwProductVersionMS", "dwProductVersionLS", "dwFileFlagsMask", "dwFileFlags", "dwFileOS",
                           "dwFileType", "dwFileSubtype", "dwFileDateMS", "dwFileDateLS")}
    module = MINIDUMP_MODULE.build(dict(BaseOfImage=mod_base, SizeOfImage=len(data), CheckSum=0, TimeDateStamp=0,
                                        ModuleNameRva=name_rva, VersionInfo=zero, CvRecord=dict(DataSize=0, Rva=0),
                                        MiscRecord=dict(DataSize=0, Rva=0), Reserved0=0, Reserved1=0))
    mods = struct.pack("<I", 1) + module
    mod_rva = add(mods)
    mem_size = 16 + 16 * len(memory)
    mem_rva = add(b"\0" * mem_size)
    data_rva = base + len(blob)
    mem = MINIDUMP_MEMORY64_LIST_HEADER.build(dict(NumberOfMemoryRanges=len(memory), BaseRva=data_rva))
    mem += b"".join(MINIDUMP_MEMORY_DESCRIPTOR64.build(dict(StartOfMemoryRange=a, DataSize=len(d))) for a, d in memory)
    blob[mem_rva - base : mem_rva - base + mem_size] = mem
    head = MINIDUMP_HEADER.build(dict(Version=0xA793, ImplementationVersion=0, NumberOfStreams=n_streams,
                                      StreamDirectoryRva=MINIDUMP_HEADER.sizeof(), CheckSum=0, TimeDateStamp=0, Flags=2))
    dirs = b"".join(MINIDUMP_DIRECTORY.build(dict(StreamType=t, Location=dict(DataSize=s, Rva=r)))
                    for t, s, r in ((7, len(sysinfo), sys_rva), (4, len(mods), mod_rva), (9, mem_size, mem_rva)))
    return head + dirs + bytes(blob) + b"".join(d for _, d in memory)


def mixed_minidump(arch: str) -> bytes:
    """A CoreCLR 3.1.23 minidump of a small heap with a bit of everything: strings of lengths 0-8 (ASCII,
    non-ASCII, lone surrogates), some with a sync block word, zeroed gaps, free objects, and one string on
    the large object heap.  The seed of the robustness tests and of the fuzz campaign."""
    from clrlayout.runtime.profiles import select_profile

    p = select_profile("coreclr", arch, "3.1.23")
    h = SynthHeap(p)
    for i in range(40):
        h.add_string(("abc\u00e9\ud800"[i % 5]) * (i % 9), sync=1 if i % 7 == 0 else 0)
        if i % 13 == 5:
            h.add_gap(48)
        if i % 17 == 3:
            h.add_free(64)
    large = SynthHeap(p)
    large.add_string("L" * 600)
    return build_minidump(p, h, large)
