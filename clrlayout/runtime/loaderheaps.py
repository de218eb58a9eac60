"""The runtime's loader heaps, found by what they hold: where its MethodTables, EEClasses, FieldDescs,
precode stubs and JIT-compiled code live.

Every LoaderHeap of CoreCLR (and of the .NET Framework) keeps what it reserved as a singly linked list of
``LoaderHeapBlock`` records: ``{next, address, size, release}`` (``formats/loader-heap.toml``), newest
first, the last record's ``next`` null.  The records are found without the DAC and without the offsets of
``LoaderAllocator`` or ``LoaderHeap``, which change from release to release: every pointer-aligned word
of the memory searched is tried as a record (a page-aligned address, a size of whole pages, a BOOL), and a
record is kept only when its whole list holds together -- every ``next`` leads to another record, the last
to null --, its block starts in memory of the process as the dump describes it, and the list is the one a
loader heap holds: a word points at its first record (``m_pFirstBlock``) with, a few words beside it, a
pointer into that first (newest) block (the heap's allocation pointer, committed end or reserved end).  Against the
runtime's
own DAC (``TraverseLoaderHeap`` over every heap it knows, tests/samples/test_memory.py) the blocks kept are the
DAC's, block for block; on .NET Core 3.1 also two blocks of the global loader allocator's first
reservation that the 3.1 DAC lists under no heap.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..dump.addrspace import AddressSpace
from ..formats import load as load_format
from ..util.ranges import merged, without


@dataclass(frozen=True)
class LoaderHeapBlock:
    """One reservation of a loader heap: ``size`` bytes at ``start`` (committed as the heap grows)."""

    record: int  # the address of its LoaderHeapBlock record
    start: int
    size: int
    release: bool  # the heap reserved it itself (FALSE: memory handed to it, such as a first reservation)
    #: the address of the word that holds its list (the heap's ``m_pFirstBlock``): blocks of one heap share it,
    #: and it lies inside the structure that embeds the heap (a LoaderAllocator's heaps are members of it)
    heap: int = 0

    @property
    def end(self) -> int:
        return self.start + self.size


@dataclass
class LoaderHeaps:
    """Every loader heap block found, by address, and how many lists (heaps) they came in."""

    blocks: list = field(default_factory=list)
    lists: int = 0
    #: why the search stopped early (None: it did not)
    problem: str | None = None

    @property
    def reserved_bytes(self) -> int:
        return sum(b.size for b in self.blocks)


def block_spec(directory: str | None = None) -> dict:
    return load_format("loader-heap", directory)["block"]


def allocator_span(directory: str | None = None) -> int:
    """How far past the start of a native LoaderAllocator its loader heaps' list words lie at the most."""
    return int(load_format("loader-heap", directory)["allocator"]["span"])


def find_loader_heaps(space: AddressSpace, skip=(), images=(), directory: str | None = None) -> LoaderHeaps:
    """The loader heap blocks of the process whose memory is ``space``: records searched everywhere but in
    the ``skip`` ranges ``(start, end)`` (the GC heap) and the ``images`` (no record lives there; a heap that
    points at them may: the global loader allocator's heaps are static data of the runtime module)."""
    spec = block_spec(directory)
    with space.paused_recording():  # a search reads everything; what it found is noted below
        records, problem = _records(space, spec, merged(list(skip) + list(images)))
        lists, blocks, anchors = _kept(records, spec, space, merged(skip))
    ptr = space.pointer_size
    for b in blocks:  # what finds them again in a dump that keeps only what was read (trim)
        space.note(b.record, 4 * ptr)
    for words in anchors:  # only the words the search tells a heap by (not their neighbours: other data)
        for at in words:
            space.note(at, ptr)
    return LoaderHeaps(blocks, lists, problem)


