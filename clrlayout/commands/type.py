"""``clrlayout type``: the layout of a type without an instance (``!dumpmt`` + JOL's class layout)."""

from __future__ import annotations

import click

from ..errors import UnsupportedType
from .common import (
    ADDRESS,
    _open,
    _preamble,
    _redacted_values,
    _report,
    assemblies_option,
    emit,
    format_option,
    heap_option,
    out,
    profile_option,
    quiet_option,
)


@click.command("type")
@click.argument("file", type=click.Path(dir_okay=False))
@click.argument("name")
@format_option("table", "json")
@assemblies_option
@quiet_option
@heap_option
@profile_option
def type_(file, name, fmt, assemblies, quiet, heap, profile):
    """The layout of a type without an instance (!dumpmt + JOL's class layout): NAME as the DAC prints it
    (or as reflection does), or a MethodTable address."""
    from ..model.lookup import method_tables_for
    from ..model.typeview import has_statics, type_view
    from ..present import typelayout

    with _open(file, None, profile, heap, assemblies) as dump:
        if not dump.runtime.has_method_tables:
            raise UnsupportedType("type: Mono dumps have MonoVTables, whose classes are not read")
        try:
            address = ADDRESS.convert(name, None, None)
        except click.BadParameter:
            address = None
        mts = method_tables_for(dump, name, address)
        if any(has_statics(dump, mt) for mt in mts):
            _redacted_values(dump, quiet)  # a redacted dump's primitive statics are zeros
        _preamble(dump, quiet)
        for i, mt in enumerate(mts):
            if i:
                out()
            emit(typelayout.result(type_view(dump, mt)), fmt)
        _report(dump, quiet)
