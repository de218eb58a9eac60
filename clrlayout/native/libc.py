"""Where glibc's malloc state is in a core, found without symbols: libc among the core's file mappings, its version
(the banner in the dump's copy of libc, else the library on disk when its GNU build id is the dump's), ``main_arena``
by its shape in libc's writable data (empty bins point at themselves; ``next`` is a ring of arenas back to it) and
``mp_`` beside it.  Other allocators (musl, jemalloc, mimalloc, tcmalloc) are recognised by their library."""

from __future__ import annotations

import os
import re
import struct
from dataclasses import dataclass

import numpy as np

from .layout import MallocLayout

_LIBC = re.compile(r"(^|/)libc(\.so\.6|-2\.\d+\.so)$")
#: libraries that bring another malloc, by the name of their file
FOREIGN = {"ld-musl": "musl's malloc (Alpine)", "libc.musl": "musl's malloc (Alpine)",
           "libjemalloc": "jemalloc", "libmimalloc": "mimalloc", "libtcmalloc": "tcmalloc (gperftools)"}
BANNER = re.compile(rb"release version (\d+)\.(\d+)")
#: how far past libc's last mapping its writable data (the .bss after .data) is searched
BSS_SPAN = 64 * 1024
#: the most of a library's file read from disk for its version and build id
MAX_LIBC_FILE = 64 << 20
#: the most of a dump's memory searched for libc's data when no mapped file is libc
SEARCH_BYTES = 256 << 20


@dataclass
class Libc:
    path: str
    base: int
    #: (major, minor), or None when neither the dump nor the library on disk says
    version: tuple[int, int] | None
    #: where the version came from: "dump", "file" (the library on disk, the dump's build id), or ""
    version_source: str
    #: the address ranges that can hold libc's static data: its mappings the dump holds, and the memory after them
    data_ranges: list[tuple[int, int]]


#: musl's libc where a distribution keeps it apart from glibc (Debian's musl: /usr/lib/x86_64-linux-musl/libc.so,
#: which /lib/ld-musl-x86_64.so.1 links to; the kernel's NT_FILE names the file, not the link)
_MUSL_DIR = re.compile(r"/[^/]*musl[^/]*/libc\.so$")


def foreign_allocators(dump) -> list[str]:
    """The other allocators whose library is mapped in the process."""
    names = set()
    for m in dump.file_mappings:
        base = os.path.basename(m.path)
        for prefix, name in FOREIGN.items():
            if base.startswith(prefix):
                names.add(f"{name} ({base})")
        if _MUSL_DIR.search(m.path):
            names.add(f"{FOREIGN['ld-musl']} ({m.path})")
    return sorted(names)


def is_libc(path: str) -> bool:
    return bool(_LIBC.search(path))


def unnamed_libc(dump) -> Libc:
    """libc where no mapped file is named libc: a core without NT_FILE (QEMU's user-mode cores) or a static
    executable.  Its writable data is looked for in the dump's memory, the smallest ranges first (libc's data and
    .bss are small), SEARCH_BYTES of them at the most; its version is not known (the layout whose shape fits)."""
    ranges, total = [], 0
    for r in sorted(dump.memory.iter_regions(), key=lambda r: (r.size, r.start)):
        if total + r.size > SEARCH_BYTES:
            break
        ranges.append((r.start, r.end))
        total += r.size
    return Libc("", 0, None, "", sorted(ranges))


def find_libc(dump) -> Libc | None:
    maps = [m for m in dump.file_mappings if _LIBC.search(m.path)]
    if not maps:
        return None
    path = maps[0].path
    base = min(m.start for m in maps if m.path == path)
    mine = [m for m in maps if m.path == path]
    ranges = [(m.start, m.end) for m in mine if dump.memory.is_mapped(m.start)]
    end = max(m.end for m in mine)
    ranges.append((end, end + BSS_SPAN))
    version, source = _version_in_dump(dump, ranges[:-1])
    if version is None:
        version, source = _version_on_disk(dump, path, base)
    return Libc(path, base, version, source, ranges)


def _version_in_dump(dump, ranges) -> tuple[tuple[int, int] | None, str]:
    for start, end in ranges:
        data = dump.memory.read_available(start, min(end - start, MAX_LIBC_FILE))
        m = BANNER.search(data)
        if m:
            return (int(m.group(1)), int(m.group(2))), "dump"
    return None, ""


def build_id(head: bytes) -> bytes | None:
    """The GNU build id of a little-endian ELF file (64- or 32-bit) from its first bytes (its notes sit in the
    first page), None when they do not hold one."""
    if len(head) < 52 or head[:4] != b"\x7fELF" or head[4] not in (1, 2) or head[5] != 1:
        return None
    wide = head[4] == 2
    if wide and len(head) < 64:
        return None
    phoff, = struct.unpack_from("<Q" if wide else "<I", head, 0x20 if wide else 0x1C)
    phentsize, phnum = struct.unpack_from("<HH", head, 0x36 if wide else 0x2A)
    for i in range(min(phnum, 64)):
        at = phoff + i * phentsize
        if at + (56 if wide else 32) > len(head):
            break
        if wide:
            p_type, _, offset, _, _, filesz = struct.unpack_from("<IIQQQQ", head, at)
        else:
            p_type, offset, _, _, filesz = struct.unpack_from("<IIIII", head, at)
        if p_type != 4:  # PT_NOTE
            continue
        note, end = offset, min(offset + filesz, len(head))
        while note + 12 <= end:
            namesz, descsz, n_type = struct.unpack_from("<III", head, note)
            name_at = note + 12
            desc_at = name_at + (namesz + 3) // 4 * 4
            if n_type == 3 and head[name_at : name_at + namesz] == b"GNU\0" and desc_at + descsz <= end:
                return head[desc_at : desc_at + descsz]
            note = desc_at + (descsz + 3) // 4 * 4
    return None


