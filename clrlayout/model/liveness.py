"""``--live`` and ``--dead``: a listing's selection narrowed to the objects the roots reach (or do not), as
SOS's ``-live``/``-dead``.  Free space is neither; the objects of frozen segments no root reaches (string
literals, frozen objects the GC never frees) are not dead unless asked for."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from .dump import Dump


def select_live(dump: Dump, selected: Any, live: bool, kinds: tuple[str, ...],
                with_frozen: bool = False, totals: bool = False) -> tuple[Any, int]:
    """``selected`` (a :class:`~clrlayout.analyses.filters.StringFilter` or ``ObjectFilter``) keeping only the
    live objects (``live``) or the dead ones.

    Args:
        kinds: the root kinds.
        with_frozen: with ``live`` False, also the frozen segments' objects no root reaches (as SOS's -dead).
        totals: the selection is for totals by type (an ObjectFilter), which the dump's index may keep: the
            live addresses are read only when a window is first tested.

    Returns:
        The narrowed selection, and how many frozen objects no root reaches were kept out of the dead ones.

    Raises:
        clrlayout.errors.RootsNotFound: a kind of root cannot be read from this dump.
    """
    session = dump._session
    graph = session.object_graph(kinds)
    frozen = [(seg.start, seg.end) for seg in session.heap.segments if seg.kind == "frozen"]
    in_frozen = None
    unreached = 0
    if not live and frozen and not with_frozen:  # the GC never frees them: not dead
        addresses = graph.graph.addresses
        in_frozen = np.zeros(len(addresses), dtype=bool)
        for lo, hi in frozen:
            in_frozen |= (addresses >= lo) & (addresses < hi)
        unreached = int(np.count_nonzero(in_frozen & ~graph.live))

    def live_addresses() -> Any:
        return reached_addresses(graph, in_frozen)

    if hasattr(selected, "free_method_tables"):
        free = frozenset(m for m, t in session.mts.known().items() if t.kind == "free")
        key = f"{graph.roots_key}-{'live' if live else 'dead'}{'-frozen' if with_frozen else ''}"
        return dataclasses.replace(selected, live_addresses=live_addresses if totals else live_addresses(),
                                   live=live, free_method_tables=free, live_key=key), unreached
    return dataclasses.replace(selected, live_addresses=live_addresses(), live=live), unreached


def reached_addresses(graph: Any, also: Any = None) -> Any:
    """The sorted addresses of the objects an object graph's roots reach (and of those ``also`` marks)."""
    return graph.graph.addresses[graph.live if also is None else graph.live | also]
