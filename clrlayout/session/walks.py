"""Walking the heap: every string (in batches), every object, the objects of a type, the object at an address."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

import numpy as np

from ..findings import FindingKind, Findings
from ..heap.scan import iter_string_addresses
from ..heap.walk import HeapWalker, WalkedObject
from ..objects.strings import StringObject, read_strings
from ..util.arrays import distinct

if TYPE_CHECKING:
    from ..heap.fastwalk import WindowObjects
    from ..objects.batches import StringBatch

BATCH = 65536


class Walks:
    """Walking the heap: every string (in batches), every object, the objects of a type, the object at an address. (a
    part of :class:`~clrlayout.session.Session`)."""

    def strings(self, selected=None) -> Iterator[StringObject]:
        """Every System.String of the heap, in heap order, each with ``address``, ``method_table``,
        ``length``, ``value``, ``size`` (SOS size), ``aligned_size`` and ``header`` (the sync block word).

        ``selected``: an :class:`~clrlayout.analyses.filters.StringFilter` (None: every string)."""
        for batch in self.iter_batches():
            if selected is not None:
                batch = selected.apply(batch)
            yield from batch.objects()

    def objects(self) -> Iterator[WalkedObject]:
        """Every object of the GC heap but free objects, in heap order, each with ``address``,
        ``method_table``, ``size`` (SOS size), ``aligned_size``, ``count`` and ``type_name``.

        Needs the exact heap walk (:class:`~clrlayout.errors.HeapNotFound` otherwise: a scan finds
        strings, not every object)."""
        self.require_exact("listing objects")
        self.string_method_table()
        names: dict[int, str | None] = {}
        known = self.mts.get
        for win in self.heap_steps().windows():
            for off, mt, count, aligned in zip(win.offsets.tolist(), win.method_tables.tolist(),
                                               win.counts.tolist(), win.aligned.tolist()):
                t = known(mt)
                if t.kind == "free":
                    continue
                if mt not in names:
                    names[mt] = self.type_name(mt)
                yield WalkedObject(win.base + off, mt, t.object_size(count), aligned, count, t, win.segment,
                                 names[mt])

    def _window_object(self, win, i: int, segment=None) -> WalkedObject:
        """Object ``i`` of a window of the vectorised walk, named."""
        mt = int(win.method_tables[i])
        t = self.mts.get(mt)
        count = int(win.counts[i])
        return WalkedObject(win.base + int(win.offsets[i]), mt, t.object_size(count), int(win.aligned[i]), count, t,
                          segment or win.segment, self.type_name(mt))

    def objects_named(self, name: str | None, method_table: int | None = None,
                      progress=None, exact: bool = True) -> Iterator[WalkedObject]:
        """The objects of the types named ``name`` (as the DAC or as reflection prints it; None: any name;
        ``exact=False``: whose name contains it, as SOS's ``-type``) and of MethodTable ``method_table`` (None:
        any), in heap order, in one walk: each window's MethodTables are named once, as they are met (exact
        walk only)."""
        self.require_exact("listing objects")
        match: dict[int, bool] = {}
        for win in self.heap_steps(progress).windows():
            kinds = distinct(win.method_tables)
            for mt in kinds.tolist():
                if mt not in match:
                    match[mt] = (method_table is None or mt == method_table) and (
                        name is None or self.is_named(mt, name, exact))
            wanted = kinds[[match[mt] for mt in kinds.tolist()]]
            if not len(wanted):
                continue
            for i in np.flatnonzero(np.isin(win.method_tables, wanted)).tolist():
                yield self._window_object(win, i)
        self._walked_types = True

    def object_at(self, address: int) -> WalkedObject | None:
        """The object (free space included) whose bytes, header to padding, hold ``address`` (None: no object of
        the exactly walked heap does).  The first call walks only the segment that holds it, from its start; a
        second one makes an index of every object's start (one walk of the heap), and every call after it is a
        binary search in that index."""
        if self._object_starts is not None:
            return self._indexed_object(address)
        from ..heap.fastwalk import FastWalker, HeapSteps

        self.require_exact("finding an object")
        self.string_method_table()
        h = self.profile.object.header_size
        if self._looked_up:
            return self._indexed_object(address)
        self._looked_up = True
        seg = self.heap.segment_at(address + h) or self.heap.segment_at(address)
        if seg is None:
            return None
        for win in HeapSteps(FastWalker(self.dump.memory, self.mts, self.findings), [seg]).windows():
            starts = win.offsets + (win.base - h)  # the first byte of each object (its header)
            i = int(np.searchsorted(starts, address, side="right")) - 1
            if i < 0:
                continue
            if address < int(starts[i]) + int(win.aligned[i]):
                return self._window_object(win, i, seg)
            if int(starts[-1]) + int(win.aligned[-1]) > address:
                return None
        return None

    def _indexed_object(self, address: int) -> WalkedObject | None:
        """:meth:`object_at` through the index of every object's first byte (header), aligned size, MethodTable,
        count and segment, made by one walk of the heap the first time (about 33 bytes an object)."""
        if self._object_starts is None:
            h = self.profile.object.header_size
            segments = {id(seg): i for i, seg in enumerate(self.heap.segments)}
            parts: list[list] = [[], [], [], [], []]
            for win in self.heap_steps().windows():
                if not len(win.offsets):
                    continue
                parts[0].append(win.offsets.astype(np.uint64) + np.uint64(win.base - h))
                parts[1].append(win.aligned.astype(np.uint64))
                parts[2].append(win.method_tables.astype(np.uint64))
                parts[3].append(win.counts.astype(np.uint32))
                parts[4].append(np.full(len(win.offsets), segments[id(win.segment)], dtype=np.uint32))
            arrays = [np.concatenate(p) if p else np.zeros(0, dtype=np.uint64) for p in parts]
            order = np.argsort(arrays[0], kind="stable")
            self._object_starts = [a[order] for a in arrays]
        starts, aligned, mts, counts, segment = self._object_starts
        if not 0 <= address < 1 << 64:
            return None
        i = int(starts.searchsorted(np.uint64(address), side="right")) - 1
        if i < 0 or address >= int(starts[i]) + int(aligned[i]):
            return None
        mt, count = int(mts[i]), int(counts[i])
        t = self.mts.get(mt)
        return WalkedObject(int(starts[i]) + self.profile.object.header_size, mt, t.object_size(count), int(aligned[i]),
                          count, t, self.heap.segments[int(segment[i])], self.type_name(mt))

    def iter_strings(self, decode: bool = True) -> Iterator[StringObject]:
        """Every System.String of the heap, in address order within each segment (values only with
        ``decode``)."""
        for batch in self.iter_batches():
            yield from batch.objects(decode)

    def iter_objects(self) -> Iterator[WalkedObject]:
        """Every object of the exact heap walk, free objects included, from the per-object reference
        walker (empty in object-scan mode)."""
        if not self.heap.exact:
            return iter(())
        return HeapWalker(self.dump.memory, self.mts, self.findings).iter_objects(self.heap.segments)

    def iter_batches(self, progress: Callable[[int], None] | None = None) -> Iterator[StringBatch]:
        """Every System.String of the heap, in batches (numpy arrays over a character buffer), in heap order.

        The exact heap is walked by the vectorised walker; ``progress(bytes)`` is called as it goes."""
        if not self.heap.exact:
            yield from _scan_batches(self)
            return
        if os.environ.get("CLRLAYOUT_WALKER") == "reference":  # the per-object walker (benchmarks, checks)
            yield from _reference_batches(self)
            return
        for win in self.heap_steps(progress).windows():
            yield from self.window_batches(win)

    @property
    def windowed(self) -> bool:
        """Whether the strings come window by window from the vectorised walk (see heap_steps)."""
        return self.heap.exact and os.environ.get("CLRLAYOUT_WALKER") != "reference"

    def heap_steps(self, progress=None):
        """The vectorised walk of the exact heap as steps from cursor to cursor, a window each
        (``heap.fastwalk.HeapSteps``); two processes can walk its windows side by side (``parallel.py``)."""
        from ..heap.fastwalk import FastWalker, HeapSteps

        self.string_method_table()
        return HeapSteps(FastWalker(self.dump.memory, self.mts, self.findings, progress), self.heap.segments)

    def window_batches(self, win: WindowObjects) -> Iterator[StringBatch]:
        """The strings of one window of :meth:`heap_steps`, in batches; their anomalies are findings."""
        from ..objects.batches import batch_from_window

        for batch in batch_from_window(win, self.string_method_table(), self.profile, self.dump.memory,
                                       self.findings):
            _string_findings(self.findings, batch)
            yield batch


def _string_findings(findings: Findings, batch) -> None:
    """A batch's strings without a terminator or with non-zero header padding, as findings."""
    if batch.terminated is not None and not batch.terminated.all():
        for i in np.flatnonzero(~batch.terminated):
            findings.add(FindingKind.STRING_NOT_TERMINATED, int(batch.addresses[i]),
                         f"no zero terminator after {int(batch.lengths[i])} characters")
    if batch.header_padding is not None and batch.header_padding.any():
        for i in np.flatnonzero(batch.header_padding):
            findings.add(FindingKind.STRING_BAD_HEADER_PADDING, int(batch.addresses[i]),
                         f"header padding DWORD is {int(batch.header_padding[i]):#x}, not 0")


