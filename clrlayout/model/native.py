"""The native heap in the model: :func:`native_heap` reads glibc's malloc state of a Linux core once
(:mod:`clrlayout.native`) and gives what ``clrlayout native`` shows: the figures glibc itself would report, the
arenas, the chunks and the leaked ones.  Numbers only (addresses as ints); the presenters format them."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from ..native import figures
from ..native.arenas import NativeHeap, read_native_heap
from ..native.chunks import IN_USE, MMAPPED, NO_ARENA, STATES

PREVIEW = 32


@dataclass(frozen=True)
class Chunk:
    """One chunk: its start (the header; user data is 16 bytes on), its size as glibc counts it (flags masked),
    its state (``in-use``, ``tcache``, ``fastbin``, ``bin``, ``top``, ``mmapped``, ``arena``) and arena."""

    address: int
    size: int
    state: str
    arena: int | None

    def as_dict(self) -> dict:
        return {"address": self.address, "size": self.size, "state": self.state, "arena": self.arena}


class NativeHeapView:
    """glibc's malloc in one core: :attr:`mallinfo` (``mallinfo2()``'s fields), :attr:`arenas` (each as
    ``malloc_info`` and more), :meth:`chunks`, :meth:`leaks`."""

    def __init__(self, dump, heap: NativeHeap):
        self._dump = dump
        self.heap = heap
        figures.check(heap)

    @property
    def version(self) -> str:
        return self.heap.version

    @property
    def mallinfo(self) -> dict | None:
        return figures.mallinfo(self.heap)

    @cached_property
    def arenas(self) -> list[dict]:
        return figures.arena_rows(self.heap)

    def summary(self) -> dict:
        h = self.heap
        return {"allocator": "glibc", "version": self.version, "version_source": h.libc.version_source or "shape",
                "layout": h.layout.versions, "libc": h.libc.path, "main_arena": h.main_arena, "mp": h.mp,
                "mallinfo": self.mallinfo, "arenas": self.arenas, "mmapped": figures.mmapped(h),
                "size_classes": figures.size_classes(h), "totals": figures.totals(h),
                "tcaches": [{"address": t.address, "thread": t.thread, "count": len(t.chunks),
                             "bytes": sum(t.chunks.values())} for t in h.tcaches],
                "missing": list(h.missing), "warnings": list(h.warnings),
                "findings": [f.as_dict() for f in h.findings]}

    def _arena_address(self, index: int) -> int | None:
        return None if index == NO_ARENA else (self.heap.arenas[index].address or None)

    def chunks(self, states: tuple[str, ...] = ()):
        """Every chunk in address order (or those in ``states``)."""
        h = self.heap
        wanted = np.isin(h.state, [STATES.index(s) for s in states]) if states else np.ones(len(h.state), bool)
        for i in np.flatnonzero(wanted):
            yield Chunk(int(h.address[i]), int(h.size[i]), STATES[h.state[i]], self._arena_address(int(h.arena[i])))

    @cached_property
    def _reach(self):
        from ..native.leaks import reached

        return reached(self._dump, self.heap)

    def leaks(self):
        """The in-use chunks nothing reaches (:mod:`clrlayout.native.leaks`), each with its first bytes."""
        index, level = self._reach
        h = self.heap
        for k in np.flatnonzero(level == 0):
            i = int(index.rows[k])
            address, size = int(h.address[i]), int(h.size[i])
            preview = self._dump.memory.read_available(address + 16, min(PREVIEW, size - 16))
            yield {**Chunk(address, size, STATES[h.state[i]], self._arena_address(int(h.arena[i]))).as_dict(),
                   "size_class": 1 << (size.bit_length() - 1), "preview": preview}

    def reach_counts(self) -> dict:
        index, level = self._reach
        size = self.heap.size[index.rows]
        return {name: {"count": int((level == v).sum()), "bytes": int(size[level == v].sum())}
                for v, name in ((0, "leaked"), (1, "from_roots"), (2, "through_chunks"))}


def native_heap(dump) -> NativeHeapView:
    """The native heap of an open :class:`clrlayout.dump.Dump` (the reader's)."""
    return NativeHeapView(dump, read_native_heap(dump))


def open_native(path: str, limits=None) -> NativeHeapView:
    """Open a core for its native heap alone (any Linux process, .NET or not)."""
    from ..dump import open_dump
    from ..limits import DEFAULT_LIMITS

    return native_heap(open_dump(path, limits or DEFAULT_LIMITS))


__all__ = ["Chunk", "NativeHeapView", "native_heap", "open_native", "IN_USE", "MMAPPED"]
