"""Types and fields of the model: :class:`ClrType` (a MethodTable with its name, sizes, parents and fields) and
:class:`ClrField` (one instance or static field), as ClrMD's ``ClrType`` and ``ClrField``."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..session import Session
    from ..types.layouts import FieldLayout, TypeLayout


@dataclass(frozen=True)
class ClrField:
    """One field of a type: where it is in an object (``offset`` from the object pointer, as SOS shows it;
    for a field of an embedded struct, from the start of the struct), its size and declared type."""

    name: str
    offset: int
    size: int
    type_name: str  #: the declared type, as the DAC names types
    declaring_type: str
    kind: str  #: "primitive" | "reference" | "pointer" | "struct"
    is_static: bool = False
    #: a struct field's own fields (offsets from the start of the struct)
    fields: tuple[ClrField, ...] = ()
    show: str = ""

    @staticmethod
    def of(f: FieldLayout) -> ClrField:
        """The model's field of a layout's.

        Args:
            f: the :class:`~clrlayout.types.layouts.FieldLayout`.
        """
        return ClrField(f.name, f.offset, f.size, f.type, f.declaring_type, f.kind, f.is_static,
                        tuple(ClrField.of(x) for x in f.fields), f.show)

    def decode(self, data: bytes, pointer_size: int) -> object:
        """The value of this field from its bytes: int, float, bool or a one-character str; a reference or
        pointer as an address (None for null); a struct as a dict of its fields' values; else the bytes.  A bool
        whose byte is neither 0 nor 1 is that number (``object`` shows it as "2 (not 0 or 1)"), as a char that is
        a lone surrogate is its code.

        Args:
            data: the field's bytes.
            pointer_size: the target's pointer size (4 or 8).
        """
        if self.kind == "struct":
            return {f.name: f.decode(data[f.offset : f.offset + f.size], pointer_size) for f in self.fields} \
                if self.fields else bytes(data)
        if self.kind in ("reference", "pointer"):
            value = int.from_bytes(data[:pointer_size], "little")
            return None if self.kind == "reference" and value == 0 else value
        from ..objects.instances import primitive_value  # (the value decoders: imported when a value is read)

        value = primitive_value(self.show, bytes(data))
        if value is None:
            return bytes(data)
        if self.show == "bool":
            return {0: False, 1: True}.get(value, value)
        return chr(value) if self.show == "char" and not 0xD800 <= value <= 0xDFFF else value


@dataclass
class ClrType:
    """The type of a MethodTable: its name as the DAC prints it (None, with ``why_unnamed``, where the dump
    does not allow one: never a guess), sizes, parents and fields."""

    method_table: int
    name: str | None
    base_size: int
    component_size: int
    kind: str  #: "class" | "array" | "string" | "free" | "object"
    why_unnamed: str | None = None
    _session: Session | None = field(default=None, repr=False, compare=False)
    _layout: TypeLayout | None = field(default=None, repr=False, compare=False)

    @staticmethod
    def of(session: Session, method_table: int) -> ClrType | None:
        """The type of a MethodTable.

        Args:
            session: the engine over the dump.
            method_table: the MethodTable's address.

        Returns:
            The type, or None where no valid MethodTable is there.
        """
        mt = session.mts.get(method_table)
        if mt is None:
            return None
        name = session.type_name(method_table)
        why = None
        if name is None and session.profile.method_table is not None:
            why = next(iter(session.why_unnamed([method_table])), "not named")
        return ClrType(method_table, name, mt.base_size, mt.component_size, mt.kind, why, session)

    @property
    def is_string(self) -> bool:
        return self.kind == "string" or (self._session is not None and self.method_table == self._session.mts.string_mt)

    @property
    def is_array(self) -> bool:
        return self.kind == "array"

    @property
    def is_free(self) -> bool:
        return self.kind == "free"

    def layout(self) -> TypeLayout | None:
        """The field layout (:class:`~clrlayout.types.layouts.TypeLayout`) the ``type`` command prints."""
        if self._layout is None and self._session is not None and self._session.profile.method_table is not None:
            self._layout = self._session.type_layout(self.method_table)
        return self._layout

    @property
    def is_value_type(self) -> bool:
        lay = self.layout()
        return bool(lay is not None and lay.value_type)

    @property
    def parents(self) -> list[ClrType]:
        """The parent chain, nearest first (System.Object last)."""
        lay = self.layout()
        session = self._session
        if lay is None or session is None:
            return []
        return [t for t in (ClrType.of(session, m) for m in lay.parents) if t]

    @property
    def fields(self) -> list[ClrField]:
        """The instance fields, inherited ones included, by offset."""
        lay = self.layout()
        return [ClrField.of(f) for f in lay.fields] if lay is not None else []

    @property
    def static_fields(self) -> list[ClrField]:
        lay = self.layout()
        return [ClrField.of(f) for f in lay.statics] if lay is not None else []

    def field(self, name: str) -> ClrField | None:
        """A field by its name (instance fields, inherited ones included).

        Args:
            name: the field's name.
        """
        lay = self.layout()
        f = lay.field(name) if lay is not None else None
        return ClrField.of(f) if f is not None else None

    def __str__(self) -> str:
        return self.name or f"<unknown type, MT {self.method_table:#x}>"
