"""The GC heap of the model: :class:`Heap` (segments, objects, strings, the object at an address),
:class:`HeapObject`, one class for every object (a string is an object whose type is System.String), and the
heap's object :class:`Graph`: what a leak hunter asks of a heap and a set of roots (Eclipse MAT's and ClrMD's
questions) — references and referrers, why an object is alive, what it retains, the biggest retainers by object
or by type — answered from the same object graph as ``refs``, ``roots`` and ``retained`` (and from the dump's
index where it has one)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from ..graph.roots import ROOT_KINDS, Root
from ..heap.segments import HEAP_CODES
from .types import ClrType

if TYPE_CHECKING:
    from ..analyses.filters import ObjectFilter
    from ..analyses.typestats import TypeStats
    from ..graph.objectgraph import ObjectGraph
    from ..heap.segments import Segment
    from ..session import Session
    from .methods import MethodNamer


__all__ = ["HEAP_CODES", "ROOT_KINDS", "Graph", "Heap", "HeapObject", "Retained", "RootPath", "TypeRetained"]


@dataclass
class HeapObject:
    """One object of the GC heap: where it is, its type, its sizes (SOS's, and what it takes on the heap),
    its number of components (characters of a string, elements of an array) and the heap it is on."""

    address: int  #: the object pointer (the address of its MethodTable pointer), as SOS prints it
    type: ClrType
    size: int  #: BaseSize + ComponentSize x count: SOS's size
    aligned_size: int  #: the bytes it takes on the heap
    count: int
    generation: str  #: gen0, gen1, gen2, loh, poh or frozen
    _heap: Heap = field(repr=False, compare=False, default=None)  # type: ignore[assignment]  # always given
    _value: str | None = field(default=None, repr=False, compare=False)

    @property
    def method_table(self) -> int:
        return self.type.method_table

    def as_string(self) -> str | None:
        """A string's value (None for any other type)."""
        if not self.type.is_string:
            return None
        if self._value is None:
            self._value = self._heap._string_value(self)
        return self._value

    @property
    def fields(self) -> dict[str, object]:
        """The values of the instance fields, by name (see :meth:`~clrlayout.model.types.ClrField.decode`):
        what ``object`` prints, as Python values."""
        space = self._heap._session.dump.memory
        ptr = space.pointer_size
        out = {}
        for f in self.type.fields:
            data = space.try_read(self.address + f.offset, f.size)
            out[f.name] = None if data is None else f.decode(data, ptr)
        return out

    def references(self) -> list[HeapObject]:
        """The objects this one references (its reference fields' and elements' targets, in slot order, and a
        dependent handle's secondary when this is its primary).  They do not depend on the roots: an unreadable
        kind of root is no error here."""
        heap = self._heap
        graph = heap.graph(())
        node = graph.graph.node(self.address)
        if node is None:
            return []
        return [heap._node_object(graph, t) for t in graph.indices[graph.indptr[node]:graph.indptr[node + 1]].tolist()]

    def referrers(self) -> list[HeapObject]:
        """The objects that reference this one (:meth:`Heap.referrers`)."""
        return self._heap.referrers(self)

    def __str__(self) -> str:
        return f"{self.type} at {self.address:#x}"


@dataclass
class RootPath:
    """A root and a shortest chain of references from it to an object (:meth:`Heap.root_paths`)."""

    root: Root  #: kind, object, address (handle, slot, stack word), thread; a precise stack root's frame and slot
    #: (object, the field of the object before it that references it: None for the root's own object)
    chain: list[tuple[HeapObject, str | None]]
    #: a precise stack root's frame's method, as clrstack names it (None: not one, or not named)
    method: str | None = None

    def __str__(self) -> str:
        where = f" of thread {self.root.thread}" if self.root.thread is not None else ""
        if self.root.slot:
            where += f", frame {self.method or f'MethodDesc {self.root.method_desc:#x}'} slot {self.root.slot}"
        at = f" at {self.root.address:#x}" if self.root.address else ""
        return f"{self.root.kind}{where}{at}: " + " -> ".join(
            f"{obj}" + (f" (.{f})" if f else "") for obj, f in self.chain)


class Heap:
    """The GC heap of a dump: its segments, whether it is walked exactly (from the GC's own data) or found
    by a checked scan (strings only), and its objects."""

    def __init__(self, session: Session):
        self._session = session
        self._types: dict[int, ClrType] = {}
        self._graphs: dict[tuple[str, ...], ObjectGraph] = {}  #: root kinds -> the object graph with them
        self._namer: MethodNamer | None = None  #: names the frames of precise stack roots, made once

    @property
    def exact(self) -> bool:
        return self._session.heap.exact

    @property
    def segments(self) -> list[Segment]:
        return list(self._session.heap.segments)

    @property
    def gc_mode(self) -> str | None:
        """"workstation" or "server" (None where the dump does not tell)."""
        mode: str | None = self._session.heap.gc_mode
        return mode

    @property
    def gc_heap_count(self) -> int:
        """How many heaps the GC runs: one under workstation GC, one per heap under server GC (ClrMD's
        ``ClrHeap.SubHeaps``)."""
        count: int = self._session.heap.heap_count
        return count

    def type_totals(self, selected: ObjectFilter | None = None, jobs: int | None = None,
                    progress: Callable[..., Any] | None = None,
                    on_found: Callable[[int], None] = lambda n: None) -> TypeStats:
        """Count and bytes per MethodTable of the objects ``selected`` keeps (SOS's ``!dumpheap -stat``), over the
        exact heap walk.

        Args:
            selected: an :class:`~clrlayout.analyses.filters.ObjectFilter` (None: every object).
            jobs: processes that share the walk (None: by the heap's size and the cores).
            progress: called with the bytes walked.
            on_found: called with the number of objects found.
        """
        from .summaries import type_totals

        return type_totals(self._session, selected, jobs, progress, on_found)

    def type_of(self, method_table: int) -> ClrType | None:
        """The type of a MethodTable.

        Args:
            method_table: the MethodTable's address.

        Returns:
            The type, or None where no valid MethodTable is there.
        """
        if method_table not in self._types:
            t = ClrType.of(self._session, method_table)
            if t is None:
                return None
            self._types[method_table] = t
        return self._types[method_table]

    def _object_type(self, method_table: int) -> ClrType:
        """The type of an object the walk or the graph found (its MethodTable was checked then; one the dump no
        longer shows is a type without a name that says so, never an error)."""
        t = self.type_of(method_table)
        if t is None:
            return ClrType(method_table, None, 0, 0, "object", "no valid MethodTable there", self._session)
        return t

    def _object(self, o: Any) -> HeapObject:
        return HeapObject(o.address, self._object_type(o.method_table), o.size, o.aligned_size, o.count,
                          o.segment.generation(o.address), self)

    def objects(self) -> Iterator[HeapObject]:
        """Every object of the heap but free space, in heap order (exact walk only:
        :class:`~clrlayout.errors.HeapNotFound` otherwise)."""
        for o in self._session.objects():
            yield self._object(o)

    def strings(self) -> Iterator[HeapObject]:
        """Every System.String, in heap order (found by a checked scan where the heap cannot be walked)."""
        session = self._session
        string_type: ClrType | None = None
        for s in session.strings():
            if string_type is None:
                string_type = self._object_type(s.method_table)
            yield HeapObject(s.address, string_type, s.size, s.aligned_size, s.length, s.heap, self, s.value)

    def object_at(self, address: int) -> HeapObject | None:
        """The object whose bytes (header to padding) hold an address.

        Args:
            address: any address in the object, its header and padding included.

        Returns:
            The object, or None where no object holds the address (or it is free space).
        """
        o = self._session.object_at(address)
        return None if o is None or o.is_free else self._object(o)

    # --- the object graph (references, roots, liveness, retained sizes) ------------------------------------

    def graph(self, roots: tuple[str, ...] = ROOT_KINDS) -> ObjectGraph:
        """The object graph with these root kinds, built once per set of kinds.

        Args:
            roots: the root kinds ("handles", "finalizer", "stacks", "statics"); () for the references alone.

        Returns:
            The :class:`~clrlayout.graph.objectgraph.ObjectGraph`.

        Raises:
            clrlayout.errors.RootsNotFound: a kind of root cannot be read from this dump.
        """
        key = tuple(roots)
        if key not in self._graphs:
            self._graphs[key] = self._session.object_graph(key)
        return self._graphs[key]

    def object_graph(self, roots: tuple[str, ...] = ROOT_KINDS) -> Graph:
        """The heap's object graph with these root kinds, as the model asks it (:class:`~.graph.Graph`:
        references, referrers, root paths, liveness, retained sizes, the biggest retainers).

        Args:
            roots: the root kinds ("handles", "finalizer", "stacks", "statics").
        """
        return Graph(self, roots)

    def referrers(self, obj: HeapObject | int) -> list[HeapObject]:
        """The objects that reference an object, each once, in heap order (``refs --to``).

        Args:
            obj: the object, or its address.

        Returns:
            The referrers; like references, they do not depend on the roots.
        """
        graph = self.graph(())
        node = graph.graph.node(obj if isinstance(obj, int) else obj.address)
        if node is None:
            return []
        return [self._node_object(graph, int(s)) for s in dict.fromkeys(sorted(graph.referrers(node).tolist()))]

    def _method_name(self, md: int) -> str | None:
        from .methods import MethodNamer

        if self._namer is None:
            self._namer = MethodNamer(self._session)
        name: str | None = self._namer.name(md)
        return name

    def root_paths(self, obj: HeapObject | int, roots: tuple[str, ...] = ROOT_KINDS,
                   limit: int = 100) -> list[RootPath]:
        """Why an object is alive (``roots``, SOS ``!gcroot``).

        Args:
            obj: the object, or its address.
            roots: the root kinds to start from.
            limit: the most roots answered, nearest first.

        Returns:
            For each root that reaches it, a shortest chain of objects from the root's object to it, each with the
            field of the one before that references it.  Empty: the object is dead (no root reaches it).
        """
        graph = self.graph(roots)
        g = graph.graph
        node = g.node(obj if isinstance(obj, int) else obj.address)
        if node is None:
            return []
        by_node: dict[int | None, list[Root]] = {}
        for r in graph.roots.roots:
            by_node.setdefault(g.node(r.object), []).append(r)
        out = []
        for root_node, chain in graph.shortest_paths(node, limit):
            links: list[tuple[HeapObject, str | None]] = [(self._node_object(graph, chain[0]), None)]
            for prev, nxt in zip(chain, chain[1:]):
                fields = self._session.reference_fields(graph, prev, nxt)
                links.append((self._node_object(graph, nxt), fields[0] if fields else None))
            for r in by_node.get(root_node, [])[:1]:
                out.append(RootPath(r, links, self._method_name(r.method_desc) if r.method_desc else None))
        return out

    def roots(self, roots: tuple[str, ...] = ROOT_KINDS) -> list[Root]:
        """The roots of these kinds.

        Args:
            roots: the root kinds.

        Returns:
            Each :class:`~clrlayout.graph.roots.Root`: kind, object, address, thread.
        """
        return list(self.graph(roots).roots.roots)

    def is_live(self, obj: HeapObject | int, roots: tuple[str, ...] = ROOT_KINDS) -> bool:
        """Whether an object is reachable from the roots.

        Args:
            obj: the object, or its address.
            roots: the root kinds.
        """
        graph = self.graph(roots)
        node = graph.graph.node(obj if isinstance(obj, int) else obj.address)
        return node is not None and bool(graph.live[node])

    def retained_size(self, obj: HeapObject | int, roots: tuple[str, ...] = ROOT_KINDS) -> int:
        """The bytes the heap would free if an object became unreachable (its dominator subtree's sizes).

        Args:
            obj: the object, or its address.
            roots: the root kinds.
        """
        graph = self.graph(roots)
        node = graph.graph.node(obj if isinstance(obj, int) else obj.address)
        return 0 if node is None else int(graph.dominators()[1][node])

    def _node_object(self, graph: ObjectGraph, node: int) -> HeapObject:
        g = graph.graph
        mt = int(g.types[g.kinds[node]])
        t = self._types.get(mt) or self._object_type(mt)
        address = int(g.addresses[node])
        if t.component_size:  # an array's or string's length, read again (the graph keeps no sizes)
            size = g.size(node)
            count = (size - t.base_size) // t.component_size
        else:
            size, count = t.base_size, 0
        segment = self._session.heap.segment_at(address)
        generation = segment.generation(address) if segment is not None else "?"
        return HeapObject(address, t, size, int(g.aligned[node]), count, generation, self)

    def _string_value(self, obj: HeapObject) -> str | None:
        from ..findings import Findings
        from ..objects.strings import read_strings

        got = read_strings(self._session.dump.memory, self._session.profile, [obj.address],
                           obj.generation in ("loh", "poh"), Findings(0))
        return got[0].value if got else None


@dataclass(frozen=True)
class Retained:
    """What an object would free if it became unreachable (its dominator subtree)."""

    object: HeapObject
    bytes: int  #: the bytes of the objects it dominates, its own included
    objects: int  #: how many they are


@dataclass(frozen=True)
class TypeRetained:
    """A type's live objects and what they retain together (MAT's retained heap of a class: an object another
    of the type dominates is counted once)."""

    type: ClrType
    objects: int  #: its live objects
    bytes: int  #: their bytes on the heap
    retained: int  #: the bytes they retain together


class Graph:
    """The heap's object graph with the roots of ``roots`` (:meth:`Heap.object_graph`).

    References and referrers do not depend on the roots: they never fail because a kind of root cannot be read
    (.NET 9+ without its runtime's file, .NET Framework); liveness, root paths and retained sizes do, and raise
    :class:`~clrlayout.errors.RootsNotFound` then.
    """

    def __init__(self, heap: Heap, roots: tuple[str, ...] = ROOT_KINDS) -> None:
        self._heap = heap
        self.root_kinds = tuple(roots)

    def _rooted(self) -> ObjectGraph:
        return self._heap.graph(self.root_kinds)

    def _node(self, graph: ObjectGraph, obj: HeapObject | int) -> int | None:
        node: int | None = graph.graph.node(obj if isinstance(obj, int) else obj.address)
        return node

    def references(self, obj: HeapObject | int) -> list[HeapObject]:
        """The objects an object references, in slot order (a dependent handle's secondary after its primary's).

        Args:
            obj: the object, or its address.
        """
        graph = self._heap.graph(())
        node = self._node(graph, obj)
        if node is None:
            return []
        targets = graph.indices[graph.indptr[node]:graph.indptr[node + 1]].tolist()
        return [self._heap._node_object(graph, int(t)) for t in targets]

    def referrers(self, obj: HeapObject | int) -> list[HeapObject]:
        """The objects that reference an object, each once, in heap order.

        Args:
            obj: the object, or its address.
        """
        return self._heap.referrers(obj)

    def root_paths(self, obj: HeapObject | int, limit: int = 100) -> list[RootPath]:
        """For each root that reaches an object (nearest first, at most ``limit``), a shortest chain to it.

        Args:
            obj: the object, or its address.
            limit: the most roots answered.
        """
        return self._heap.root_paths(obj, self.root_kinds, limit)

    @property
    def roots(self) -> list[Root]:
        """The roots: kind, object, address (handle, slot, stack word), thread."""
        return list(self._rooted().roots.roots)

    def is_live(self, obj: HeapObject | int) -> bool:
        """Whether a root reaches an object.

        Args:
            obj: the object, or its address.
        """
        return self._heap.is_live(obj, self.root_kinds)

    def retained(self, obj: HeapObject | int) -> Retained | None:
        """What an object retains (None: no object there).

        Args:
            obj: the object, or its address.
        """
        graph = self._rooted()
        node = self._node(graph, obj)
        if node is None:
            return None
        _, size, count = graph.dominators()
        return Retained(self._heap._node_object(graph, node), int(size[node]), int(count[node]))

    def top_retainers(self, n: int = 20, by: str = "object") -> list[Retained] | list[TypeRetained]:
        """The biggest retainers of the live heap, as ``retained`` lists them.

        Args:
            n: how many.
            by: "object" (single objects, the biggest first, the lowest address among equals) or "type" (the
                types whose live objects retain the most together, then by name).

        Raises:
            ValueError: ``by`` is neither.
        """
        graph = self._rooted()
        _, size, count = graph.dominators()
        if by == "object":
            return [Retained(self._heap._node_object(graph, node), int(size[node]), int(count[node]))
                    for node in graph.largest_retainers(n)]
        if by != "type":
            raise ValueError(f"by={by!r}: 'object' or 'type'")
        rows = [(self._heap.type_of(mt), c, s, r) for mt, (c, s, r) in graph.by_type().items()]
        rows.sort(key=lambda row: (-row[3], row[0].name if row[0] is not None and row[0].name else ""))
        return [TypeRetained(t, c, s, r) for t, c, s, r in rows[:n] if t is not None]

    def live_totals(self) -> tuple[int, int]:
        """(live objects, their bytes on the heap)."""
        graph = self._rooted()
        live = graph.live
        return int(live.sum()), int(np.sum(graph.graph.aligned, where=live, dtype=np.int64))
