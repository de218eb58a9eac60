"""Building a dump's index ahead (``clrlayout index``, Eclipse MAT's parsing of a heap dump): the heap graph
written once, then what the graph commands compute from it for a set of roots (the reversed references, the
breadth-first tree, the dominator tree with retained sizes, the per-type sums, the native chunks live objects
own) and where each module's statics begin (:mod:`clrlayout.graph.index`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .dump import Dump


@dataclass(frozen=True)
class IndexWritten:
    """The heap graph's index of a dump."""

    where: str  #: its directory
    written: bool  #: written now (False: it was already there)
    why_not: str | None  #: why there is none (None: there is one)
    objects: int
    references: int


def write_graph(dump: Dump) -> IndexWritten:
    """The heap graph built and written to the dump's index.

    Raises:
        ValueError: the dump was opened with ``index=False``.
        clrlayout.errors.HeapNotFound: no exact heap walk.
    """
    session = dump._session
    where, written, why = session.build_index()
    graph = session._heap_graph
    assert graph is not None  # build_index made it
    return IndexWritten(where, written, why, int(graph.count), int(graph.edge_count))


def write_layers(dump: Dump, kinds: tuple[str, ...]) -> str:
    """What the graph commands compute for the roots ``kinds``, each written as a layer when first computed; the
    native chunks live objects own (where there is a native heap) and the statics' note.

    Returns:
        The layers' key (a hash of the roots and of the edges they add).

    Raises:
        clrlayout.errors.RootsNotFound: a kind of root cannot be read (the graph stays indexed).
    """
    from .native import retained_native_of

    session = dump._session
    og = session.object_graph(kinds)
    og.reverse, og.parent, og.by_type()  # each written as a layer when first computed (graph.index.Layers)
    retained_native_of(session, og, [])
    session.statics().arrays()  # where each module's statics begin (a note: static fields named)
    return str(og.roots_key)
