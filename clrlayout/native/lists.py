"""glibc's free lists, followed with a bound and a cycle check: a thread's tcache (``tcache_perthread_struct``:
a count and the first entry for each of 64 sizes, entries linked through their first word, safe-linked since
2.32), an arena's fastbins (linked through ``fd``, safe-linked too) and its 127 bins (doubly linked rings through
``fd``/``bk`` back to the bin's header in the arena).  A list that breaks, loops, leaves the arena's heaps or holds a
chunk of the wrong size is a finding at the address where it went wrong."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..findings import FindingKind, Findings
from .layout import MallocLayout

#: no list is followed further than this (a count in a tcache is 16 bits; a bin of a real heap is far shorter)
MAX_LIST = 1 << 22


def reveal(stored: int, field_address: int, safe_linking: bool) -> int:
    """A ``next``/``fd`` pointer as glibc stores it in a tcache entry or fastbin chunk (REVEAL_PTR)."""
    return (field_address >> 12) ^ stored if safe_linking else stored


@dataclass
class Tcache:
    """One thread's tcache: where its struct is, the thread (when the dump says), and the chunks in it by size."""

    address: int
    thread: int | None = None
    #: chunk address -> chunk size
    chunks: dict = field(default_factory=dict)


def read_tcache(memory, struct_at: int, layout: MallocLayout, inside, findings: Findings) -> Tcache | None:
    """The tcache whose struct (user data) is at ``struct_at``, or None when the bytes there are no tcache:
    a count above 65535 or not matching its list, an entry outside the heaps (``inside(address)``)."""
    t, c = layout.tcache, layout.chunk
    data = memory.try_read(struct_at, t["size"])
    if data is None:
        return None
    width, w = t["count_size"], layout.word
    result = Tcache(struct_at)
    for i in range(c["tcache_bins"]):
        count = int.from_bytes(data[t["counts"] + i * width : t["counts"] + (i + 1) * width], "little")
        entry = int.from_bytes(data[t["entries"] + w * i : t["entries"] + w * (i + 1)], "little")
        if (count == 0) != (entry == 0):
            return None
        size = c["tcache_first"] + c["tcache_step"] * i
        seen = 0
        while entry and seen <= count:
            chunk = entry - c["header"]
            if entry % c["alignment"] or not inside(chunk) or chunk in result.chunks:
                findings.add(FindingKind.NATIVE_BAD_LIST, entry, f"tcache bin {i} of the tcache at {struct_at:#x} "
                                                                 f"reaches {entry:#x}, not a chunk of its heaps")
                break
            result.chunks[chunk] = size
            seen += 1
            stored = memory.try_read_pointer(entry)
            if stored is None:
                findings.add(FindingKind.MEMORY_MISSING, entry, "a tcache entry is not in the dump")
                break
            entry = reveal(stored, entry, layout.safe_linking)
        if seen != count:
            findings.add(FindingKind.NATIVE_BAD_LIST, struct_at, f"tcache bin {i} counts {count} chunks, its list "
                                                                 f"holds {seen}")
    return result


def fastbin_chunks(memory, arena: int, layout: MallocLayout, inside, findings: Findings) -> dict[int, int]:
    """chunk address -> size, for every chunk in the arena's fastbins."""
    a, c = layout.arena, layout.chunk
    out: dict[int, int] = {}
    for i in range(c["nfastbins"]):
        size = c["fastbin_first"] + c["fastbin_step"] * i
        p = memory.try_read_pointer(arena + a["fastbins"] + layout.word * i) or 0
        n = 0
        while p:
            if (p + c["header"]) % c["alignment"] or not inside(p) or p in out or n >= MAX_LIST:
                findings.add(FindingKind.NATIVE_BAD_LIST, p, f"fastbin {i} of the arena at {arena:#x} reaches "
                                                             f"{p:#x}: not a chunk of its heaps, or a loop")
                break
            raw = memory.try_read_pointer(p + c["size"])
            if raw is None or raw & ~7 != size:
                findings.add(FindingKind.NATIVE_BAD_LIST, p, f"fastbin {i} (chunks of {size} bytes) holds a chunk "
                                                             f"whose size word is {raw!r}")
                break
            out[p] = size
            n += 1
            stored = memory.try_read_pointer(p + c["fd"])
            p = reveal(stored or 0, p + c["fd"], layout.safe_linking)
    return out


def bin_chunks(memory, arena: int, layout: MallocLayout, inside, findings: Findings) -> dict[int, tuple[int, int]]:
    """chunk address -> (bin index, size word as stored), for every chunk in the arena's unsorted, small and large
    bins, each ring followed through ``fd`` as ``malloc_info`` does."""
    a, c = layout.arena, layout.chunk
    out: dict[int, tuple[int, int]] = {}
    for i in range(1, c["nbins"]):
        home = arena + a["bins"] + c["header"] * (i - 1) - c["header"]  # bin_at: a chunk whose fd, bk are the bin's
        p = memory.try_read_pointer(home + c["fd"])
        n = 0
        while p is not None and p != home:
            if (p + c["header"]) % c["alignment"] or not inside(p) or p in out or n >= MAX_LIST:
                findings.add(FindingKind.NATIVE_BAD_LIST, p or home, f"bin {i} of the arena at {arena:#x} reaches "
                                                                     f"{p:#x}: not a chunk of its heaps, or a loop")
                break
            raw = memory.try_read_pointer(p + c["size"])
            if raw is None:
                findings.add(FindingKind.MEMORY_MISSING, p, "a chunk in a bin is not in the dump")
                break
            out[p] = (i, raw)
            n += 1
            p = memory.try_read_pointer(p + c["fd"])
    return out