def _version_on_disk(dump, path: str, base: int) -> tuple[tuple[int, int] | None, str]:
    """The version in the library on this machine, only when it is the very file the process had mapped."""
    first = dump.memory.read_available(base, 4096)
    wanted = build_id(first) if first else None
    try:
        with open(path, "rb") as f:
            head = f.read(4096)
            if wanted is None or build_id(head) != wanted:
                return None, ""
            data = head + f.read(MAX_LIBC_FILE)
    except OSError:
        return None, ""
    m = BANNER.search(data)
    return ((int(m.group(1)), int(m.group(2))), "file") if m else (None, "")


def _words(dump, start: int, end: int, word: int = 8) -> tuple[int, np.ndarray]:
    """(start, the words of [start, end) the dump holds from there on), as 64-bit values whatever the word."""
    data = dump.memory.read_available(start, end - start)
    n = len(data) // word
    return start, np.frombuffer(data[: n * word], dtype=f"<u{word}").astype(np.uint64, copy=False)


def find_main_arena(dump, libc: Libc, layout: MallocLayout) -> int | None:
    """main_arena: a malloc_state in libc's data whose ``next`` is itself or the arena of a 64 MB-aligned heap, and
    whose 127 bins are each empty (pointing at themselves) or hold two chunk-aligned pointers, at least 8 empty."""
    a, hi, ws = layout.arena, layout.heap_info["sizeof"], layout.word
    heap_max = layout.chunk["heap_max_size"]
    for start, end in libc.data_ranges:
        at, w = _words(dump, start, end, ws)
        if len(w) * ws < a["size"]:
            continue
        addr = at + ws * np.arange(len(w), dtype=np.uint64)
        nxt = a["next"] // ws
        self_ring = w == addr - np.uint64(a["next"])
        in_heap = ((w - np.uint64(hi)) % np.uint64(heap_max) == 0) & (w > np.uint64(heap_max))
        for j in np.flatnonzero(self_ring | in_heap):
            arena = int(addr[j]) - a["next"]
            if arena < at or (arena - at) // ws + a["size"] // ws > len(w) or j < nxt:
                continue
            if _bins_fit(w[(arena - at) // ws:], arena, layout):
                return arena
    return None


def _bins_fit(w: np.ndarray, arena: int, layout: MallocLayout) -> bool:
    """Whether the words from ``arena`` on are a malloc_state's: each bin empty (its fd and bk its own header,
    bin_at) or two chunk pointers (their user data 16-byte aligned), 8 empty at least; top a chunk pointer."""
    a, ws, header = layout.arena, layout.word, layout.chunk["header"]
    bins = w[a["bins"] // ws : a["bins"] // ws + 254]
    if len(bins) < 254:
        return False
    fd, bk = bins[0::2], bins[1::2]
    home = np.uint64(arena + a["bins"] - header) + np.uint64(header) * np.arange(127, dtype=np.uint64)
    empty = (fd == home) & (bk == home)
    h = np.uint64(header)
    full = (fd != 0) & (bk != 0) & ((fd + h) % 16 == 0) & ((bk + h) % 16 == 0)
    top = int(w[a["top"] // ws])
    system = int(w[a["system_mem"] // ws])
    return bool(np.all(empty | full)) and int(empty.sum()) >= 8 and (top + header) % 16 == 0 \
        and system % 4096 == 0


def find_mp(dump, libc: Libc, layout: MallocLayout, main_top: int, main_system: int) -> int | None:
    """mp_: a malloc_par in libc's data with glibc's defaults for the tcache and mmap limits, or (when they were
    tuned) the one whose ``sbrk_base`` starts the main arena's heap (its top chunk lies within system_mem of it)."""
    p, ws = layout.par, layout.word
    for start, end in libc.data_ranges:  # glibc's defaults first, in every range
        at, w = _words(dump, start, end, ws)
        if len(w) * ws < p["size"]:
            continue
        c = layout.chunk
        j = np.flatnonzero((w[:-2] == c["tcache_bins"]) & (w[1:-1] == c["tcache_max_bytes"])
                           & (w[2:] == c["tcache_count"]))
        for k in j:
            par = at + ws * int(k) - p["tcache_bins"]
            if par >= at and _par_fits(dump, par, layout, main_top, main_system):
                return par
    for start, end in libc.data_ranges:
        at, w = _words(dump, start, end, ws)
        for k in range(len(w) - p["size"] // ws):
            par = at + ws * k
            sbrk = int(w[k + p["sbrk_base"] // ws])
            if sbrk and sbrk <= main_top < sbrk + main_system + 4096 and _par_fits(dump, par, layout, main_top,
                                                                                      main_system):
                return par
    return None


def _par_fits(dump, par: int, layout: MallocLayout, main_top: int, main_system: int) -> bool:
    p = layout.par
    data = dump.memory.try_read(par, p["size"])
    if data is None:
        return False
    word = lambda name: int.from_bytes(data[p[name] : p[name] + layout.word], "little")
    u32 = lambda name: int.from_bytes(data[p[name] : p[name] + 4], "little")
    sbrk = word("sbrk_base")
    if main_top and not (sbrk and sbrk <= main_top < sbrk + main_system + 4096):
        return False
    return u32("n_mmaps") <= u32("max_n_mmaps") and word("mmapped_mem") <= word("max_mmapped_mem") \
        and 0 < word("tcache_bins") <= 64 and word("tcache_count") <= 65535
