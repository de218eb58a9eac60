"""``clrlayout clrstack``: each managed thread's call stack (SOS's ``!clrstack``)."""

from __future__ import annotations

import click

from .common import _open, _preamble, _report, assemblies_option, emit, format_option, quiet_option

#: a frame's row (JSON Lines and CSV): its thread, then the frame as the JSON has it
COLUMNS = ("os_id", "kind", "sp", "ip", "method_desc", "method", "frame", "frame_name", "offset")


def _thread_id(value: str) -> int:
    try:
        return int(value, 0)
    except ValueError:
        raise click.BadParameter(f"{value!r} is not a thread id (decimal, or hex with 0x)") from None


@click.command()
@click.argument("file", type=click.Path(dir_okay=False))
@click.argument("thread", nargs=-1)
@format_option("table", "json", "jsonl", "csv", help="jsonl and csv: a frame a line, with its thread's OS id.")
@assemblies_option
@quiet_option
def clrstack(file, thread, fmt, assemblies, quiet):
    """The managed call stack of each thread (!clrstack), or of the THREADs given (OS thread ids as `threads`
    prints them: 0x... or decimal): stack pointer, instruction pointer and method (as SOS names it) of every
    managed frame, and the runtime's explicit Frames (transitions to native code, exception dispatch).  Walked
    without the DAC, from the registers in the dump, in x64 Linux cores of .NET Core 3.1 and .NET 8 and later."""
    from ..present.results import Result

    wanted = [_thread_id(t) for t in thread]
    with _open(file, None, None, "auto", assemblies) as dump:
        _preamble(dump, quiet)
        runtime = dump.runtime
        threads = runtime.threads()
        if wanted:
            by_id = {t.os_id: t for t in threads}
            unknown = [w for w in wanted if w not in by_id]
            if unknown:
                raise click.UsageError(f"no managed thread has the OS id {', '.join(f'{u:#x}' for u in unknown)} "
                                       f"(the runtime's: {', '.join(f'{t.os_id:#x}' for t in threads)})")
            threads = [by_id[w] for w in dict.fromkeys(wanted)]
        stacks = runtime.stacks(threads)
        document = {"threads": [{"os_id": s.thread.os_id, "managed_id": s.thread.managed_id, "name": s.thread.name,
                                 "error": s.error or None, "frames": [_hexed(f.as_dict()) for f in s.frames]}
                                for s in stacks]}
        rows = [{"os_id": t["os_id"], **f} for t in document["threads"] for f in t["frames"]]
        emit(Result(lambda: _lines(stacks, dump.pointer_size), rows, COLUMNS, document=document), fmt)
        failed = [s for s in stacks if s.error]
        if failed:
            dump.add_warning(f"{failed[0].error}: the stack walk stopped early on {len(failed)} of "
                             f"{len(stacks)} threads (the first: {failed[0].thread.os_id:#x})")
        _report(dump, quiet)


def _lines(stacks, ptr: int) -> list[str]:
    from ..present.text import hexaddr

    lines = []
    for s in stacks:
        named = f' "{s.thread.name}"' if s.thread.name else ""
        lines.append(f"OS Thread Id: {s.thread.os_id:#x} ({s.thread.managed_id}){named}")
        lines.append(f"{'Child SP':>{2 * ptr}} {'IP':>{2 * ptr}} Call Site")
        lines += [f"{f.sp:0{2 * ptr}X} {f.ip:0{2 * ptr}X} {_site(f, ptr, hexaddr)}" for f in s.frames]
        if s.error:
            lines.append(f"(the walk stopped: {s.error})")
        lines.append("")
    return lines


def _site(f, ptr: int, hexaddr) -> str:
    method = f.method or (f"MethodDesc {f.method_desc:#x}" if f.method_desc else "")
    if f.kind == "frame":
        return f"[{f.frame_name or 'Frame'}: {hexaddr(f.frame, ptr)}] {method}".rstrip()
    return method


def _hexed(row: dict) -> dict:
    return {**row, **{k: f"{row[k]:#x}" for k in ("sp", "ip", "method_desc", "frame")}}
