"""``clrlayout threads``: the runtime's managed threads (SOS's ``!threads``)."""

from __future__ import annotations

import click

from .common import _open, _preamble, _report, assemblies_option, out, quiet_option


@click.command()
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True)
@assemblies_option
@quiet_option
def threads(file, fmt, assemblies, quiet):
    """The runtime's managed threads (!threads): OS and managed ids, name, GC mode, locks held (where the runtime
    counts them: before .NET 8), state (background, thread pool, finalizer...) and the exception each last threw.
    Read through the runtime's contract descriptor (.NET 9 and later), or at formats/thread-state.toml's offsets
    (.NET Core 3.1 and .NET 8 on Linux)."""
    from ..model.dump import Runtime
    from ..present.jsonout import dumps
    from ..present.text import hexaddr, table

    with _open(file, None, None, "auto", assemblies) as session:
        _preamble(session, quiet)
        found = Runtime(session).threads()
        ptr = session.dump.pointer_size
        managed = {t.os_id for t in found}
        native = [t.id for t in session.dump.threads if t.id not in managed]  # threads the runtime does not list
        if fmt == "json":
            rows = []
            for t in found:
                row = t.as_dict()
                for key in ("address", "frame", "thread_object"):
                    row[key] = f"{row[key]:#x}"
                if row["exception"]:
                    row["exception"]["address"] = f"{row['exception']['address']:#x}"
                rows.append(row)
            out(dumps({"threads": rows, "native_threads": native}))
        else:
            out(f"ThreadCount: {len(found)}   Background: {sum('Background' in t.flags for t in found)}   "
                f"Dead: {sum('Dead' in t.flags for t in found)}")
            rows = [[t.managed_id, f"{t.os_id:#x}", hexaddr(t.address, ptr), f"{t.state:#x}",
                     "Cooperative" if t.gc_mode == "cooperative" else "Preemptive",
                     "-" if t.lock_count is None else t.lock_count,
                     ",".join(x for x in (t.special, *_shown(t.flags)) if x) or "-", t.name or "",
                     f"{t.exception['type']} {t.exception['address']:#x}" if t.exception else ""]
                    for t in found]
            for line in table(["ID", "OSID", "ThreadOBJ", "State", "GC Mode", "Locks", "Kind", "Name", "Exception"],
                              rows, "rrlllrlll"):
                out(line)
            if native:
                out(f"Threads the runtime does not list (native only): {len(native)} "
                    f"({', '.join(f'{t:#x}' for t in native[:12])}{', ...' if len(native) > 12 else ''})")
        _report(session, quiet)


def _shown(flags) -> list[str]:
    """The bits a reader of !threads looks for (the rest are in the JSON)."""
    keep = ("Background", "Unstarted", "Dead", "TPWorkerThread", "CompletionPortThread", "InSTA", "InMTA")
    return [f for f in flags if f in keep]
