"""``clrlayout clrstack``: each managed thread's call stack (SOS's ``!clrstack``)."""

from __future__ import annotations

import click

from .common import _open, _preamble, _report, assemblies_option, out, quiet_option


def _thread_id(value: str) -> int:
    try:
        return int(value, 0)
    except ValueError:
        raise click.BadParameter(f"{value!r} is not a thread id (decimal, or hex with 0x)") from None


@click.command()
@click.argument("file", type=click.Path(dir_okay=False))
@click.argument("thread", nargs=-1)
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True)
@assemblies_option
@quiet_option
def clrstack(file, thread, fmt, assemblies, quiet):
    """The managed call stack of each thread (!clrstack), or of the THREADs given (OS thread ids as `threads`
    prints them: 0x... or decimal): stack pointer, instruction pointer and method (as SOS names it) of every
    managed frame, and the runtime's explicit Frames (transitions to native code, exception dispatch).  Walked
    without the DAC, from the registers in the dump, in x64 Linux cores of .NET Core 3.1 and .NET 8 and later."""
    from ..model.dump import Runtime
    from ..present.jsonout import dumps
    from ..present.text import hexaddr

    wanted = [_thread_id(t) for t in thread]
    with _open(file, None, None, "auto", assemblies) as session:
        _preamble(session, quiet)
        runtime = Runtime(session)
        threads = runtime.threads()
        if wanted:
            by_id = {t.os_id: t for t in threads}
            unknown = [w for w in wanted if w not in by_id]
            if unknown:
                raise click.UsageError(f"no managed thread has the OS id {', '.join(f'{u:#x}' for u in unknown)} "
                                       f"(the runtime's: {', '.join(f'{t.os_id:#x}' for t in threads)})")
            threads = [by_id[w] for w in dict.fromkeys(wanted)]
        stacks = runtime.stacks(threads)
        ptr = session.dump.pointer_size
        if fmt == "json":
            out(dumps({"threads": [{"os_id": s.thread.os_id, "managed_id": s.thread.managed_id,
                                    "name": s.thread.name, "error": s.error or None,
                                    "frames": [_hexed(f.as_dict()) for f in s.frames]} for s in stacks]}))
        else:
            for s in stacks:
                named = f' "{s.thread.name}"' if s.thread.name else ""
                out(f"OS Thread Id: {s.thread.os_id:#x} ({s.thread.managed_id}){named}")
                out(f"{'Child SP':>{2 * ptr}} {'IP':>{2 * ptr}} Call Site")
                for f in s.frames:
                    out(f"{f.sp:0{2 * ptr}X} {f.ip:0{2 * ptr}X} {_site(f, ptr, hexaddr)}")
                if s.error:
                    out(f"(the walk stopped: {s.error})")
                out("")
        failed = [s for s in stacks if s.error]
        if failed:
            session.warnings.append(f"{failed[0].error}: the stack walk stopped early on {len(failed)} of "
                                    f"{len(stacks)} threads (the first: {failed[0].thread.os_id:#x})")
        _report(session, quiet)


def _site(f, ptr: int, hexaddr) -> str:
    method = f.method or (f"MethodDesc {f.method_desc:#x}" if f.method_desc else "")
    if f.kind == "frame":
        return f"[{f.frame_name or 'Frame'}: {hexaddr(f.frame, ptr)}] {method}".rstrip()
    return method


def _hexed(row: dict) -> dict:
    return {**row, **{k: f"{row[k]:#x}" for k in ("sp", "ip", "method_desc", "frame")}}
