"""Which field (or array element) a reference slot is: the name ``refs`` and ``roots`` print for a link."""

from __future__ import annotations


def slot_name(offset: int, component_size: int, first_element: int, fields, element_fields) -> str:
    """The name of the slot at ``offset`` from an object's pointer: ``field`` or ``outer.inner`` (a field of an
    embedded struct) from the type's ``fields``; for an array (``component_size``), ``[i]`` or ``[i].field``
    (``element_fields``: a struct element's, offsets from its start); ``+0x..`` where the layout says nothing."""
    if component_size:
        if offset < first_element:
            return f"+{offset:#x}"
        index, within = divmod(offset - first_element, component_size)
        name = field_at(element_fields, within) if element_fields else None
        return f"[{index}]" + (f".{name}" if name else "")
    return field_at(fields or (), offset) or f"+{offset:#x}"


def field_at(fields, offset: int) -> str | None:
    for f in fields:
        if f.offset <= offset < f.offset + max(f.size, 1):
            if f.kind == "struct" and f.fields:
                inner = field_at(f.fields, offset - f.offset)
                return f"{f.name}.{inner}" if inner else f.name
            return f.name
    return None
