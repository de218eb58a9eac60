"""A dump's summaries as ``stats`` and ``memory`` compute them, for every caller that needs them (the
commands, ``diff`` and ``fleet``): the heap's totals per MethodTable, and where the dump's memory went."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..analyses.typestats import top_rows

__all__ = ["memory_map", "top_rows", "type_totals"]

if TYPE_CHECKING:
    from ..analyses.filters import ObjectFilter
    from ..analyses.memory import MemoryMap
    from ..analyses.typestats import TypeStats
    from ..session import Session

#: a command's progress callback (what ``parallel.run_steps`` reports as the walk goes)
Progress = Callable[..., Any]


def type_totals(session: Session, selected: ObjectFilter | None = None, jobs: int | None = None,
                progress: Progress | None = None, on_found: Callable[[int], None] = lambda n: None) -> TypeStats:
    """:class:`~clrlayout.analyses.typestats.TypeStats` of the objects ``selected`` (an ObjectFilter; None:
    all) accepts, over the exact heap walk; ``jobs`` processes share it (None: by the heap's size)."""
    from .. import parallel
    from ..analyses.typestats import TypeStats

    note = _live_totals_note(session, selected)
    kept = note.load() if note is not None else None
    if kept is not None:
        return TypeStats(totals={int(mt): list(row) for mt, row in kept["totals"]}, seen=set(kept["seen"]))
    result = TypeStats()
    before = (len(session.warnings), session.findings.count)
    if selected is not None and selected.live is not None:
        selected.live_sorted  # noqa: B018 -- read once here, not in each process the walk forks

    def collect(win: Any) -> parallel.StepOutput:
        part = TypeStats()
        part.add(win, session.mts, selected)
        return parallel.StepOutput(count=sum(v[0] for v in part.totals.values()), extra=part)

    parallel.run_steps(session, collect, share=parallel.can_share(session, jobs, writes=False),
                       progress=progress, on_found=on_found, absorb=result.merge)
    if note is not None and (len(session.warnings), session.findings.count) == before:  # a clean walk's alone
        note.save({"totals": sorted(result.totals.items()), "seen": sorted(result.seen)})
    return result


def _live_totals_note(session: Session, selected: ObjectFilter | None) -> Any:
    """Where the dump's index keeps the totals of a ``--live``/``--dead`` selection and nothing else (the walk's
    answer for those roots, as MAT keeps its per-class histogram): None for any other selection, or without an
    index."""
    where = session._graph_index_path
    if not isinstance(where, Path) or selected is None or not selected.only_live or not selected.live_key:
        return None
    from ..graph.index import Note

    return Note(where, f"typestats-{selected.live_key}", session.warnings.append)


def memory_map(session: Session, jobs: int | None = None, progress: Progress | None = None,
               on_found: Callable[[int], None] = lambda n: None,
               also: tuple[Callable[[Any], Any], Callable[[Any], None]] | None = None) -> MemoryMap:
    """:class:`~clrlayout.analyses.memory.MemoryMap`: every byte of the dump by kind, the address space, and
    (with the exact walk and MethodTables) the GC heap's object and free bytes per heap and generation.
    ``also``: (of a window, absorb) — what else a caller collects from the same walk's windows, absorbed in heap
    order (None when the walk is not made)."""
    from .. import parallel
    from ..analyses import memory as analysis

    heaps, bookkeeping, handles = session.loader_heaps(), session.gc_bookkeeping(), session.gc_handle_tables()
    from .native import native_heap_of

    view = native_heap_of(session)
    native = []
    if view is not None:
        h = view.heap
        native = [(s, e, "malloc arena heap") for a in h.arenas for s, e in a.heaps]
        mm = h.state == 5  # the mmapped chunks
        native += [(int(a), int(a + z), "malloc mmapped chunk") for a, z in zip(h.address[mm], h.size[mm])]
    pieces = analysis.paint(list(session.dump.memory.iter_runs()),
                            analysis.claims(session, heaps, bookkeeping, handles, native))
    gc = None
    if session.heap.exact and session.profile.method_table is not None:
        gc = analysis.GcFigures()

        def collect(win: Any) -> parallel.StepOutput:
            return parallel.StepOutput(extra=(analysis.gc_window(win, session.mts), also[0](win) if also else None))

        def absorb(extra: Any) -> None:
            assert gc is not None
            gc.merge(extra[0])
            if also:
                also[1](extra[1])

        session.string_method_table()
        parallel.run_steps(session, collect, share=parallel.can_share(session, jobs, writes=False),
                           progress=progress, on_found=on_found, absorb=absorb)
        gc.segments = analysis.segment_figures(session.heap.segments)
    split = None
    if view is not None:
        from ..native import figures

        native_bytes = sum(p.size for p in pieces if p.kind == "native")
        split = analysis.native_split(figures.totals(view.heap), view.heap.arenas, figures.mmapped(view.heap),
                                      native_bytes, "; ".join(view.heap.missing) or None)
    return analysis.MemoryMap(session.dump.memory.total_bytes, pieces, gc,
                              analysis.address_space(session.dump.memory_info), heaps, bookkeeping, handles, split)

