"""What ``type`` shows of a type without an instance (SOS's ``!dumpmt`` + ``!dumpclass``, JOL's class layout):
its layout, its parents' names, its rows as an object of it would have them, and its static fields with their
values where the dump holds them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..types.layouts import TypeLayout
    from .dump import Dump

#: how a static is shown that has no one value
STORAGE_TEXT = {"thread": "(thread-local: one value per thread)", "rva": "(data in the image: RVA static)"}


@dataclass(frozen=True)
class TypeView:
    layout: TypeLayout
    parent_names: list[str]
    object_rows: Any  #: the rows an object of the type has (a string's: length and terminator)
    #: each static field with its value (as :func:`static_rows` gives them); None where values are not read
    statics: list[dict[str, Any]] | None
    pointer_size: int


def type_view(dump: Dump, method_table: int, with_statics: bool = True) -> TypeView:
    """The view of the type at ``method_table`` (a MethodTable the dump holds).

    Args:
        with_statics: read the static fields' values (only with the exact heap walk, which finds where they are).
    """
    from ..objects.instances import instance_layout
    from ..objects.layout import string_layout

    session = dump._session
    lay = session.type_layout(method_table)
    p = session.profile
    parents = [session.type_name(m) or f"<unknown type, MT {m:#x}>" for m in lay.parents]
    rows = string_layout(p, 0) if lay.method_table == session.mts.string_mt else instance_layout(p, lay)
    statics = None
    if with_statics and session.heap.exact:
        statics = static_rows(dump, session.statics().values(method_table))
    return TypeView(lay, parents, rows, statics, p.pointer_size)


def has_statics(dump: Dump, method_table: int) -> bool:
    lay = dump._session.type_layout(method_table)
    return lay is not None and bool(lay.statics)


def static_rows(dump: Dump, statics: Any) -> list[dict[str, Any]]:
    """Each static field with its value, as SOS's ``!dumpclass`` lists them: a reference (a boxed struct's too) with
    its object's type and a string's start, a primitive's value; where it is.

    Args:
        statics: the :class:`~clrlayout.graph.statics.StaticValue` of each static field.
    """
    from ..objects.instances import show_value

    session = dump._session
    ptr = session.profile.pointer_size
    out = []
    for v in statics:
        f = v.field
        per_thread = [{"thread": tid, "address": f"{slot:#x}",
                       "value": show_value("reference", data, ptr, session.referent) if data is not None else None}
                      for tid, slot, data in v.per_thread]
        value: str | None
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