def _searched(space: AddressSpace, skip: list[tuple[int, int]]):
    """The dump's memory runs less the ``skip`` ranges, as ``(start, end)``, pointer-aligned."""
    ptr = space.pointer_size
    for pos, stop in without(space.iter_runs(), skip):
        lo = -(-pos // ptr) * ptr
        if stop - lo >= 4 * ptr:
            yield lo, stop


def _records(space: AddressSpace, spec: dict, skip) -> tuple[dict, str | None]:
    """record address -> (next, address, size, release) of every word that has a record's shape."""
    ptr = space.pointer_size
    limits = space.limits
    e = "<" if space.little_endian else ">"
    word = np.dtype(e + ("u8" if ptr == 8 else "u4"))
    page, max_size = int(spec["page"]), int(spec["max_size"])
    releases = [int(v) for v in spec["release_values"]]
    top = (1 << (8 * ptr)) - 1
    window = limits.window
    out: dict = {}
    for lo, hi in _searched(space, skip):
        pos = lo
        while pos < hi:
            span = min(window, hi - pos)
            data = space.read_available(pos, min(span + 3 * ptr, hi - pos))
            n = len(data) // ptr
            if n < 4:
                break
            w = np.frombuffer(data, dtype=word, count=n)
            nxt, addr, size, rel = w[:-3], w[1:-2], w[2:-1], w[3:] & word.type(0xFFFFFFFF)
            ok = (addr != 0) & (addr % word.type(page) == 0) & (size >= word.type(page))
            ok &= (size % word.type(page) == 0) & (size <= word.type(min(max_size, top)))
            ok &= (addr <= word.type(top) - size) & (nxt % word.type(ptr) == 0)
            release_ok = rel == word.type(releases[0])
            for v in releases[1:]:
                release_ok |= rel == word.type(v)
            ok &= release_ok
            hits = np.flatnonzero(ok[: span // ptr])
            if len(out) + len(hits) > limits.max_loader_heap_records:
                return out, (f"more than {limits.max_loader_heap_records:,} words look like loader heap "
                             "records; the search stopped there")
            for i, a, b, c, d in zip(hits.tolist(), nxt[hits].tolist(), addr[hits].tolist(), size[hits].tolist(),
                                     rel[hits].tolist()):
                out[pos + i * ptr] = (a, b, c, d)
            pos += span
    return out, None


def _kept(records: dict, spec: dict, space: AddressSpace, skip) -> tuple[int, list[LoaderHeapBlock], list[int]]:
    """The records whose whole list holds together (each ``next`` another record, the last null), whose
    block starts in memory of the process and whose list a heap holds (:func:`_held`): (how many lists,
    their blocks by address, one per block, and for each heap the words that tell it: the one that points at
    its list, and those near it that point into its block)."""
    max_list = int(spec["max_list"])
    whole: dict[int, bool] = {}
    for start in records:
        if start in whole:
            continue
        chain, seen, at = [], set(), start
        while at in records and at not in whole and at not in seen and len(chain) < max_list:
            chain.append(at)
            seen.add(at)
            at = records[at][0]
        ok = whole.get(at, at == 0)
        for a in chain:
            whole[a] = ok
    kept = [a for a, ok in whole.items() if ok and space.is_described(records[a][1])]
    pointed = {records[a][0] for a in kept}
    held = _held(space, {a: records[a] for a in kept if a not in pointed}, skip, int(spec["near"]))
    heads = sorted(held)
    kept = {}
    for head in heads:
        at = head
        while at:
            kept[at] = held[head][0]
            at = records[at][0]
    lists = len(heads)
    blocks: dict = {}
    for a in sorted(kept):
        _, start, size, release = records[a]
        blocks.setdefault((start, size), LoaderHeapBlock(a, start, size, bool(release), kept[a]))
    return lists, sorted(blocks.values(), key=lambda b: (b.start, b.size)), sorted(held.values())


def _held(space: AddressSpace, heads: dict, skip, near: int) -> dict[int, list]:
    """The first records of ``heads`` (address -> record) that a loader heap holds, each with the addresses of
    the words that tell it: a word of the memory searched (all but ``skip``) equal to the record's address
    (first), and the pointers into its block at most ``near`` words before or after it."""
    if not heads:
        return {}
    ptr = space.pointer_size
    e = "<" if space.little_endian else ">"
    word = np.dtype(e + ("u8" if ptr == 8 else "u4"))
    wanted = np.array(sorted(heads), dtype=word)
    found: dict = {}
    window = space.limits.window
    for lo, hi in _searched(space, skip):
        pos = lo
        while pos < hi and len(found) < len(heads):
            start = max(lo, pos - near * ptr)
            data = space.read_available(start, min(hi, pos + window + near * ptr) - start)
            w = np.frombuffer(data, dtype=word, count=len(data) // ptr)
            k = np.searchsorted(wanted, w)
            k[k == len(wanted)] = 0
            for i in np.flatnonzero(wanted[k] == w).tolist():
                head = int(w[i])
                if head in found:
                    continue
                _, block, size, _ = heads[head]
                first = max(0, i - near)
                around = w[first : i + near + 1]
                inside = np.flatnonzero((around >= word.type(block)) & (around <= word.type(block + size)))
                if len(inside):  # the word that points at the list, and those that point into its block
                    found[head] = [start + i * ptr] + [start + (first + j) * ptr for j in inside.tolist()]
            pos += window
    return found
