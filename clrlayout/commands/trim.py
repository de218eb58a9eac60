"""``clrlayout trim``: a smaller dump of the same format that keeps what the analyses read."""

from __future__ import annotations

import os

import click

from ..errors import UsageError
from ..limits import limits_from_env
from .common import emit, format_option, mt_option, profile_option, quiet_option


@click.command()
@click.argument("file", type=click.Path(dir_okay=False))
@click.argument("output", type=click.Path(dir_okay=False))
@click.option("--max-strings", type=click.IntRange(min=0), default=None,
              help="Keep only what the first N strings need (a small dump to share or to test with).")
@click.option("--types", is_flag=True,
              help="Also keep every object's bytes and what naming and laying out the heap's types reads "
                   "(stats, type and object then answer as on the original).")
@click.option("--redact", is_flag=True,
              help="Zero every byte that is not structure: string characters, arrays of primitives, primitive fields, "
                   "free space, the heap past its allocated ends, native memory, the images' code and literals; keep "
                   "headers, MethodTables, lengths, references and what naming reads (implies --types; thread stacks "
                   "left out). The copy is marked as redacted. A dump cut short is refused (exit 3).")
@click.option("--redact-keep", "redact_keep", multiple=True, metavar="TYPE",
              help="With --redact: keep the values of the objects of this type (its whole name; may be repeated).")
@click.option("--keep-stacks", is_flag=True,
              help="With --redact: keep the thread stacks whole, for the stack roots. They hold secrets too: locals, "
                   "arguments, copies, and the main thread's stack the process's environment block and command "
                   "line (argv).")
@format_option("table", "json")
@mt_option
@profile_option
@quiet_option
def trim(file, output, max_strings, types, redact, redact_keep, keep_stacks, fmt, mt, profile, quiet):
    """Write a smaller dump of the same format that keeps what the string analysis reads; with --redact, one
    that can be shared: every value zeroed, every structure kept."""
    from ..present.results import Result
    from ..trim import trim as do_trim

    if os.path.abspath(file) == os.path.abspath(output):
        raise click.UsageError("OUTPUT must not be the input file")
    if not redact:
        for flag, value in (("--redact-keep", redact_keep), ("--keep-stacks", keep_stacks)):
            if value:
                raise UsageError(f"{flag} is an option of --redact")
    elif max_strings is not None:
        raise UsageError("--max-strings keeps the first strings' memory; --redact keeps every object's structure")
    r = do_trim(file, output, mt, profile, limits=limits_from_env(), max_strings=max_strings, types=types,
                redact=redact, redact_keep=redact_keep, keep_stacks=keep_stacks)
    record = {"output": output, "output_bytes": r.output_bytes, "input_bytes": r.input_bytes,
              "kept_memory": r.kept_memory, "total_memory": r.total_memory, "ranges": r.ranges,
              "strings": r.strings_in_output, "missing_in_output": r.missing_in_output}
    if r.redacted is not None:
        record["redacted"] = r.redacted.as_dict()
    if r.redacted is not None and not quiet:
        _report(r.redacted)
    emit(Result(lambda: [] if quiet else _lines(r, output, max_strings), document=record), fmt)


def _lines(r, output: str, max_strings) -> list[str]:
    from ..present.text import counted

    held = counted(r.strings_in_output, "string")
    if max_strings is not None and r.strings_in_output != r.strings:
        held += f" (the first {r.strings:,} asked for; the pages kept hold the rest)"
    lines = [f"{output}: {r.output_bytes:,} bytes (from {r.input_bytes:,}); kept {r.kept_memory:,} of "
             f"{r.total_memory:,} bytes of memory in {counted(r.ranges, 'range')}; {held}"]
    if r.missing_in_output:
        lines.append(f"{output}: its heap runs on past the memory kept ({r.missing_in_output:,} places): info and "
                     "dump on it say so with memory-missing warnings")
    return lines


def _report(report) -> None:
    """What --redact zeroed, on stderr: the totals and the ten types with the most bytes zeroed."""
    rows = report.as_dict()["types"]
    click.echo(f"clrlayout: redacted {report.objects:,} objects ({report.bytes:,} bytes zeroed) in {len(rows):,} "
               f"types; {report.kept_objects:,} objects kept whole (--redact-keep); thread stacks {report.stacks}"
               f"{' (--keep-stacks)' if report.stacks == 'kept whole' else ''}",
               err=True)
    for row in rows[:10]:
        click.echo(f"  {row['objects']:>9,} objects {row['bytes']:>12,} bytes  {row['name']}", err=True)
    if len(rows) > 10:
        click.echo(f"  ... and {len(rows) - 10:,} more types (--format json lists them all)", err=True)
