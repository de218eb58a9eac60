"""``trim --redact``: which bytes of a trimmed dump stay as they are; every other byte is written as zero.

An allow-list, not a search for secrets: a byte is kept only when the analysis read it outside the GC heap (the
runtime's structures; of the managed images only what naming reads: session/imagekeep.py) or when it is structure inside
the heap — each object's header word, MethodTable pointer, length (an array's bounds, a string's length) and every
reference slot its type's GC description names; of free space, its MethodTable and length.  Everything else on the
heap is zeroed: string characters, the elements of arrays of primitives, every primitive field of every object and
boxed value, free space, and whatever lies past a segment's allocated end (the walk reads ahead there: old copies
of moved objects, dead ones).  Bytes of the heap that the walk could not parse are never kept.  Thread stacks are
left out (``--keep-stacks`` keeps them whole), as are the floating-point and vector registers of every thread; the
notes and streams are redacted by the writers (dump/elfwrite.py, dump/miniwrite.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from ..heap.fastwalk import TAIL
from .imagekeep import image_parts

if TYPE_CHECKING:
    from . import Session


@dataclass
class RedactReport:
    """What was zeroed, by type: objects whose bytes were redacted, and how many bytes."""

    objects: int = 0
    bytes: int = 0
    kept_objects: int = 0  # of the types --redact-keep names: left whole
    by_type: dict = field(default_factory=dict)  # name -> [objects, bytes]
    stacks: str = "left out"

    def as_dict(self) -> dict:
        rows = sorted(self.by_type.items(), key=lambda kv: (-kv[1][1], kv[0]))
        return {"objects": self.objects, "bytes": self.bytes, "kept_objects": self.kept_objects,
                "stacks": self.stacks,
                "types": [{"name": n, "objects": c, "bytes": b} for n, (c, b) in rows]}


class Keep:
    """Sorted, disjoint byte intervals [start, end) of target memory kept as they are."""

    def __init__(self, starts: np.ndarray, ends: np.ndarray, held=()):
        self.starts, self.ends = starts, ends
        #: memory the dump holds beyond the intervals, written as zeros: the heap's segments whole (so that
        #: the output's walk finds all of the heap, its gaps included), the images' #US heaps
        self.held = list(held)

    @classmethod
    def of(cls, intervals, held=()) -> Keep:
        starts, ends = _merge(*intervals)
        return cls(starts, ends, held)

    def apply(self, address: int, data: bytes) -> bytes:
        """``data`` (target memory at ``address``) with every byte outside the intervals zeroed (a mask from
        the intervals' ends, not a loop over them: a heap holds several per object)."""
        n, end = len(data), address + len(data)
        lo = int(np.searchsorted(self.ends, address, side="right"))
        hi = int(np.searchsorted(self.starts, end, side="left"))
        if lo >= hi:
            return bytes(n)
        first = (np.maximum(self.starts[lo:hi], np.uint64(address)) - np.uint64(address)).astype(np.int64)
        last = (np.minimum(self.ends[lo:hi], np.uint64(end)) - np.uint64(address)).astype(np.int64)
        inside = np.cumsum(np.bincount(first, minlength=n + 1) - np.bincount(last, minlength=n + 1))[:n] > 0
        return (np.frombuffer(data, dtype=np.uint8) * inside).astype(np.uint8).tobytes()

    def pages(self, page: int) -> list[tuple[int, int]]:
        """The intervals rounded out to pages and merged: the memory the trimmed dump holds."""
        held_s, held_e = _arrays(self.held)
        starts, ends = np.concatenate([self.starts, held_s]), np.concatenate([self.ends, held_e])
        starts = starts - starts % np.uint64(page)
        ends = ends + (np.uint64(page) - ends % np.uint64(page)) % np.uint64(page)
        s, e = _merge(starts, ends)
        return list(zip(s.tolist(), e.tolist()))


def _arrays(pairs) -> tuple[np.ndarray, np.ndarray]:
    """``(start, end)`` pairs as two arrays of starts and ends."""
    pairs = list(pairs)
    return (np.array([a for a, _ in pairs], dtype=np.uint64), np.array([b for _, b in pairs], dtype=np.uint64))


def _merge(starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    starts, ends = np.asarray(starts, dtype=np.uint64), np.asarray(ends, dtype=np.uint64)
    keep = ends > starts
    starts, ends = starts[keep], ends[keep]
    if not len(starts):
        return starts, ends
    order = np.argsort(starts, kind="stable")
    starts, ends = starts[order], ends[order]
    reach = np.maximum.accumulate(ends)
    new = np.ones(len(starts), dtype=bool)
    new[1:] = starts[1:] > reach[:-1]
    return starts[new], np.maximum.reduceat(ends, np.flatnonzero(new))


def _subtract(starts, ends, cut_starts, cut_ends):
    """[starts, ends) minus [cut_starts, cut_ends) (both merged)."""
    out_s, out_e = [], []
    cuts = list(zip(cut_starts.tolist(), cut_ends.tolist()))
    j = 0
    for s, e in zip(starts.tolist(), ends.tolist()):
        while j < len(cuts) and cuts[j][1] <= s:
            j += 1
        k, pos = j, s
        while k < len(cuts) and cuts[k][0] < e:
            if cuts[k][0] > pos:
                out_s.append(pos)
                out_e.append(cuts[k][0])
            pos = max(pos, cuts[k][1])
            k += 1
        if pos < e:
            out_s.append(pos)
            out_e.append(e)
    return np.array(out_s, dtype=np.uint64), np.array(out_e, dtype=np.uint64)


#: what is kept of a free object past its MethodTable: its length (a 4-byte count on every architecture; on 64-bit
#: the 4 bytes after it are padding, and the free list's links follow)
FREE_LENGTH = 4


def heap_structure(session: Session, keep_types: set[int]):
    """(starts, ends) of the heap's bytes that are structure (header words, MethodTables, lengths, reference
    slots; whole objects of the MethodTables ``keep_types``), and the report of what the rest is."""
    from ..graph.references import GcDescs, window_references

    ptr = session.profile.pointer_size
    header = session.profile.object.header_size
    mts, space = session.mts, session.dump.memory
    descs = GcDescs(space, mts)
    report = RedactReport()
    starts, ends = [], []
    info: dict = {}  # MethodTable -> (bytes kept after the MethodTable pointer, kind)
    string_length = 4
    for win in session.heap_steps().windows():
        if not len(win.offsets):
            continue
        addresses = win.offsets.astype(np.uint64) + np.uint64(win.base)
        table, inverse = np.unique(win.method_tables, return_inverse=True)
        lengths = np.zeros(len(table), dtype=np.uint64)
        whole = np.zeros(len(table), dtype=bool)
        free = np.zeros(len(table), dtype=bool)
        for i, mt in enumerate(table.tolist()):
            if mt not in info:
                t = mts.get(mt)
                if t is None or not t.component_size:
                    extra = 0
                elif t.kind == "free":
                    extra = FREE_LENGTH
                elif t.kind == "string":
                    extra = string_length
                else:  # an array: its length, padding and (multi-dimensional) bounds, up to the first element
                    extra = max(0, t.base_size - header - ptr)
                info[mt] = (extra, t.kind if t is not None else None)
            lengths[i] = info[mt][0]
            whole[i] = mt in keep_types
            free[i] = info[mt][1] == "free"
        # the header word and the MethodTable pointer; of free space only the MethodTable (its header word is
        # whatever the memory held before: stale pointers, values)
        starts.append(np.where(free[inverse], addresses, addresses - np.uint64(header)))
        ends.append(addresses + np.uint64(ptr))
        extra = lengths[inverse]
        has = extra > 0
        starts.append(addresses[has] + np.uint64(ptr))
        ends.append(addresses[has] + np.uint64(ptr) + extra[has])
        kept = whole[inverse]
        if kept.any():  # --redact-keep: the whole object
            starts.append(addresses[kept] - np.uint64(header))
            ends.append(addresses[kept] - np.uint64(header) + win.aligned[kept].astype(np.uint64))
            report.kept_objects += int(kept.sum())
        src, slots, _ = window_references(win, mts, descs, space, ptr)
        slots = slots.astype(np.uint64)
        starts.append(slots)
        ends.append(slots + np.uint64(ptr))
        structure = np.where(free[inverse], 0,
                             header) + ptr + extra.astype(np.int64) + ptr * np.bincount(src, minlength=len(addresses))
        _count(session, report, table, inverse, win.aligned - structure, kept, info)
    if not starts:
        return np.zeros(0, dtype=np.uint64), np.zeros(0, dtype=np.uint64), report
    s, e = _merge(np.concatenate(starts), np.concatenate(ends))
    return s, e, report


def _count(session: Session, report, table, inverse, zeroed, kept, info) -> None:
    """The report's rows: each type's objects redacted and the bytes of them zeroed (all but the structure)."""
    redacted = ~kept
    n = np.bincount(inverse[redacted], minlength=len(table))
    total = np.bincount(inverse[redacted], weights=np.maximum(zeroed[redacted], 0), minlength=len(table))
    for i, mt in enumerate(table.tolist()):
        if not n[i]:
            continue
        name = "Free" if info[mt][1] == "free" else (session.type_name(mt) or f"<unknown type, MT {mt:#x}>")
        row = report.by_type.setdefault(name, [0, 0])
        row[0] += int(n[i])
        row[1] += int(total[i])
        report.objects += int(n[i])
        report.bytes += int(total[i])


def plan(session: Session, recorded, keep_type_names=(), keep_stacks: bool = False):
    """(Keep, RedactReport): the bytes of target memory the redacted dump holds as they are."""
    from ..errors import UsageError
    from ..graph.roots import thread_stacks

    session.require_exact("redact=True (it zeroes what is not structure, object by object)")
    keep_types = set()
    for name in keep_type_names:
        found = {mt for mt in session.mts.known() if session.is_named(mt, name, True)}
        if not found:
            raise UsageError(f"redact_keep={name}: no type of this name on the heap")
        keep_types |= found
    header = session.profile.object.header_size
    rec_s, rec_e = _merge(*_arrays(recorded))
    heap = [(seg.start - header, seg.end) for seg in session.heap.segments if seg.end > seg.start]
    # the heap's whole range: its objects are kept as structure below; the walk's reads past a segment's allocated
    # end (its look-ahead, up to the committed end) hold old copies of moved objects and dead ones, not structure
    cuts = [(lo, max(hi + TAIL, seg.committed or 0) if not seg.reserved else
             min(max(hi + TAIL, seg.committed or 0), seg.reserved))
            for (lo, hi), seg in zip(heap, [s for s in session.heap.segments if s.end > s.start])]
    # a thread's stack memory, the part below its stack pointer too (stale frames), up to where the GC heap
    # begins (thread_stacks: an ELF core's stack segment can run on into it)
    others = session.not_stacks() + [(b.start, b.end) for b in session.loader_heaps().blocks]
    tops = [seg.reserved or seg.committed or seg.end for seg in session.heap.segments] + [hi for _, hi in others]
    stacks = [(max([min(t.stack_start, start)] + [e for e in tops if e <= start]), end)
              for t, start, end in thread_stacks(session.dump, session.heap.segments, others)]
    if not keep_stacks:
        cuts += stacks
    image_cut, image_keep, image_held = image_parts(session, rec_s, rec_e)  # only what naming reads of images
    cuts += image_cut
    out_s, out_e = _subtract(rec_s, rec_e, *_merge(*_arrays(cuts)))
    heap_s, heap_e, report = heap_structure(session, keep_types)
    keep_s, keep_e = _arrays(image_keep)
    parts_s, parts_e = [out_s, heap_s, keep_s], [out_e, heap_e, keep_e]
    if keep_stacks and stacks:
        stack_s, stack_e = _arrays(stacks)
        parts_s.append(stack_s)
        parts_e.append(stack_e)
        report.stacks = "kept whole"
    held = heap + image_held  # the heap's pages and the images' metadata stay, zeroed where not kept
    return Keep.of((np.concatenate(parts_s), np.concatenate(parts_e)), held), report
