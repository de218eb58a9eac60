"""``clrlayout stats``: heap statistics by type (``!dumpheap -stat``), or the string statistics and duplicates."""

from __future__ import annotations

import click

from ..errors import UsageError
from .common import (
    STRING_TYPES,
    _open,
    _preamble,
    _progress,
    _report,
    assemblies_option,
    emit,
    format_option,
    jobs_option,
    make_filter,
    make_object_filter,
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
@format_option("table", "json", "csv")
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
    from ..model import listing
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
    with _open(file, mt, profile, heap, assemblies) as dump:
        dump.runtime.string_method_table()
        selected = with_liveness(dump, selected, live, kinds)
        _preamble(dump, quiet)
        dups = listing.duplicate_collector(dump) if duplicates else None
        try:
            with _progress(dump, fmt) as progress:
                result = listing.string_stats(dump, jobs, selected, dups, progress.advance, progress.found)
            found = dups.finish() if dups is not None else None
        finally:
            if dups is not None:
                dups.close()
        emit(present.result(_about(dump), result, found, 20 if top is None else top), fmt)
        _report(dump, quiet, strict)


def _about(dump) -> dict:
    """What the statistics say they are of: runtime, architecture, profile, how the heap was found."""
    return {"runtime": {"flavor": dump.runtime.flavor, "version": dump.runtime.version}, "arch": dump.arch,
            "profile": dump.runtime.profile, "exact": dump.runtime.heap.exact,
            "header_size": dump.runtime.object_header_size, "pointer_size": dump.runtime.pointer_size}


def _type_stats(file, type_name, exact, fmt, sort, top, jobs, assemblies, strict, selected, profile, heap, quiet,
                live=None, kinds=()):
    """!dumpheap -stat: count and bytes per MethodTable of the objects ``selected`` accepts, with names from
    metadata, of the types whose name contains ``type_name`` (or is it, ``exact``)."""
    from ..model.lookup import named, no_objects_of, not_of_name, type_not_found
    from ..model.summaries import top_rows
    from ..present import typestats as present

    with _open(file, None, profile, heap, assemblies) as dump:
        dump.require_exact("statistics by type")
        selected = with_liveness(dump, selected, live, kinds, totals=True)
        _preamble(dump, quiet)
        with _progress(dump, fmt) as progress:
            result = dump.runtime.heap.type_totals(selected, jobs, progress.advance, progress.found)
        if type_name is not None and not named(dump, result.seen, type_name, exact):
            raise type_not_found(dump, type_name, exact)
        mt = selected.method_table
        if mt is not None and mt not in result.seen:
            raise no_objects_of(dump, mt, f"--mt {mt:#x}")
        if mt is not None and type_name is not None:
            wrong = not_of_name(dump, mt, type_name, exact)
            if wrong is not None:
                raise wrong
        rows = result.rows(dump.runtime.type_name, type_name, exact, sort or "size")
        emit(present.result(_about(dump), rows, top_rows(rows, top, sort or "size")), fmt)
        unnamed = dump.runtime.unnamed_warning(result.totals)
        if unnamed and not quiet:
            warn(unnamed)
        _report(dump, quiet, strict)
