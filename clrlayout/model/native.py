"""The native heap in the model: :func:`native_heap` reads glibc's malloc state of a Linux core once
(:mod:`clrlayout.native`) and gives what ``clrlayout native`` shows: the figures glibc itself would report, the
arenas, the chunks and the leaked ones.  Numbers only (addresses as ints); the presenters format them."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any

import numpy as np

from ..native import figures
from ..native.arenas import NativeHeap, read_native_heap
from ..native.chunks import IN_USE, MMAPPED, NO_ARENA, STATES
from ..session.state import UNSET

if TYPE_CHECKING:
    from ..dump import DumpFile
    from ..graph.build import HeapGraph
    from ..graph.objectgraph import ObjectGraph
    from ..limits import Limits
    from ..native.leaks import ChunkIndex
    from ..session import Session

PREVIEW = 32
#: dominators followed up from one owner at the most (a dominator tree is as deep as the longest chain of objects)
MAX_CHAIN = 1 << 20


@dataclass(frozen=True)
class Chunk:
    """One chunk: its start (the header; user data is two words on), its size as glibc counts it (flags masked),
    its state (``in-use``, ``tcache``, ``fastbin``, ``bin``, ``top``, ``mmapped``, ``arena``) and arena."""

    address: int
    size: int
    state: str
    arena: int | None

    def as_dict(self) -> dict[str, Any]:
        return {"address": self.address, "size": self.size, "state": self.state, "arena": self.arena}


@dataclass
class Owners:
    """Which live managed object owns each owned chunk, and which chunks only dead objects hold."""

    #: chunk (index into the heap's arrays) -> (object address, type name)
    live: dict[int, tuple[int, str]]
    #: chunk -> (object address, type name) of a dead object that holds it, where no live one does
    dead: dict[int, tuple[int, str]]
    #: chunk -> the graph node of its live owner
    nodes: dict[int, int]


class NativeHeapView:
    """glibc's malloc in one core: :attr:`mallinfo` (``mallinfo2()``'s fields), :attr:`arenas` (each as
    ``malloc_info`` and more), :meth:`chunks`, :meth:`leaks`, and in a .NET process :attr:`owners` (the managed
    objects that hold native blocks)."""

    def __init__(self, dump: DumpFile, heap: NativeHeap, session: Session | None = None) -> None:
        self._dump = dump
        self._session = session
        self.heap = heap
        #: the owners found for a heap graph and its liveness: (graph, live, owners)
        self._owners_of: tuple[HeapGraph, np.ndarray, Owners] | None = None
        figures.check(heap)

    @cached_property
    def _index(self) -> ChunkIndex:
        from ..native.leaks import ChunkIndex

        return ChunkIndex(self.heap)

    @cached_property
    def owners(self) -> Owners | None:
        """The owners, where the dump is of a .NET process whose heap can be walked; None elsewhere."""
        session = self._session
        if session is None:
            return None
        og = session.object_graph()
        return self.owners_in(og.graph, og.live)

    def owners_in(self, graph: HeapGraph, live: np.ndarray) -> Owners:
        """The owners among the objects of a heap graph (kept for that graph and liveness: the report and
        ``retained`` ask for them again).

        Args:
            graph: the heap graph.
            live: per node, whether it is live.
        """
        kept = self._owners_of
        if kept is not None and kept[0] is graph and np.array_equal(kept[1], live):
            owners: Owners = kept[2]
            return owners
        found = self._owners_in(graph, live)
        self._owners_of = (graph, live, found)
        return found

    def _owners_in(self, graph: HeapGraph, live: np.ndarray) -> Owners:
        from ..native.owners import candidate_words, owners

        session, index = self._session, self._index
        assert session is not None  # owners are asked only where there is a managed heap
        ranges = [(seg.start, seg.end) for seg in session.heap.segments]
        words, nodes, ks = candidate_words(self._dump.memory, ranges, graph.addresses, graph.aligned, index)
        nodes, ks, _ = owners(words, nodes, ks, graph.addresses, graph.method_tables, session.type_layout,
                              self._dump.pointer_size)
        found = Owners({}, {}, {})
        for node, k in zip(nodes.tolist(), ks.tolist()):
            row = int(index.rows[k])
            holder = (int(graph.addresses[node]), session.type_name(graph.method_table(node)) or "?")
            if live[node]:
                if row not in found.live:
                    found.live[row] = holder
                    found.nodes[row] = node
            else:
                found.dead.setdefault(row, holder)
        for row in found.live:
            found.dead.pop(row, None)
        return found

    def retained_native(self, owners: Owners, idom: np.ndarray, nodes: Iterable[int]) -> dict[int, int]:
        """The native bytes each node would free (its finalizers or SafeHandles releasing them).

        Args:
            owners: the chunks' owners (:meth:`owners_in`).
            idom: each node's immediate dominator.
            nodes: the nodes asked about.

        Returns:
            For each node, the bytes of the native chunks owned by the objects it dominates (itself included).
        """
        return _dominated_bytes(self.owned(owners), idom, nodes)

    def owned(self, owners: Owners) -> list[tuple[int, int]]:
        """(owning node, bytes) of each chunk a live object owns.

        Args:
            owners: the chunks' owners (:meth:`owners_in`).
        """
        return [(node, int(self.heap.size[row])) for row, node in owners.nodes.items()]

    def by_owner(self) -> list[dict[str, Any]]:
        """Native bytes per owning managed type: objects, chunks, bytes; largest first."""
        owners = self.owners
        if owners is None:
            return []
        rows: dict[str, dict[str, Any]] = {}
        for row, (address, name) in owners.live.items():
            r = rows.setdefault(name, {"type": name, "objects": set(), "chunks": 0, "bytes": 0})
            r["objects"].add(address)
            r["chunks"] += 1
            r["bytes"] += int(self.heap.size[row])
        out = [dict(r, objects=len(r["objects"])) for r in rows.values()]
        return sorted(out, key=lambda r: (-r["bytes"], r["type"]))

    @property
    def version(self) -> str:
        version: str = self.heap.version
        return version

    @property
    def mallinfo(self) -> dict[str, int] | None:
        return figures.mallinfo(self.heap)

    @cached_property
    def arenas(self) -> list[dict[str, Any]]:
        return figures.arena_rows(self.heap)

    def summary(self) -> dict[str, Any]:
        h = self.heap
        return {"allocator": "glibc", "version": self.version, "version_source": h.libc.version_source or "shape",
                "layout": h.layout.versions, "libc": h.libc.path or None, "main_arena": h.main_arena, "mp": h.mp,
                "mallinfo": self.mallinfo, "arenas": self.arenas, "mmapped": figures.mmapped(h),
                "size_classes": figures.size_classes(h), "totals": figures.totals(h),
                "tcaches": [{"address": t.address, "thread": t.thread, "count": len(t.chunks),
                             "bytes": sum(t.chunks.values())} for t in h.tcaches],
                "missing": list(h.missing), "warnings": list(h.warnings),
                "findings": [f.as_dict() for f in h.findings]}

    def _arena_address(self, index: int) -> int | None:
        return None if index == NO_ARENA else (self.heap.arenas[index].address or None)

    def chunks(self, states: tuple[str, ...] = ()) -> Iterator[dict[str, Any]]:
        """Every chunk in address order.

        Args:
            states: only the chunks in these states (``in-use``, ``tcache``, ...); () for all.

        Yields:
            Each chunk as a dict: :class:`Chunk`'s fields, and in a .NET process ``owner`` and ``owner_type`` (the
            live managed object that holds it, or None).
        """
        h = self.heap
        wanted = np.isin(h.state, [STATES.index(s) for s in states]) if states else np.ones(len(h.state), bool)
        owners = self.owners
        for i in np.flatnonzero(wanted):
            row = Chunk(int(h.address[i]), int(h.size[i]), STATES[h.state[i]],
                        self._arena_address(int(h.arena[i]))).as_dict()
            if owners is not None:
                owner = owners.live.get(int(i))
                row["owner"] = owner[0] if owner else None
                row["owner_type"] = owner[1] if owner else None
            yield row

    @cached_property
    def _reach(self) -> tuple[ChunkIndex, np.ndarray]:
        """(chunk index, reach level per chunk): in a .NET process the GC heap is no root; the native pointers of
        live objects are."""
        from ..native.leaks import reached

        owners = self.owners
        if owners is None:
            return reached(self._dump, self.heap, index=self._index)
        assert self._session is not None  # owners come from a managed heap
        segments = [(seg.start, max(seg.end, seg.committed or 0)) for seg in self._session.heap.segments]
        header = self.heap.layout.chunk["header"]
        held = np.array([int(self.heap.address[r]) + header for r in owners.live], dtype=np.uint64)
        return reached(self._dump, self.heap, outside=segments, extra_roots=held, index=self._index)

    def leaks(self, largest: int | None = None) -> Iterator[dict[str, Any]]:
        """The in-use chunks nothing reaches (:mod:`clrlayout.native.leaks`), in address order.

        Args:
            largest: only that many, the biggest first (None: all).

        Yields:
            Each leaked chunk as :meth:`chunks` gives it, with its first bytes (``preview``), its size class and,
            in a .NET process, ``held_by_dead``: the dead managed object that still points at it, or None.
        """
        index, level = self._reach
        h = self.heap
        leaked = np.flatnonzero(level == 0)
        if largest is not None:
            leaked = leaked[np.argsort(-h.size[index.rows[leaked]].astype(np.int64), kind="stable")[:largest]]
        for k in leaked:
            i = int(index.rows[k])
            address, size = int(h.address[i]), int(h.size[i])
            header = h.layout.chunk["header"]
            preview = self._dump.memory.read_available(address + header, min(PREVIEW, size - header))
            row = {**Chunk(address, size, STATES[h.state[i]], self._arena_address(int(h.arena[i]))).as_dict(),
                   "size_class": 1 << (size.bit_length() - 1), "preview": preview}
            dead = self.owners.dead.get(i) if self.owners is not None else None
            if self.owners is not None:  # a block only dead objects hold: leaked, and which object says so
                row["held_by_dead"] = {"address": dead[0], "type": dead[1]} if dead else None
            yield row

    def leak_summary(self, largest: int) -> dict[str, Any]:
        """The leaks in figures.

        Args:
            largest: how many of the largest leaks to give (rows as :meth:`leaks` gives them).

        Returns:
            The leaks' ``count`` and ``bytes``, ``held_by_dead`` (how many only dead managed objects hold), the
            ``largest`` and ``missing`` (what the dump lacks for the search).
        """
        index, level = self._reach
        leaked = self.reach_counts()["leaked"]
        dead: dict[int, tuple[int, str]] = self.owners.dead if self.owners is not None else {}
        held_by_dead = int(np.isin(index.rows[level == 0], np.fromiter(dead, dtype=np.int64)).sum()) if dead else 0
        return {**leaked, "held_by_dead": held_by_dead, "largest": list(self.leaks(largest)),
                "missing": list(self.heap.missing)}

    def reach_counts(self) -> dict[str, dict[str, int]]:
        index, level = self._reach
        size = self.heap.size[index.rows]
        return {name: {"count": int((level == v).sum()), "bytes": int(size[level == v].sum())}
                for v, name in ((0, "leaked"), (1, "from_roots"), (2, "through_chunks"))}


def native_heap(dump: DumpFile, session: Session | None = None) -> NativeHeapView:
    """The native heap of an open dump.

    Args:
        dump: the reader's :class:`clrlayout.dump.DumpFile`.
        session: the .NET engine over the same dump, for owners and for the managed side of the leaks (and its
            GC heap, where no mmapped chunk is looked for); None for any other process.

    Raises:
        clrlayout.errors.NativeHeapNotFound: the dump has no glibc heap to read.
    """
    segments = [(seg.start, max(seg.end, seg.committed or 0)) for seg in session.heap.segments] \
        if session is not None and session.heap.exact else []
    return NativeHeapView(dump, read_native_heap(dump, segments), session)


def native_heap_of(session: Session) -> NativeHeapView | None:
    """The session's native heap, read once and kept.

    Args:
        session: the engine over the dump.

    Returns:
        The view, or None where the dump has none to read (not a Linux core, another allocator, a trimmed core).
    """
    if session._native_heap is UNSET:
        view = None
        if session.dump.format == "elf-core":
            from ..errors import ClrLayoutError

            try:
                view = native_heap(session.dump, session)
            except ClrLayoutError:
                view = None
        session._native_heap = view
    found: NativeHeapView | None = session._native_heap  # type: ignore[assignment]  # set just above
    return found


def retained_native_of(session: Session, og: ObjectGraph, nodes: Iterable[int]) -> dict[int, int] | None:
    """The native bytes each node of an object graph would free.

    Args:
        session: the engine over the dump.
        og: the object graph.
        nodes: the nodes asked about.

    Returns:
        For each node, the native bytes the objects it dominates own; None where the dump has no native heap.
    """
    idom, _, _ = og.dominators()
    kept = og.layers.load("native") if og.layers is not None else None  # as a run before found them
    if kept is not None:
        if not kept["has"][0]:
            return None
        return _dominated_bytes(zip(kept["nodes"].tolist(), kept["sizes"].tolist()), idom, nodes)
    before = (len(session.warnings), session.findings.count)
    view = native_heap_of(session)
    owned = view.owned(view.owners_in(og.graph, og.live)) if view is not None else []
    if og.layers is not None and (len(session.warnings), session.findings.count) == before:  # a clean read only
        og.layers.save("native", {"nodes": np.array([n for n, _ in owned], dtype=np.int64),
                                  "sizes": np.array([b for _, b in owned], dtype=np.int64),
                                  "has": np.array([view is not None])})
    return _dominated_bytes(owned, idom, nodes) if view is not None else None


def _dominated_bytes(owned: Iterable[tuple[int, int]], idom: np.ndarray, nodes: Iterable[int]) -> dict[int, int]:
    """For each of ``nodes``: the bytes of the ``owned`` (node, bytes) pairs whose node it dominates."""
    wanted = {int(n): 0 for n in nodes}
    n = len(idom)
    for node, size in owned if wanted else ():  # no node asked about: no chain to climb
        v, steps = node, 0
        while 0 <= v < n and steps < MAX_CHAIN:
            if v in wanted:
                wanted[v] += size
            v, steps = int(idom[v]), steps + 1
    return wanted


def open_native(path: str, limits: Limits | None = None, assemblies: Iterable[str] = ()) -> NativeHeapView:
    """Open a core for its native heap (any Linux process).

    Args:
        path: the core file.
        limits: the bounds on what a dump may make the reader do.
        assemblies: folders to find assemblies in (to name the managed owners' types).

    Returns:
        The view; in a .NET process whose GC heap can be walked, with the managed objects that own native blocks.

    Raises:
        clrlayout.errors.NativeHeapNotFound: the core has no glibc heap to read, and says why.
    """
    from ..dump import open_dump
    from ..errors import ClrLayoutError
    from ..limits import DEFAULT_LIMITS
    from ..runtime.detect import detect_runtime
    from ..session import open_session

    limits = limits or DEFAULT_LIMITS
    dump = open_dump(path, limits)
    try:
        detect_runtime(dump)
    except ClrLayoutError:  # no .NET runtime: the native heap alone
        return native_heap(dump)
    why = None
    try:  # the engine over a dump of its own: one that fails closes what it opened
        session = open_session(path, limits=limits, assemblies=list(assemblies))
    except ClrLayoutError as e:
        session, why = None, f"the managed heap cannot be read ({e})"
    if session is not None and not session.heap.exact:
        session.close()
        session, why = None, "the GC heap cannot be walked exactly"
    segments = [(seg.start, max(seg.end, seg.committed or 0)) for seg in session.heap.segments] if session else []
    view = NativeHeapView(dump, read_native_heap(dump, segments), session)
    if why:
        view.heap.warnings.append(f"{why}: no owners, and the whole GC heap is a root of the leak search")
    return view


__all__ = ["IN_USE", "MMAPPED", "Chunk", "NativeHeapView", "native_heap", "open_native"]
