"""``clrlayout object``: the object that holds an address, the field it falls in, and its layout."""

from __future__ import annotations

import click

from ..errors import UnsupportedType
from .common import (
    ADDRESS,
    _open,
    _preamble,
    _report,
    assemblies_option,
    emit,
    format_option,
    heap_option,
    profile_option,
    quiet_option,
)


@click.command("object")
@click.argument("file", type=click.Path(dir_okay=False))
@click.argument("address", type=ADDRESS)
@format_option("table", "jsonl")
@click.option("--full", is_flag=True, help="Whole values and the whole hex dump.")
@assemblies_option
@quiet_option
@heap_option
@profile_option
def object_(file, address, fmt, full, assemblies, quiet, heap, profile):
    """The object that holds ADDRESS (any address inside it, header included): its type, where it starts,
    the field ADDRESS falls in, and its layout (like dump --layout)."""
    from ..model.layouts import field_at, object_layout, runtime_label, type_problems
    from ..model.lookup import object_holding
    from ..present.jsonout import layout_record, object_record
    from ..present.listing import layout_result
    from ..present.results import Result

    with _open(file, None, profile, heap, assemblies) as dump:
        if not dump.runtime.has_method_tables:
            raise UnsupportedType("object: Mono objects are not walked (no exact heap walk)")
        obj = object_holding(dump, address, f"object {address:#x}")
        _preamble(dump, quiet)
        offset = address - obj.address
        heap_name = obj.segment.generation(obj.address)
        lay = None if obj.is_free else object_layout(dump, obj, full)
        where = "free space between objects" if lay is None else field_at(lay, offset)
        record = {"address": f"{address:#x}", "offset": offset, "in": where,
                  "object": object_record(obj, heap_name) | {"type": obj.type_name or (
                      "Free" if obj.is_free else None)}}
        if lay is not None:
            record["layout"] = layout_record(lay)

        def text() -> list[str]:
            name = "Free" if obj.is_free else obj.type_name or f"<unknown type, MT {obj.method_table:#x}>"
            sign = "+" if offset >= 0 else "-"
            lines = [f"{address:#x} is at {sign}{abs(offset):#x} in {name} at {obj.address:#x} "
                     f"(MethodTable {obj.method_table:#x}, size {obj.size}, {heap_name}): {where}"]
            if lay is not None:
                title = f"{name} at {obj.address:#x} (MethodTable {obj.method_table:#x}, {runtime_label(dump)}, " \
                        f"{heap_name}):"
                lines += ["", *layout_result({}, lay, title, type_problems(dump, obj.method_table), full).text()]
            return lines

        emit(Result(text, [record]), fmt)
        _report(dump, quiet)
