"""``clrlayout trim``: a smaller dump of the same format that keeps what the analyses read."""

from __future__ import annotations

import os

import click

from ..limits import limits_from_env
from .common import out, mt_option, profile_option, quiet_option


@click.command()
@click.argument("file", type=click.Path(dir_okay=False))
@click.argument("output", type=click.Path(dir_okay=False))
@click.option("--max-strings", type=click.IntRange(min=0), default=None,
              help="Keep only what the first N strings need (a small dump to share or to test with).")
@click.option("--types", is_flag=True,
              help="Also keep every object's bytes and what naming and laying out the heap's types reads "
                   "(stats, type and object then answer as on the original).")
@mt_option
@profile_option
@quiet_option
def trim(file, output, max_strings, types, mt, profile, quiet):
    """Write a smaller dump of the same format that keeps what the string analysis reads."""
    from ..trim import trim as do_trim

    if os.path.abspath(file) == os.path.abspath(output):
        raise click.UsageError("OUTPUT must not be the input file")
    r = do_trim(file, output, mt, profile, limits=limits_from_env(), max_strings=max_strings, types=types)
    if not quiet:
        from ..present.text import counted

        held = counted(r.strings_in_output, "string")
        if max_strings is not None and r.strings_in_output != r.strings:
            held += f" (the first {r.strings:,} asked for; the pages kept hold the rest)"
        out(f"{output}: {r.output_bytes:,} bytes (from {r.input_bytes:,}); kept {r.kept_memory:,} of "
            f"{r.total_memory:,} bytes of memory in {counted(r.ranges, 'range')}; {held}")
        if r.missing_in_output:
            out(f"{output}: its heap runs on past the memory kept ({r.missing_in_output:,} places): info and dump "
                "on it say so with memory-missing warnings")
