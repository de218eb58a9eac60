"""``clrlayout type``: the layout of a type without an instance (SOS ``!dumpmt`` + JOL's class layout)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .text import layout_table, table

if TYPE_CHECKING:
    from ..model.typeview import TypeView
    from ..types.layouts import FieldLayout, TypeLayout
    from .results import Result


def field_record(f: FieldLayout) -> dict:
    record = {"name": f.name, "offset": f.offset, "size": f.size, "type": f.type,
              "declaring_type": f.declaring_type, "token": f"{f.token:#010x}", "kind": f.kind}
    if f.kind == "struct":
        record["method_table"] = None if f.field_method_table is None else f"{f.field_method_table:#x}"
        record["size_known"] = f.size_known
        record["fields"] = [field_record(x) for x in f.fields]
    return record


def type_record(lay: TypeLayout, parent_names: list, losses: tuple[int, int], statics=None) -> dict:
    """The JSON of ``type`` (its fields: docs/guide/types.md)."""
    return {
        "method_table": f"{lay.method_table:#x}",
        "name": lay.name,
        "base_size": lay.base_size,
        "component_size": lay.component_size,
        "parent": parent_names[0] if parent_names else None,
        "parents": parent_names,
        "value_type": lay.value_type,
        "unboxed_size": lay.unboxed_size,
        "fields": [field_record(f) for f in lay.fields],
        "static_fields": statics if statics is not None else
        [{"name": f.name, "type": f.type, "token": f"{f.token:#010x}", "storage": f.storage} for f in lay.statics],
        "space_losses": {"internal": losses[0], "external": losses[1]},
        "problems": list(lay.problems),
    }


def result(view: TypeView) -> Result:
    """``type``'s answer: its JSON record (docs/guide/types.md) and its table."""
    from .results import Result

    return Result(lambda: _lines(view), document=type_record(view.layout, view.parent_names, view.object_rows.losses(),
                                                             view.statics))


def _lines(view: TypeView) -> list[str]:
    lay, parent_names, obj, rows = view.layout, view.parent_names, view.object_rows, view.statics
    name = lay.name or f"<unknown type, MT {lay.method_table:#x}>"
    lines = [
        f"Name:          {name}",
        f"MethodTable:   {lay.method_table:#x}",
        f"BaseSize:      {lay.base_size} ({lay.base_size:#x})",
        f"ComponentSize: {lay.component_size}",
        f"Parents:       {' -> '.join(parent_names) if parent_names else '(none)'}",
    ]
    if lay.value_type:
        lines.append(f"Value type:    yes, {lay.unboxed_size if lay.unboxed_size is not None else '?'} bytes unboxed")
    lines.append("")
    title = "Boxed layout (offsets from the object pointer):" if lay.value_type else \
        "Layout (offsets from the object pointer):"
    lines += layout_table(obj, title)
    if lay.value_type and lay.fields:
        ptr = view.pointer_size
        lines += ["", "Unboxed layout (offsets from the start of the value, as in an array or a field):"]
        rows = [[f.offset - ptr, f.size, f.type, f.name] for f in lay.fields]
        lines += table(["OFF", "SZ", "TYPE", "DESCRIPTION"], rows, "rrll", indent="  ")
    if lay.statics and rows is not None:
        lines += ["", "Static fields (not in the object; as SOS's !dumpclass):"]
        lines += table(["ADDRESS", "TYPE", "NAME", "VALUE"],
                       [[r["address"] or "", r["type"], r["name"],
                         r["value"] or ""] for r in rows], "llll", indent="  ")
    elif lay.statics:
        lines += ["", "Static fields (not in the object):"]
        lines += table(["TYPE", "NAME"], [[f.type, f.name] for f in lay.statics], "ll", indent="  ")
    for problem in lay.problems:
        lines.append(f"(incomplete: {problem})")
    return lines
