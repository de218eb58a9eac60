"""Chunks laid end to end: a heap walked from its first chunk to its top (or to the fencepost that ends an older
heap of an arena), and the mmapped chunks found at the start of the process's anonymous mappings.  ``word``: SIZE_SZ,
8 or 4 bytes (a chunk's header is two words).  A header that cannot be (a size under the header, not a multiple of
16, or running past the heap) ends the walk of that heap with a finding; nothing here loops on what the dump
says."""

from __future__ import annotations

import struct
from array import array

from ..findings import FindingKind, Findings

#: chunk states, as ``--chunks`` names them (the index is what the arrays hold)
STATES = ("in-use", "tcache", "fastbin", "bin", "top", "mmapped", "arena")
IN_USE, TCACHE, FASTBIN, BIN, TOP, MMAPPED, ARENA = range(len(STATES))
WINDOW = 1 << 20
#: the arena index of a chunk no arena holds (an mmapped one)
NO_ARENA = 0xFFFF
#: a chunk's header (prev_size, size) per word size
_HEADERS = {8: struct.Struct("<QQ"), 4: struct.Struct("<II")}
#: every chunk's size is a multiple of MALLOC_ALIGNMENT (16 on every architecture read)
ALIGNMENT = 16


class ChunkTable:
    """Every chunk found: address, size (flags masked), the raw size word, state and arena (index), in arrays."""

    def __init__(self):
        self.address = array("Q")
        self.size = array("Q")
        self.raw = array("Q")
        self.state = array("B")
        self.arena = array("H")
        #: the bytes of the mmapped chunks' mappings before their headers (their prev_size: i386's alignment
        #: correction, memalign's lead), which glibc's mmapped_mem counts
        self.mmapped_leads = 0

    def add(self, address: int, size: int, raw: int, state: int, arena: int) -> None:
        self.address.append(address)
        self.size.append(size)
        self.raw.append(raw)
        self.state.append(state)
        self.arena.append(arena)

    def __len__(self) -> int:
        return len(self.address)


def walk_heap(memory, first: int, end: int, top: int | None, arena: int, table: ChunkTable,
              findings: Findings, open_end: bool = False, word: int = 8) -> None:
    """The chunks of [first, end): each chunk's state from the next one's PREV_INUSE bit (in use, or free in a
    bin); the top chunk and fenceposts said as such.  tcache and fastbin chunks look in use here: the lists say
    which they are (:mod:`.lists`)."""
    p, window_at, window = first, 0, b""
    start = len(table)
    header, head = 2 * word, _HEADERS[word]
    while p < end:
        if not window_at <= p <= window_at + len(window) - header:
            window_at, window = p, memory.read_available(p, min(WINDOW, end - p + header))
            if len(window) < header:
                findings.add(FindingKind.MEMORY_MISSING, p, "a chunk of the native heap is not in the dump")
                break
        _, raw = head.unpack_from(window, p - window_at)
        size = raw & ~7
        if p == top or (open_end and p + size == end and raw & 1):
            table.add(p, size, raw, TOP, arena)
            break
        if size == 0 and top is None:  # the fencepost that ends an older heap of an arena, and what is past it (i386:
            table.add(p, max(header, end - p), raw, ARENA, arena)  # a top of 16 n + 8 bytes leaves 8 unused)
            break
        if size < header or (size % ALIGNMENT and size != header) or p + size > end:
            if open_end:  # the end of a heap whose extent the dump does not say
                break
            findings.add(FindingKind.NATIVE_BAD_CHUNK, p, f"chunk size word {raw:#x} cannot be a chunk of the "
                                                          f"heap [{first:#x}, {end:#x}); its walk stops here")
            break
        table.add(p, size, raw, IN_USE if size > header else ARENA, arena)  # a header alone: a fencepost
        p += size
    # a chunk is free (in a bin) when the next chunk's PREV_INUSE is clear
    for i in range(start, len(table) - 1):
        if table.state[i] == IN_USE and not table.raw[i + 1] & 1 and table.state[i + 1] != ARENA:
            table.state[i] = BIN


