"""``clrlayout pe``: an exception object as SOS's ``!pe`` prints it."""

from __future__ import annotations

import click

from .common import ADDRESS, _open, _preamble, _report, assemblies_option, emit, format_option, quiet_option


@click.command()
@click.argument("file", type=click.Path(dir_okay=False))
@click.argument("address", type=ADDRESS, required=False)
@format_option("table", "json")
@assemblies_option
@quiet_option
def pe(file, address, fmt, assemblies, quiet):
    """An exception object (!pe): type, message, HResult, inner exceptions and the stack trace recorded as it was
    thrown (frames' methods named on .NET 9 and later).  Without ADDRESS: the exception each thread has in
    flight (.NET 9+)."""
    from ..present.results import Result

    with _open(file, None, None, "auto", assemblies) as dump:
        _preamble(dump, quiet)
        runtime = dump.runtime
        if address is not None:
            found = [runtime.exception_at(address)]
        else:
            found = [runtime.exception_at(t.exception["address"]) for t in runtime.threads() if t.exception]
        emit(Result(lambda: _text(found, dump.pointer_size), document={"exceptions": [_hexed(e) for e in found]}), fmt)
        _report(dump, quiet)


def _text(found: list, ptr: int) -> list[str]:
    from ..present.text import hexaddr

    lines = [] if found else ["No thread has an exception in flight."]
    for e in found:
        level = e
        while level is not None:
            lines += _lines(level, hexaddr, ptr)
            level = level["inner"]
    return lines


def _lines(e: dict, hexaddr, ptr: int) -> list[str]:
    lines = [f"Exception object: {hexaddr(e['address'], ptr)}", f"Exception type:   {e['type']}",
             f"Message:          {e['message'] if e['message'] is not None else '<none>'}",
             "InnerException:   " + (f"{e['inner']['type']}, Use pe {e['inner']['address']:#x}" if e["inner"]
                                      else "<none>")]
    if e["frames"]:
        lines += ["StackTrace (generated):", f"    {'SP':<18}{'IP':<18}Function"]
        lines += [f"    {hexaddr(f['sp'], ptr):<18}{hexaddr(f['ip'], ptr):<18}"
                  f"{f['method'] or 'MethodDesc ' + hex(f['method_desc'])}" for f in e["frames"]]
    else:
        lines.append("StackTrace (generated): <none>")
    hr = e["hresult"]
    lines.append(f"HResult: {hr & 0xFFFFFFFF:x}" if isinstance(hr, int) else "HResult: ?")
    return lines + [""]


def _hexed(e: dict | None):
    if e is None:
        return None
    return {**e, "address": f"{e['address']:#x}", "inner_address": f"{e['inner_address']:#x}",
            "hresult": e["hresult"] & 0xFFFFFFFF if isinstance(e["hresult"], int) else None,
            "frames": [{**f, "ip": f"{f['ip']:#x}", "sp": f"{f['sp']:#x}", "method_desc": f"{f['method_desc']:#x}"}
                       for f in e["frames"]], "inner": _hexed(e["inner"])}
