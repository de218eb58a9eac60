"""``clrlayout info``: what the dump holds (format, architecture, runtime, GC heap, String MethodTable, types)."""

from __future__ import annotations

import click

from .common import (
    _open,
    _report,
    assemblies_option,
    emit,
    flags_in,
    format_option,
    heap_option,
    mt_option,
    profile_option,
    quiet_option,
    warn,
)


@click.command()
@click.argument("file", type=click.Path(dir_okay=False))
@format_option("table", "json")
@mt_option
@profile_option
@heap_option
@assemblies_option
@quiet_option
def info(file, fmt, mt, profile, heap, assemblies, quiet):
    """What the dump holds: format, architecture, runtime, GC heap, String MethodTable, the heap's types."""
    from ..present import info as present
    from ..present.results import Result

    with _open(file, mt, profile, heap, assemblies) as dump:
        found = dump.describe()
        data = present.info_record(found.to_dict())  # JSON: options by their API names; the table: as flags
        dump.unshown_warnings()  # the info's warnings hold the dump's so far: said once, before the answer
        for w in [] if quiet else found.warnings:
            warn(w)
        emit(Result(lambda: present.info_lines(flags_in(data)), document=data), fmt)
        _report(dump, quiet)
        if dump.truncated_bytes and not dump.runtime.heap.exact:  # what it holds, then the error others give
            dump.require_exact("the GC heap's figures")
