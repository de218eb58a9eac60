"""``clrlayout stats``: heap statistics by type (``!dumpheap -stat``), or the string statistics and duplicates."""

from __future__ import annotations

import click

from ..errors import TypeNotFound, UsageError
from .common import (
    STRING_TYPES,
    _named,
    _no_objects_of,
    _open,
    _preamble,
    _progress,
    _report,
    _type_not_found,
    assemblies_option,
    jobs_option,
    make_filter,
    make_object_filter,
    out,
    scan_options,
    warn,
    with_liveness,
)


@click.command()
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--type", "type_name", default=None,
              help="System.String: the string statistics; other TEXT: only types whose name contains it, as SOS "
                   "-type (default: every type, as !dumpheap -stat).")
@click.option("--exact", is_flag=True, help="--type is a whole type name, not a part of one.")
@click.option("--format", "fmt", type=click.Choice(["table", "json", "csv"]), default="table", show_default=True)
@click.option("--sort", type=click.Choice(["size", "count", "name"]), default=None,
              help="The order of the type rows: size (SOS's order: total size, smallest first; the default), "
                   "count, or name.")
@click.option("--duplicates", is_flag=True,
              help="With --type System.String: list values that occur more than once, by wasted bytes.")
@click.option("--top", type=click.IntRange(min=0), default=None,
              help="By type: only the N types with the most bytes (the most objects with --sort count, the first "
                   "N names with --sort name). With --duplicates: how many duplicated values to list (default 20; "
                   "0: all). Totals always count all.")
@jobs_option
@assemblies_option
@scan_options
def stats(file, type_name, exact, fmt, sort, duplicates, top, jobs, assemblies, strict, min_length, max_length,
          min_size, max_size, generations, contains, regex, address_range, mt, profile, heap, quiet, live, kinds):
    """Heap statistics by type (!dumpheap -stat); with --type System.String, totals, where the bytes go,
    length histogram and largest strings, or exact duplicates and their waste."""
    from ..analyses.stats import DuplicateCollector
    from ..present import stats as present

    string_only = [name for name, v in (("--min-length", min_length), ("--max-length", max_length),
                                        ("--contains", contains), ("--regex", regex),
                                        ("--duplicates", duplicates or None)) if v is not None]
    if type_name not in STRING_TYPES:
        if string_only:
            raise UsageError(f"{', '.join(string_only)}: only for strings (add --type System.String)"
                             + ("" if type_name is None else f", not --type {type_name}"))
        if exact and type_name is None:
            raise UsageError("--exact: give the type's name with --type")
        return _type_stats(file, type_name, exact, fmt, sort, top, jobs, assemblies, strict,
                           make_object_filter(min_size, max_size, generations, address_range, mt), profile, heap,
                           quiet, live, kinds)
    if sort is not None:
        raise UsageError("--sort orders the rows of the statistics by type; the string statistics have none")
    if top is not None and not duplicates:
        raise UsageError("--top with --type System.String limits the duplicated values: add --duplicates")
    selected = make_filter(min_length, max_length, contains, regex, address_range, min_size, max_size, generations)
    with _open(file, mt, profile, heap, assemblies) as session:
        session.string_method_table()
        selected = with_liveness(session, selected, live, kinds)
        _preamble(session, quiet)
        dups = DuplicateCollector(session.profile, session.dump.memory) if duplicates else None
        try:
            result, found = _collect_stats(session, jobs, fmt, selected, dups)
        finally:
            if dups is not None:
                dups.close()
        for line in present.render(session, result, found, fmt, 20 if top is None else top):
            out(line)
        _report(session, quiet, strict)


def _type_stats(file, type_name, exact, fmt, sort, top, jobs, assemblies, strict, selected, profile, heap, quiet,
                live=None, kinds=()):
    """!dumpheap -stat: count and bytes per MethodTable of the objects ``selected`` accepts, with names from
    metadata, of the types whose name contains ``type_name`` (or is it, ``exact``)."""
    from ..analyses.typestats import top_rows
    from ..model.summaries import type_totals
    from ..present import typestats as present

    with _open(file, None, profile, heap, assemblies) as session:
        session.require_exact("statistics by type")
        selected = with_liveness(session, selected, live, kinds)
        _preamble(session, quiet)
        with _progress(session, enabled=fmt == "table") as progress:
            result = type_totals(session, selected, jobs, progress.advance, progress.found)
        if type_name is not None and not _named(session, result.seen, type_name, exact):
            raise _type_not_found(session, type_name, exact)
        mt = selected.method_table
        if mt is not None and mt not in result.seen:
            raise _no_objects_of(session, mt, f"--mt {mt:#x}")
        if mt is not None and type_name is not None and not _named(session, [mt], type_name, exact):
            raise TypeNotFound(f"--mt {mt:#x} is {session.type_name(mt) or 'a type without a name'}, not a type "
                               f"{'named' if exact else 'whose name contains'} {type_name!r} (--type)")
        rows = result.rows(session.type_name, type_name, exact, sort or "size")
        for line in present.render(session, rows, fmt, top_rows(rows, top, sort or "size")):
            out(line)
        from ..present.info import unnamed_warning

        unnamed = unnamed_warning(session, result.totals)
        if unnamed and not quiet:
            warn(unnamed)
        _report(session, quiet, strict)


def _collect_stats(session, jobs, fmt, selected, dups):
    """The statistics (and, into ``dups``, the duplicates) of every string that passes the filters."""
    from ..analyses.stats import DuplicateCollector, StatsCollector

    servers = session.heap.heap_count if session.heap.gc_mode == "server" and session.heap.exact else 0
    collector = StatsCollector(session.profile, top=10, gc_heaps=servers)
    with _progress(session, enabled=fmt == "table") as progress:
        if session.windowed:
            from .. import parallel

            def collect(win):  # one step's statistics, merged in heap order by absorb
                part = StatsCollector(session.profile, top=10, gc_heaps=servers)
                dpart = DuplicateCollector(session.profile, None) if dups is not None else None
                for batch in session.window_batches(win):
                    batch = selected.apply(batch)
                    part.add(batch)
                    if dpart is not None:
                        dpart.add(batch)
                return parallel.StepOutput(count=part.count, extra=(part, dpart))

            def absorb(extra):
                collector.merge(extra[0])
                if dups is not None:
                    dups.merge(extra[1])

            parallel.run_steps(session, collect, share=parallel.can_share(session, jobs, writes=False),
                               progress=progress.advance, on_found=progress.found, absorb=absorb)
        else:
            for batch in session.iter_batches(progress.advance):
                progress.found(len(batch))
                batch = selected.apply(batch)
                collector.add(batch)
                if dups is not None:
                    dups.add(batch)
    return collector.finish(), (dups.finish() if dups is not None else None)
