"""``clrlayout info``: what the dump holds (format, architecture, runtime, GC heap, String MethodTable, types)."""

from __future__ import annotations

import click

from .common import (
    _open,
    _preamble,
    _report,
    assemblies_option,
    flags_in,
    heap_option,
    mt_option,
    out,
    profile_option,
    quiet_option,
)


@click.command()
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True)
@mt_option
@profile_option
@heap_option
@assemblies_option
@quiet_option
def info(file, fmt, mt, profile, heap, assemblies, quiet):
    """What the dump holds: format, architecture, runtime, GC heap, String MethodTable, the heap's types."""
    from ..present import info as present

    with _open(file, mt, profile, heap, assemblies) as session:
        from ..model.threads import crash_of

        data = dict(session.info, crash=crash_of(session))  # JSON: the model's data as it is (options by their API
        # names); the table: as flags
        _preamble(session, quiet)
        if fmt == "json":
            from ..present.jsonout import dumps

            out(dumps(data))
        else:
            for line in present.info_lines(flags_in(data)):
                out(line)
        _report(session, quiet)
        if session.dump.truncated_bytes and not session.heap.exact:  # what it holds, then the error others give
            session.require_exact("the GC heap's figures")
