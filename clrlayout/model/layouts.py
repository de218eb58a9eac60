"""The layout of one object as ``object``, ``dump --layout`` and ``dump --fields`` show it (JOL's instance
layout): its rows (header, MethodTable pointer, each field or element, padding) over its bytes, with the
referenced objects named, and its instance fields' values."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..analyses.estimates import parse_lengths, select_variants

if TYPE_CHECKING:
    from .dump import Dump

__all__ = ["field_values", "object_layout", "parse_lengths", "profile_string_layout", "runtime_label",
           "select_variants", "string_object_layout", "type_problems"]


def profile_string_layout(profile: Any, length: int) -> Any:
    """A string's layout of ``length`` characters from a layout profile alone (no dump): ``layout``'s."""
    from ..objects.layout import string_layout

    return string_layout(profile, length)


def runtime_label(dump: Dump) -> str:
    """"coreclr 8.0.4 x64": what a layout's title says the bytes are of."""
    return f"{dump.runtime.flavor} {dump.runtime.version or '?'} {dump.arch}"


def type_problems(dump: Dump, method_table: int) -> list[str]:
    """What the type's layout could not read (a field's type unknown...): a layout shown with them is
    incomplete."""
    lay = dump._session.type_layout(method_table)
    return list(lay.problems) if lay is not None else []


def _referent(dump: Dump, full: bool) -> Any:
    session = dump._session
    return (lambda address: session.referent(address, None)) if full else session.referent


def object_layout(dump: Dump, obj: Any, full: bool) -> Any:
    """The rows and bytes of one walked object of any type, a string included (its length, characters and
    terminator).

    Args:
        obj: an object of the walk (``object_holding``, the objects of a type).
        full: whole values and every element (else values cut at 60 characters, 16 elements).
    """
    from ..findings import Findings
    from ..objects.instances import instance_layout
    from ..objects.layout import string_layout
    from ..objects.strings import read_strings

    session = dump._session
    h = session.profile.object.header_size
    data = session.dump.memory.read(obj.address - h, obj.aligned_size)
    if obj.method_table == session.mts.string_mt:
        s = read_strings(session.dump.memory, session.profile, [obj.address], obj.segment.large, Findings(0))
        if s:
            return string_layout(session.profile, s[0].length, s[0], data, obj.segment.large,
                                 max_value_chars=None if full else 60)
    element = session.array_element(obj.method_table) if obj.type.component_size else None
    return instance_layout(session.profile, session.type_layout(obj.method_table), obj.address, data, obj.size,
                           obj.aligned_size, obj.count, element, _referent(dump, full), obj.segment.large,
                           max_elements=None if full else 16)


def string_object_layout(dump: Dump, s: Any, full: bool) -> Any:
    """The layout of a string of a listing's batch (header, MethodTable pointer, length, characters,
    terminator, padding).

    Args:
        s: a :class:`~clrlayout.objects.strings.StringObject`.
        full: the whole value (else cut at 60 characters).
    """
    from ..objects.layout import string_layout
    from ..objects.strings import object_span

    profile = dump._session.profile
    start, span = object_span(profile, s.address, s.length, s.large)
    data = dump.memory.read(start, span)
    return string_layout(profile, s.length, s, data, s.large, max_value_chars=None if full else 60)


def field_at(lay: Any, offset: int) -> str:
    """What a layout's bytes at ``offset`` (from the object pointer) are: the struct field and its field that hold
    it, "past its fields" where none does."""
    held = [r for r in lay.rows if r.offset <= offset < r.end]  # a struct, then its field
    return "".join(r.description.strip() for r in held) if held else "past its fields"


def field_values(dump: Dump, obj: Any, full: bool) -> list[tuple[str, str]]:
    """(name, value) of the object's instance fields (none for an array), as ``object`` shows them."""
    from ..objects.instances import field_values as values

    session = dump._session
    lay = session.type_layout(obj.method_table)
    if lay is None or obj.type.component_size:
        return []
    data = session.dump.memory.read_available(obj.address, obj.aligned_size)
    return list(values(session.profile, lay.fields, data, _referent(dump, full)))
