"""Finding what a command was asked for, and saying precisely why nothing was found: a type by name or
MethodTable (among the heap's types, their parents and arguments, and the modules' TypeDefs), the object that
holds an address, and the messages of a type, a MethodTable or an address that leads to nothing."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..errors import TypeNotFound

if TYPE_CHECKING:
    from collections.abc import Iterable

    from .dump import Dump


def named(dump: Dump, method_tables: Iterable[int], type_name: str, exact: bool) -> bool:
    """Whether one of ``method_tables`` has a name (as the DAC or reflection prints it) that is ``type_name``
    (``exact``) or contains it."""
    runtime = dump.runtime
    return any(runtime.is_named(mt, type_name, exact) for mt in method_tables)


def type_not_found(dump: Dump, type_name: str, exact: bool) -> TypeNotFound:
    """No object on the heap has a type of that name: the error says whether the type is there at all, and the
    names like it."""
    session = dump._session
    flag = f"type_name={type_name}" + (" exact=True" if exact else "")
    if session.method_tables_named(type_name):  # a parent, element or argument type of the heap's
        return TypeNotFound(f"{flag}: no object of this type on the heap (the type is there as another's "
                            f"parent, element or argument: `clrlayout type` shows its layout)")
    key = type_name.split("[")[0].split("`")[0].split(".")[-1]  # List`1[System.Int32] -> List
    similar = dump.runtime.names_containing(key) if key else []
    return TypeNotFound(f"{flag}: no type " + ("of that name" if exact else "whose name contains it")
                        + " on the heap" + (f" (names like it: {'; '.join(similar)})" if similar else
                                            " (stats lists the heap's types)"))


def no_objects_of(dump: Dump, mt: int, asked: str) -> TypeNotFound:
    """A MethodTable asked for (``asked``: how the request is named) found nothing: either the dump holds no
    MethodTable there, or no object has it."""
    if dump._session.mts.get(mt) is None:
        return TypeNotFound(f"method_table={mt:#x}: no MethodTable in the dump there")
    return TypeNotFound(f"{asked}: no object of this MethodTable on the heap")


def not_of_name(dump: Dump, mt: int, type_name: str, exact: bool) -> TypeNotFound | None:
    """A MethodTable and a type name asked for together that disagree: the error (None when the MethodTable's
    type has that name)."""
    runtime = dump.runtime
    if dump._session.mts.get(mt) is None or runtime.is_named(mt, type_name, exact):
        return None
    return TypeNotFound(f"method_table={mt:#x} is {runtime.type_name(mt) or 'a type without a name'}, not a type "
                        f"{'named' if exact else 'whose name contains'} {type_name!r}")


def method_tables_for(dump: Dump, name: str, address: int | None) -> list[int]:
    """The MethodTables ``type NAME`` shows: the one at ``address`` (NAME read as one), else every type of that
    name among the heap's types, else among its modules' TypeDefs (a type without instances: a static class).

    Raises:
        clrlayout.errors.TypeNotFound: none, with why (no MethodTable at the address, names that contain it).
    """
    session = dump._session
    if address is not None and session.mts.get(address) is not None:
        return [address]
    exact_walk = session.heap.exact
    mts: list[int] = session.method_tables_named(name) if exact_walk else []
    if not mts and exact_walk:
        mts = [m for m in session.statics().all_types() if session.is_named(m, name, True)]
    if not mts and address is not None and (name.lower().startswith("0x") or any(c.isdigit() for c in name)):
        held = dump.memory.try_read(address, 1) is not None
        raise TypeNotFound(f"type {name}: no MethodTable in the dump at {address:#x}"
                           + ("" if held else " (the dump holds no memory there)"))
    if not mts:
        similar = dump.runtime.names_containing(name) if exact_walk else []
        raise TypeNotFound(f"type {name}: no type of that name among the heap's types and its modules' types"
                           + (f" (names that contain it: {'; '.join(similar)})" if similar else "")
                           + ("" if exact_walk else " (no exact heap walk: give a MethodTable address)"))
    return mts


def object_holding(dump: Dump, address: int, what: str) -> Any:
    """The walked object (free space included) whose bytes hold ``address``.

    Args:
        what: how the error names the request ("object 0x...").

    Raises:
        clrlayout.errors.TypeNotFound: no object holds it, saying whether it is outside every heap segment.
    """
    session = dump._session
    obj = session.object_at(address)
    if obj is None:
        raise TypeNotFound(f"{what}: no object of the GC heap holds this address"
                           + ("" if session.heap.segment_at(address) else " (it is outside every heap segment)"))
    return obj
