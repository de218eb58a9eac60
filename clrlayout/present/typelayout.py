"""``clrlayout type``: the layout of a type without an instance (SOS ``!dumpmt`` + JOL's class layout)."""

from __future__ import annotations

from ..objects.instances import instance_layout
from ..types.layouts import FieldLayout, TypeLayout
from .text import layout_table, table


def field_record(f: FieldLayout) -> dict:
    record = {"name": f.name, "offset": f.offset, "size": f.size, "type": f.type,
              "declaring_type": f.declaring_type, "token": f"{f.token:#010x}", "kind": f.kind}
    if f.kind == "struct":
        record["method_table"] = None if f.field_method_table is None else f"{f.field_method_table:#x}"
        record["size_known"] = f.size_known
        record["fields"] = [field_record(x) for x in f.fields]
    return record


#: how the table says where a static lives that has no one value
STORAGE_TEXT = {"thread": "(thread-local: one value per thread)", "rva": "(data in the image: RVA static)"}


def static_rows(session, statics) -> list[dict]:
    """Each static field with its value, as SOS's ``!dumpclass`` lists them: a reference (a boxed struct's too) with
    its object's type and a string's start, a primitive's value; where it is."""
    from ..objects.instances import show_value

    ptr = session.profile.pointer_size
    out = []
    for v in statics:
        f = v.field
        per_thread = [{"thread": tid, "address": f"{slot:#x}",
                       "value": show_value("reference", data, ptr, session.referent) if data is not None else None}
                      for tid, slot, data in v.per_thread]
        if v.data is None:
            value = STORAGE_TEXT.get(f.storage, "(not in the dump)")
            if per_thread:  # a GC thread static: its value on each thread
                value = "; ".join(f"{'thread ' + str(p['thread']) if p['thread'] is not None else 'a thread'}: "
                                  f"{p['value']}" for p in per_thread)
        else:
            show = "reference" if f.storage == "gc" else f.show
            value = show_value(show, v.data, ptr, session.referent)
        row = {"name": f.name, "type": f.type, "token": f"{f.token:#010x}", "storage": f.storage,
               "offset": f.offset, "address": None if v.address is None else f"{v.address:#x}", "value": value}
        if f.storage == "thread":
            row["per_thread"] = per_thread
        out.append(row)
    return out


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


def render(session, lay: TypeLayout, fmt: str, statics=None) -> list[str]:
    """``statics``: the :class:`~clrlayout.graph.statics.StaticValue` of each static field (None: no values)."""
    from .jsonout import dumps

    p = session.profile
    parent_names = [session.type_name(m) or f"<unknown type, MT {m:#x}>" for m in lay.parents]
    if lay.method_table == session.mts.string_mt:  # a string's own rows (length, terminator), as `layout` shows
        from ..objects.layout import string_layout

        obj = string_layout(p, 0)
    else:
        obj = instance_layout(p, lay)
    rows = static_rows(session, statics) if statics is not None else None
    if fmt == "json":
        return [dumps(type_record(lay, parent_names, obj.losses(), rows))]
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
        ptr = p.pointer_size
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
