"""Listing the heap's strings and objects as the commands do, fast: the strings in batches (numpy arrays over
their characters), window by window of the vectorised walk, shared by as many processes as the heap and the
cores allow (:mod:`clrlayout.parallel`: output and totals in heap order whatever the number), and the objects
of a type in one walk; and the string statistics and duplicates collected that way."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any

from ..analyses.filters import ObjectFilter, StringFilter
from ..parallel import StepOutput, write_out

if TYPE_CHECKING:
    from ..analyses.stats import DuplicateCollector, StringStats
    from .dump import Dump

__all__ = ["ObjectFilter", "StepOutput", "StringFilter", "batches", "duplicate_collector", "heap_bytes",
           "objects_of", "run_windows", "string_stats", "windowed", "write_out"]


def heap_bytes(dump: Dump) -> int:
    """The bytes a walk of the heap covers (a progress bar's whole): its segments', or the dump's memory for a
    scan."""
    return sum(seg.size for seg in dump._session.heap.segments) or dump.memory.total_bytes


def windowed(dump: Dump) -> bool:
    """Whether the strings come window by window from the vectorised walk (:func:`run_windows` applies)."""
    return bool(dump._session.windowed)


def run_windows(dump: Dump, collect: Callable[[Iterable[Any]], StepOutput], jobs: int | None, *, writes: bool,
                progress: Callable[[int], None] | None = None, on_found: Callable[[int], None] = lambda n: None,
                absorb: Callable[[Any], None] = lambda extra: None) -> tuple[int, int, int]:
    """Every window of the heap's walk: ``collect(its string batches) -> StepOutput`` (data written to stdout,
    extra absorbed, in heap order), by ``jobs`` processes (None: by the heap's size and the cores).

    Args:
        writes: whether ``collect`` writes output (sharing then needs a real stdout).

    Returns:
        The totals (count, SOS size, aligned size).
    """
    from .. import parallel

    session = dump._session

    def step(win: Any) -> StepOutput:
        return collect(session.window_batches(win))

    return parallel.run_steps(session, step, share=parallel.can_share(session, jobs, writes=writes),
                              progress=progress, on_found=on_found, absorb=absorb)


def batches(dump: Dump, progress: Callable[[int], None] | None = None) -> Iterator[Any]:
    """Every System.String of the heap in batches (:class:`~clrlayout.objects.batches.StringBatch`), in heap
    order, found by the checked scan where the heap cannot be walked."""
    return iter(dump._session.iter_batches(progress))


def objects_of(dump: Dump, type_name: str | None, method_table: int | None, exact: bool) -> Iterator[Any]:
    """The walked objects of the types named ``type_name`` (``exact``, or whose name contains it; None: any)
    and of ``method_table`` (None: any), in heap order (exact walk only)."""
    return iter(dump._session.objects_named(type_name, method_table, exact=exact))


def duplicate_collector(dump: Dump) -> DuplicateCollector:
    """A collector of the strings' exact duplicates (close it when done)."""
    from ..analyses.stats import DuplicateCollector

    session = dump._session
    return DuplicateCollector(session.profile, session.dump.memory)


def string_stats(dump: Dump, jobs: int | None, selected: Any, dups: DuplicateCollector | None,
                 progress: Callable[[int], None] | None = None,
                 on_found: Callable[[int], None] = lambda n: None) -> StringStats:
    """The statistics (and, into ``dups``, the duplicates) of every string ``selected`` keeps."""
    from ..analyses.stats import DuplicateCollector, StatsCollector

    session = dump._session
    servers = session.heap.heap_count if session.heap.gc_mode == "server" and session.heap.exact else 0
    collector = StatsCollector(session.profile, top=10, gc_heaps=servers)
    if windowed(dump):
        def collect(window_batches: Iterable[Any]) -> StepOutput:  # one step's statistics, merged in heap order
            part = StatsCollector(session.profile, top=10, gc_heaps=servers)
            dpart = DuplicateCollector(session.profile, None) if dups is not None else None
            for batch in window_batches:
                batch = selected.apply(batch)
                part.add(batch)
                if dpart is not None:
                    dpart.add(batch)
            return StepOutput(count=part.count, extra=(part, dpart))

        def absorb(extra: Any) -> None:
            collector.merge(extra[0])
            if dups is not None:
                dups.merge(extra[1])

        run_windows(dump, collect, jobs, writes=False, progress=progress, on_found=on_found, absorb=absorb)
    else:
        for batch in batches(dump, progress):
            on_found(len(batch))
            batch = selected.apply(batch)
            collector.add(batch)
            if dups is not None:
                dups.add(batch)
    result: StringStats = collector.finish()
    return result