def _lead(word: int) -> int:
    """Where an mmapped chunk's header sits past its page's start: 0, or (i386: a two-word header before 16-byte
    aligned user data) the correction sysmalloc makes, which it keeps in prev_size."""
    return -2 * word % ALIGNMENT


def mmapped_chunks(memory, runs, skip, page: int, table: ChunkTable, limit: int, word: int = 8) -> None:
    """Mmapped chunks: each its own mapping (adjacent ones merged into one by the kernel), starting on a page with
    a header whose size (with the lead) is whole pages with IS_MMAPPED alone set and prev_size the lead (a chunk of
    memalign's, whose header sits past a larger correction, is not found: glibc's count of mmapped chunks then
    says so).  ``runs``: the dump's memory runs; ``skip``: ranges (the arenas' heaps) that are not."""
    header, lead = 2 * word, _lead(word)
    for start, end in runs:
        p = (start + page - 1) // page * page
        while p + lead + header <= end and len(table) < limit:
            if any(a <= p < b for a, b in skip):
                break
            head = memory.try_read(p + lead, header)
            if head is None:
                break
            prev, raw = _HEADERS[word].unpack(head)
            size = raw & ~7
            if raw & 7 != 2 or (size + lead) % page or prev != lead or not size or p + lead + size > end:
                break
            table.add(p + lead, size, raw, MMAPPED, NO_ARENA)
            table.mmapped_leads += lead
            p += lead + size


def mmapped_by_pages(memory, runs, skip, page: int, table: ChunkTable, limit: int, word: int = 8) -> None:
    """The same headers looked for at every page of the memory outside ``skip`` (an mmapped chunk whose mapping
    the kernel merged into the one before it), each chunk found stepped over; for when the mappings' starts did
    not give glibc's count."""
    import numpy as np

    known = sorted((int(a), int(a) + int(s)) for a, s, st in zip(table.address, table.size, table.state)
                   if st == MMAPPED)
    holes = sorted(list(skip) + known)
    for start, end in runs:
        at = (start + page - 1) // page * page
        while at < end and len(table) < limit:
            data = memory.read_available(at, min(64 * page * 16, end - at))
            pages = len(data) // page
            if not pages:
                break
            words = np.frombuffer(data[: pages * page], dtype=f"<u{word}").reshape(pages, page // word)
            words = words.astype(np.uint64, copy=False)
            # a header at word j of a page (user data 16-byte aligned): prev_size the distance from the page's
            # start (the lead: 0 or 8, or memalign's), size with IS_MMAPPED alone, whole pages with the lead
            first = _lead(word) // word
            j = np.arange(first, page // word - 1, ALIGNMENT // word, dtype=np.uint64)
            prev, raw = words[:, first:-1:ALIGNMENT // word], words[:, first + 1::ALIGNMENT // word]
            n = min(prev.shape[1], raw.shape[1], len(j))
            prev, raw, j = prev[:, :n], raw[:, :n], j[:n]
            ok = (prev == j * np.uint64(word)) & (raw & np.uint64(7) == np.uint64(2)) & (raw > np.uint64(page)) \
                & (((raw & ~np.uint64(7)) + j * np.uint64(word)) % np.uint64(page) == 0)
            rows, cols = np.nonzero(ok)
            next_at = at + pages * page
            for k, c in zip(rows.tolist(), cols.tolist()):
                lead = int(j[c]) * word
                p = at + k * page + lead
                size = int(raw[k, c]) & ~7
                if p + size > end or any(a <= p < b for a, b in holes):
                    continue
                table.add(p, size, int(raw[k, c]), MMAPPED, NO_ARENA)
                table.mmapped_leads += lead
                holes.append((p - lead, p + size))
                holes.sort()
                next_at = p + size
                break  # the rest of the window is the chunk's, or is read again from its end
            at = next_at
