"""``clrlayout memory``: where the memory went (``!address -summary`` + ``!eeheap -gc``)."""

from __future__ import annotations

import click

from .common import (
    _open,
    _preamble,
    _progress,
    _report,
    emit,
    format_option,
    heap_option,
    jobs_option,
    profile_option,
    quiet_option,
)


@click.command()
@click.argument("file", type=click.Path(dir_okay=False))
@format_option("table", "json")
@click.option("--ranges", "with_ranges", is_flag=True, help="Also list every range: start, size, kind, owner.")
@jobs_option
@quiet_option
@heap_option
@profile_option
def memory(file, fmt, with_ranges, jobs, quiet, heap, profile):
    """Where the memory went (!address -summary + !eeheap -gc): every byte of the dump by kind (GC heap,
    stacks, images, the runtime's loader heaps, mapped files, native), the address space by state, type and
    protection (minidumps), and the GC heap's object and free bytes per heap and generation."""
    from ..present import memory as present

    with _open(file, None, profile, heap) as dump:
        _preamble(dump, quiet)
        with _progress(dump, fmt) as progress:
            mm = dump.memory_map(jobs, progress.advance, progress.found)
        emit(present.result(mm, with_ranges, dump.pointer_size), fmt)
        _report(dump, quiet)
