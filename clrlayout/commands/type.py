"""``clrlayout type``: the layout of a type without an instance (``!dumpmt`` + JOL's class layout)."""

from __future__ import annotations

import click

from ..errors import TypeNotFound, UnsupportedType
from .common import (
    ADDRESS,
    _open,
    _preamble,
    _redacted_values,
    _report,
    assemblies_option,
    heap_option,
    out,
    profile_option,
    quiet_option,
)


@click.command("type")
@click.argument("file", type=click.Path(dir_okay=False))
@click.argument("name")
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True)
@assemblies_option
@quiet_option
@heap_option
@profile_option
def type_(file, name, fmt, assemblies, quiet, heap, profile):
    """The layout of a type without an instance (!dumpmt + JOL's class layout): NAME as the DAC prints it
    (or as reflection does), or a MethodTable address."""
    from ..present import typelayout

    with _open(file, None, profile, heap, assemblies) as session:
        if session.profile.method_table is None:
            raise UnsupportedType("type: Mono dumps have MonoVTables, whose classes are not read")
        try:
            address = ADDRESS.convert(name, None, None)
        except click.BadParameter:
            address = None
        if address is not None and session.mts.get(address) is not None:
            mts = [address]
        else:
            mts = session.method_tables_named(name) if session.heap.exact else []
            if not mts and session.heap.exact:  # a type without instances (a static class): its modules' TypeDefs
                mts = [m for m in session.statics().all_types() if session.is_named(m, name, True)]
            if not mts and address is not None and (name.lower().startswith("0x") or any(c.isdigit() for c in name)):
                held = session.dump.memory.try_read(address, 1) is not None
                raise TypeNotFound(f"type {name}: no MethodTable in the dump at {address:#x}"
                                   + ("" if held else " (the dump holds no memory there)"))
            if not mts:
                similar = session.type_names_containing(name) if session.heap.exact else []
                raise TypeNotFound(f"type {name}: no type of that name among the heap's types and its modules' types"
                                   + (f" (names that contain it: {'; '.join(similar)})" if similar else "")
                                   + ("" if session.heap.exact
                                      else " (no exact heap walk: give a MethodTable address)"))
        if any(session.type_layout(mt) is not None and session.type_layout(mt).statics for mt in mts):
            _redacted_values(session, quiet)  # a redacted dump's primitive statics are zeros
        _preamble(session, quiet)
        for i, mt in enumerate(mts):
            if i:
                out()
            statics = session.statics().values(mt) if session.heap.exact else None
            for line in typelayout.render(session, session.type_layout(mt), fmt, statics):
                out(line)
        _report(session, quiet)
