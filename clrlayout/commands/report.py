"""``clrlayout report``: what is leaking, as a page a person reads (Eclipse MAT's Leak Suspects)."""

from __future__ import annotations

import os

import click

from ..errors import OutputError, UsageError
from .common import _open, _preamble, _report, emit, index_options, out, quiet_option, roots_option


@click.command()
@click.argument("file", type=click.Path(dir_okay=False))
@click.argument("earlier", nargs=-1, type=click.Path(dir_okay=False))
@click.option("-o", "--output", type=click.Path(dir_okay=False), default=None,
              help="Write the HTML report here (one self-contained file).")
@click.option("--format", "fmt", type=click.Choice(["html", "json"]), default="html", show_default=True)
@click.option("--threshold", type=click.FloatRange(0.001, 100.0), default=10.0, show_default=True,
              help="A suspect retains at least this percentage of the live heap.")
@roots_option
@index_options
@quiet_option
def report(file, earlier, output, fmt, threshold, kinds, quiet):
    """Leak suspects (MAT's, on the dominator tree): the objects and types retaining the most of the live heap,
    each with its accumulation point, a root chain and the types under it; with EARLIER dumps of the same
    process (oldest first), the types that grew; inspections; the dominator tree as a treemap."""
    from contextlib import ExitStack

    from ..model.report import build
    from ..present import report as present

    if fmt == "html" and output is None:
        raise UsageError("the HTML report is a file: give -o/--output (or --format json)")
    if fmt == "json" and output is not None:
        raise UsageError("--format json is printed: -o/--output is for the HTML report")
    with ExitStack() as stack:
        dump = stack.enter_context(_open(file, None, None, "auto"))
        _preamble(dump, quiet)
        others = [stack.enter_context(_open(path, None, None, "auto")) for path in earlier]
        result = build(dump, others, threshold / 100.0, kinds)
        if output is None:  # --format json (an HTML report is a file)
            emit(present.json_result(result), fmt)
        else:
            text = present.as_html(result, os.path.basename(file))
            partial = output + ".partial"
            try:
                with open(partial, "w", encoding="utf-8") as f:
                    f.write(text)
                os.replace(partial, output)
            except OSError as e:
                raise OutputError(f"{output}: cannot write the report: {e.strerror or e}") from None
            out(f"{output}: {len(result['suspects'])} suspects, {len(result['growth'])} growing types "
                f"({len(text):,} bytes)")
        _report(dump, quiet)
