"""Where the objects of a heap hold references, from their GC descriptions (:mod:`.gcdesc`): every reference
slot of a window's objects at once (vectorised by MethodTable), or of one object, with the words the slots hold."""

from __future__ import annotations

import numpy as np

from .gcdesc import GcDesc, read_gcdesc

#: slots outside a window are read in runs: a new run where the next slot is this far on, or a run this long
_RUN_GAP = 4096
_RUN_BYTES = 64 << 20


class GcDescs:
    """The GC descriptions of the MethodTables met, each read once."""

    def __init__(self, space, mts):
        self.space, self.mts = space, mts
        self.flag = mts.profile.method_table.flags["ContainsPointers"]
        self._cache: dict[int, GcDesc | None] = {}

    def of(self, method_table: int) -> GcDesc | None:
        if method_table not in self._cache:
            mt = self.mts.get(method_table)
            desc = None
            if mt is not None and mt.flags & self.flag and mt.kind != "free":
                desc = read_gcdesc(self.space, method_table, mt.base_size)
            self._cache[method_table] = desc
        return self._cache[method_table]

    def size(self, address: int, method_table: int) -> int | None:
        """The SOS size of the object at ``address`` (its MethodTable's base size, plus its components'), as
        the walk computes it; None when the MethodTable is unreadable."""
        t = self.mts.get(method_table)
        if t is None:
            return None
        count = 0
        if t.component_size:
            raw = self.space.try_read(address + self.space.pointer_size, 4)
            count = int.from_bytes(raw, "little") if raw is not None else 0
        return t.base_size + t.component_size * count

    def slots(self, address: int, method_table: int) -> tuple[np.ndarray, np.ndarray]:
        """(slot addresses, the words they hold) of the object at ``address``'s reference slots, in order."""
        desc, size = self.of(method_table), self.size(address, method_table)
        if desc is None or size is None:
            return np.zeros(0, dtype=np.uint64), np.zeros(0, dtype=np.uint64)
        ptr = self.space.pointer_size
        offsets = desc.slot_offsets(size, ptr)
        offsets = offsets[(offsets >= 0) & (offsets + ptr <= size)]
        slots = np.uint64(address) + offsets.astype(np.uint64)
        data = self.space.try_read(address, size) if size <= _RUN_BYTES else None
        if data is not None:  # the object's bytes at once
            words = np.frombuffer(data, dtype="<u8" if ptr == 8 else "<u4", count=size // ptr)[offsets // ptr]
            return slots, words.astype(np.uint64)
        words = [self.space.try_read_pointer(int(s)) or 0 for s in slots.tolist()]  # not wholly in the dump
        return slots, np.array(words, dtype=np.uint64)


def _ranges(starts: np.ndarray, lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For runs ``starts[i] + k`` (k < lengths[i]): (each element's run index, each element's k)."""
    total = int(lengths.sum())
    run = np.repeat(np.arange(len(starts), dtype=np.int64), lengths)
    first = np.cumsum(lengths) - lengths
    k = np.arange(total, dtype=np.int64) - np.repeat(first, lengths)
    return run, k


def window_references(win, mts, descs: GcDescs, space, ptr: int, kinds=None):
    """(object index in the window, slot address, value) of every reference slot of a window's objects;
    ``kinds``: the window's ``np.unique(method_tables, return_inverse=True)``, when already had."""
    kinds, which = kinds if kinds is not None else np.unique(win.method_tables, return_inverse=True)
    out_src, out_slot = [], []
    for i, mt in enumerate(kinds.tolist()):
        desc = descs.of(mt)
        if desc is None:
            continue
        t = mts.get(mt)
        idx = np.flatnonzero(which == i)
        starts = win.offsets[idx].astype(np.int64) + win.base
        sizes = t.base_size + t.component_size * win.counts[idx].astype(np.int64)
        if desc.repeating:
            for i, o, size in zip(idx.tolist(), starts.tolist(), sizes.tolist()):
                offs = desc.slot_offsets(size, ptr)
                out_src.append(np.full(len(offs), i, dtype=np.int64))
                out_slot.append(o + offs)
            continue
        for series_size, start in desc.series:
            lengths = (series_size + sizes) // ptr
            lengths = np.maximum(lengths, 0)
            if not lengths.any():
                continue
            run, k = _ranges(starts, lengths)
            out_src.append(idx[run])
            out_slot.append(starts[run] + start + k * ptr)
    if not out_src:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.uint64)
    src = np.concatenate(out_src)
    slots = np.concatenate(out_slot)
    return src, slots, _read_words(win, slots, space, ptr)


def _read_words(win, slots: np.ndarray, space, ptr: int) -> np.ndarray:
    """The words at ``slots``: from the window's own bytes, else (an object running past them) the dump."""
    dtype = np.dtype("<u8" if ptr == 8 else "<u4")
    words = np.frombuffer(win.data, dtype=dtype, count=len(win.data) // ptr)
    pos = (slots - win.base) // ptr
    inside = (pos >= 0) & (pos < len(words))
    out = np.zeros(len(slots), dtype=np.uint64)
    out[inside] = words[pos[inside]]
    outside = np.flatnonzero(~inside)
    if len(outside):  # objects that run past the window (large arrays): their slots read a run at a time
        out[outside] = space.gather(slots[outside], ptr, _RUN_GAP, _RUN_BYTES)
    return out
