"""``clrlayout memory``: where the memory went (``!address -summary`` + ``!eeheap -gc``)."""

from __future__ import annotations

import click

from .common import _open, _preamble, _progress, _report, heap_option, jobs_option, out, profile_option, quiet_option


@click.command()
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True)
@click.option("--ranges", "with_ranges", is_flag=True, help="Also list every range: start, size, kind, owner.")
@jobs_option
@quiet_option
@heap_option
@profile_option
def memory(file, fmt, with_ranges, jobs, quiet, heap, profile):
    """Where the memory went (!address -summary + !eeheap -gc): every byte of the dump by kind (GC heap,
    stacks, images, the runtime's loader heaps, mapped files, native), the address space by state, type and
    protection (minidumps), and the GC heap's object and free bytes per heap and generation."""
    from ..model.summaries import memory_map
    from ..present import memory as present

    with _open(file, None, profile, heap) as session:
        _preamble(session, quiet)
        with _progress(session, enabled=fmt == "table") as progress:
            mm = memory_map(session, jobs, progress.advance, progress.found)
        for line in present.render(mm, fmt, with_ranges, session.profile.pointer_size):
            out(line)
        _report(session, quiet)
