"""``clrlayout diff``: what grew between dumps of one application (the managed heap's UMDH), per type by name."""

from __future__ import annotations

import click

from ..errors import UsageError
from .common import _open, emit, index_given, index_options, quiet_option, roots_option, warn


@click.command()
@click.argument("files", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("--format", "fmt", type=click.Choice(["table", "json", "csv"]), default="table", show_default=True)
@click.option("--live", is_flag=True,
              help="Only the objects reachable from the roots (and each type's retained bytes).")
@click.option("--top", type=click.IntRange(min=1), default=None, help="Only the N types that grew most.")
@click.option("--sort", type=click.Choice(["bytes", "count", "retained"]), default="bytes", show_default=True,
              help="Growth of what first (retained: with --live).")
@click.option("--strings", is_flag=True, help="Also the duplicated string values whose count grew most.")
@click.option("--native", is_flag=True, help="Also glibc's native heap (Linux cores): in-use chunks by size class, "
                                             "and native bytes by the managed type that owns them.")
@roots_option
@index_options
@quiet_option
def diff(files, fmt, live, top, sort, strings, native, kinds, quiet):
    """Compare dumps of one application, oldest first (BEFORE AFTER, or a row of them): per type, matched by
    name, the count and bytes in each and the change, the largest growth first; types only in one are new or
    gone."""
    from ..model.diff import compare, native_compare, native_totals, totals_of
    from ..present.diff import result as result_of

    if native and fmt == "csv":
        raise UsageError("--native has two tables of its own: --format table or json")
    if len(files) < 2:
        raise UsageError("diff compares two dumps or more: BEFORE AFTER [...]")
    if sort == "retained" and not live:
        raise UsageError("--sort retained needs --live (retained sizes come from the object graph)")
    source = click.get_current_context().get_parameter_source("kinds")
    if not live and source is not click.core.ParameterSource.DEFAULT:
        raise UsageError("--roots chooses the roots of --live: give --live")
    if not live and index_given():
        raise UsageError("--index and --no-index are for the object graph of --live: give --live")
    sides, natives = [], []
    for path in files:
        with _open(path, None, None, "auto") as dump:
            if not quiet:
                for w in dump.warnings:
                    warn(f"{path}: {w}")
            sides.append(totals_of(dump, live, kinds, strings))
            if native:
                natives.append(native_totals(dump))
    result = compare(sides, sort)
    if not quiet:
        for w in result.warnings:
            warn(w)
    emit(result_of(result, top, native_compare(natives) if native else None), fmt)
