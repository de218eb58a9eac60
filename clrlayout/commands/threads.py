"""``clrlayout threads``: the runtime's managed threads (SOS's ``!threads``)."""

from __future__ import annotations

import click

from .common import _open, _preamble, _report, assemblies_option, emit, format_option, quiet_option

#: the columns of a thread's row (JSON Lines and CSV; JSON has them all)
COLUMNS = ("managed_id", "os_id", "address", "state", "gc_mode", "lock_count", "special", "flags", "name",
           "exception", "frame", "thread_object")


@click.command()
@click.argument("file", type=click.Path(dir_okay=False))
@format_option("table", "json", "jsonl", "csv", help="jsonl and csv: a thread a line (the native threads are in "
                                                      "the table and the JSON).")
@assemblies_option
@quiet_option
def threads(file, fmt, assemblies, quiet):
    """The runtime's managed threads (!threads): OS and managed ids, name, GC mode, locks held (where the runtime
    counts them: before .NET 8), state (background, thread pool, finalizer...) and the exception each last threw.
    Read through the runtime's contract descriptor (.NET 9 and later), or at formats/thread-state.toml's offsets
    (.NET Core 3.1 and .NET 8 on Linux)."""
    from ..present.results import Result

    with _open(file, None, None, "auto", assemblies) as dump:
        _preamble(dump, quiet)
        found = dump.runtime.threads()
        managed = {t.os_id for t in found}
        native = [t.id for t in dump.threads if t.id not in managed]  # threads the runtime does not list
        emit(Result(lambda: _lines(found, native, dump.pointer_size), [_row(t) for t in found], COLUMNS, "threads",
                    {"native_threads": native}), fmt)
        _report(dump, quiet)


def _row(t) -> dict:
    row = t.as_dict()
    for key in ("address", "frame", "thread_object"):
        row[key] = f"{row[key]:#x}"
    if row["exception"]:  # a copy: the thread's own stays a number
        row["exception"] = {**row["exception"], "address": f"{row['exception']['address']:#x}"}
    return row


def _lines(found, native, ptr: int) -> list[str]:
    from ..present.text import hexaddr, table

    lines = [f"ThreadCount: {len(found)}   Background: {sum('Background' in t.flags for t in found)}   "
             f"Dead: {sum('Dead' in t.flags for t in found)}"]
    rows = [[t.managed_id, f"{t.os_id:#x}", hexaddr(t.address, ptr), f"{t.state:#x}",
             "Cooperative" if t.gc_mode == "cooperative" else "Preemptive",
             "-" if t.lock_count is None else t.lock_count,
             ",".join(x for x in (t.special, *_shown(t.flags)) if x) or "-", t.name or "",
             f"{t.exception['type']} {t.exception['address']:#x}" if t.exception else ""]
            for t in found]
    lines += table(["ID", "OSID", "ThreadOBJ", "State", "GC Mode", "Locks", "Kind", "Name", "Exception"], rows,
                   "rrlllrlll")
    if native:
        lines.append(f"Threads the runtime does not list (native only): {len(native)} "
                     f"({', '.join(f'{t:#x}' for t in native[:12])}{', ...' if len(native) > 12 else ''})")
    return lines


def _shown(flags) -> list[str]:
    """The bits a reader of !threads looks for (the rest are in the JSON)."""
    keep = ("Background", "Unstarted", "Dead", "TPWorkerThread", "CompletionPortThread", "InSTA", "InMTA")
    return [f for f in flags if f in keep]
