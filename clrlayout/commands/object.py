"""``clrlayout object``: the object that holds an address, the field it falls in, and its layout."""

from __future__ import annotations

import click

from ..errors import TypeNotFound, UnsupportedType
from .common import (
    ADDRESS,
    _object_layout,
    _open,
    _preamble,
    _print_object_layout,
    _report,
    assemblies_option,
    heap_option,
    out,
    profile_option,
    quiet_option,
)


@click.command("object")
@click.argument("file", type=click.Path(dir_okay=False))
@click.argument("address", type=ADDRESS)
@click.option("--format", "fmt", type=click.Choice(["table", "jsonl"]), default="table", show_default=True)
@click.option("--full", is_flag=True, help="Whole values and the whole hex dump.")
@assemblies_option
@quiet_option
@heap_option
@profile_option
def object_(file, address, fmt, full, assemblies, quiet, heap, profile):
    """The object that holds ADDRESS (any address inside it, header included): its type, where it starts,
    the field ADDRESS falls in, and its layout (like dump --layout)."""
    from ..present import jsonout

    with _open(file, None, profile, heap, assemblies) as session:
        if session.profile.method_table is None:
            raise UnsupportedType("object: Mono objects are not walked (no exact heap walk)")
        obj = session.object_at(address)
        if obj is None:
            raise TypeNotFound(f"object {address:#x}: no object of the GC heap holds this address"
                               + ("" if session.heap.segment_at(address) else " (it is outside every heap segment)"))
        _preamble(session, quiet)
        offset = address - obj.address
        heap_name = obj.segment.generation(obj.address)
        if obj.is_free:
            where = "free space between objects"
            lay = None
        else:
            lay = _object_layout(session, obj, full)
            held = [r for r in lay.rows if r.offset <= offset < r.end]  # a struct, then its field
            where = "".join(r.description.strip() for r in held) if held else "past its fields"
        if fmt == "jsonl":
            from ..present.jsonout import layout_record

            record = {"address": f"{address:#x}", "offset": offset, "in": where,
                      "object": jsonout.object_record(obj, heap_name) | {"type": obj.type_name or (
                          "Free" if obj.is_free else None)}}
            if lay is not None:
                record["layout"] = layout_record(lay)
            out(jsonout.dumps(record))
        else:
            name = "Free" if obj.is_free else obj.type_name or f"<unknown type, MT {obj.method_table:#x}>"
            sign = "+" if offset >= 0 else "-"
            out(f"{address:#x} is at {sign}{abs(offset):#x} in {name} at {obj.address:#x} "
                f"(MethodTable {obj.method_table:#x}, size {obj.size}, {heap_name}): {where}")
            if lay is not None:
                out()
                _print_object_layout(session, obj, heap_name, "table", full, lay)
        _report(session, quiet)