def _reference_batches(session: Walks):
    """Batches from the per-object reference walker (heap/walk.py) instead of the vectorised one."""
    from ..objects.batches import batch_from_objects

    string_mt = session.string_method_table()
    chunk = []
    for obj in session.iter_objects():
        if obj.method_table == string_mt:
            chunk += [dataclasses.replace(s, heap=obj.segment.generation(obj.address))
                      for s in read_strings(session.dump.memory, session.profile, [obj.address], obj.segment.large,
                                            session.findings)]
            if len(chunk) >= BATCH:
                yield batch_from_objects(session.profile, chunk)
                chunk = []
    if chunk:
        yield batch_from_objects(session.profile, chunk)


def _scan_batches(session: Walks):
    """Batches from the checked object scan (one read per string, fields decoded per batch)."""
    from ..objects.batches import batch_from_addresses

    string_mt = session.string_method_table()
    space = session.dump.memory
    profile = session.profile
    threshold = profile.object.large_object_threshold
    base, comp = profile.string.base_size, profile.string.component_size

    def large(address: int) -> bool:  # the GC puts objects of at least the threshold on the LOH
        length = space.try_read_u32(address + profile.string.length_offset) or 0
        return base + comp * length >= threshold

    chunk = []

    def flush():
        batch = batch_from_addresses(space, profile, string_mt, chunk, large, session.findings)
        if batch is not None:
            _string_findings(session.findings, batch)
        return batch

    for address in iter_string_addresses(session.dump, session.mts, string_mt, session.findings,
                                         session.heap.bounds):
        chunk.append(address)
        if len(chunk) >= BATCH:
            batch = flush()
            chunk = []
            if batch is not None:
                yield batch
    if chunk:
        batch = flush()
        if batch is not None:
            yield batch
