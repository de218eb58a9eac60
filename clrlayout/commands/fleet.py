"""``clrlayout fleet``: a directory of dumps into a dataset — the Parquet tables ``dumps``, ``types`` and
``memory`` — each dump analysed in its own process, on this machine or on a Dask cluster."""

from __future__ import annotations

import click

from ..errors import NotExact, UsageError
from .common import out, roots_option


@click.command()
@click.argument("dumps", nargs=-1, required=True)
@click.option("--out", "out_dir", default="fleet", show_default=True, type=click.Path(file_okay=False),
              help="The directory of the tables (made if needed): OUT/dumps, OUT/types, OUT/memory, each a Parquet "
                   "table of one file per dump.")
@click.option("--scheduler", default=None, metavar="ADDRESS",
              help="Run on this Dask cluster (tcp://HOST:8786; needs pip install 'clrlayout[fleet]', clrlayout on "
                   "the workers and the dumps at the same paths there). Default: processes on this machine.")
@click.option("--workers", type=click.IntRange(min=1, max=256), default=None,
              help="Dumps analysed at a time on this machine (default: one per core available).")
@click.option("--timeout", type=click.FloatRange(min=0.1), default=600.0, show_default=True,
              help="Seconds one dump may take; a dump that takes longer is an error row.")
@click.option("--memory-limit", "memory_mb", type=click.IntRange(min=64), default=None, metavar="MB",
              help="MiB of memory one dump's analysis may take (its data, not the dump's file pages); over it, an "
                   "error row (default: the machine's memory / its cores).")
@click.option("--no-retained", is_flag=True, help="Do not build the object graph (no retained bytes by type).")
@click.option("--force", is_flag=True, help="Analyse every dump again, also those an earlier run with this --out "
                                            "did (by default they are skipped: the run resumes).")
@click.option("--strict", is_flag=True, help="Exit 1 when a dump could not be analysed (an error row).")
@roots_option
def fleet(dumps, out_dir, scheduler, workers, timeout, memory_mb, no_retained, force, strict, kinds):
    """Analyse many dumps (files, directories walked recursively, globs) into Parquet tables: dumps (one row per
    input, errors included), types (stats by type, with retained bytes) and memory (bytes by kind)."""
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        raise UsageError("fleet writes Parquet tables with pyarrow, which is not installed: pip install "
                         "'clrlayout[fleet]'") from None
    from .. import fleet as engine
    from ..present.fleet import FleetProgress, summary_lines

    if scheduler is not None and workers is not None:
        raise UsageError("--workers is the size of the local pool; with --scheduler the Dask cluster's workers "
                         "do the work")
    source = click.get_current_context().get_parameter_source("kinds")
    if no_retained and source is not None and source is not click.core.ParameterSource.DEFAULT:
        raise UsageError("--roots chooses the roots of the retained sizes: not with --no-retained")
    limits = engine.WorkerLimits(timeout=timeout, memory=memory_mb << 20 if memory_mb else None, roots=tuple(kinds),
                           retained=not no_retained)
    with FleetProgress() as progress:
        summary = engine.run(dumps, out_dir, scheduler=scheduler, workers=workers, limits=limits, force=force,
                             on_start=progress.start, on_done=progress.done)
    for line in summary_lines(summary, out_dir):
        out(line)
    if strict and summary.errors:
        raise NotExact(f"{summary.errors:,} of {summary.inputs:,} inputs could not be analysed (--strict)")
