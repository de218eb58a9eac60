"""``clrlayout native``: the native heap of a Linux core (glibc's malloc): arenas, chunks, what glibc itself would
report, and the blocks nothing reaches (``--leaks``)."""

from __future__ import annotations

import click

from ..errors import UsageError
from ..model.native import STATES
from .common import emit, quiet_option, warn


@click.command()
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--format", "fmt", type=click.Choice(["table", "json", "jsonl"]), default="table", show_default=True,
              help="jsonl: one chunk a line (with --chunks or --leaks).")
@click.option("--chunks", "with_chunks", is_flag=True, help="List every chunk: address, size, state, arena.")
@click.option("--state", "states", multiple=True, type=click.Choice(STATES),
              help="With --chunks: only chunks in this state (may be given more than once).")
@click.option("--by", "by", type=click.Choice(["owner"]),
              help="owner: native bytes per managed type that holds them (a .NET process's core).")
@click.option("--leaks", is_flag=True, help="List the in-use chunks nothing reaches (roots: modules' data, stacks "
                                            "from their stack pointer up, registers, other memory).")
@quiet_option
def native(file, fmt, with_chunks, states, by, leaks, quiet):
    """The native heap of a Linux core, as glibc's malloc holds it (found without symbols): every arena with its
    threads, heaps, chunks in use and free in the tcache, fastbins, bins and top; mmapped chunks; size classes;
    glibc's own mallinfo2() figures; and, with --leaks, the blocks nothing points to."""
    from ..limits import limits_from_env
    from ..model.native import open_native
    from ..present import native as present

    if with_chunks and leaks:
        raise UsageError("--chunks and --leaks are two lists: give one")
    if states and not with_chunks:
        raise UsageError("--state selects among --chunks: give --chunks")
    if by and (with_chunks or leaks):
        raise UsageError("--by owner is a summary: not with --chunks or --leaks")
    if fmt == "jsonl" and not (with_chunks or leaks):
        raise UsageError("--format jsonl is one chunk a line: give --chunks or --leaks")
    view = open_native(file, limits_from_env())
    summary = view.summary()
    if not quiet:
        for line in summary["missing"] + summary["warnings"]:
            warn(line)
        if summary["findings"]:
            warn(f"{len(summary['findings'])} findings in the malloc state (first: {summary['findings'][0]['kind']} "
                 f"at {summary['findings'][0]['address']}: {summary['findings'][0]['detail']})")
    if leaks and summary["missing"] and not quiet:
        warn("the leak search cannot read what the dump lacks: a block held only from memory it leaves out (libc's "
             "and other modules' data in a heap dump) is listed as leaked")
    if with_chunks or leaks:
        emit(present.chunks_result(view.leaks() if leaks else view.chunks(tuple(states)), leaks), fmt)
        return
    if by == "owner":
        if view.owners is None:
            raise UsageError("--by owner needs the dump of a .NET process whose GC heap can be walked")
        emit(present.owners_result(view.by_owner()), fmt)
        return
    emit(present.summary_result(summary), fmt)
