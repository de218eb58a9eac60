"""The ECMA-335 metadata of one managed assembly, read with dnfile: type names by TypeDef row.

dnfile (MIT) parses the PE file and the metadata tables; rows are read one at a time as they are asked
for (``clr_lazy_load``), so a name costs one row, not the whole table.  Input is the assembly's file
bytes (flat layout).
"""

from __future__ import annotations

import logging

#: TypeDef flags: the visibility bits; values 2 to 7 are nested types (ECMA-335 II.23.1.15)
VISIBILITY_MASK = 0x7
NESTED_FIRST = 2
#: the characters TypeString escapes with a backslash in a name (typeparse.h)
RESERVED = set(",[]&*+\\")


class MetadataError(Exception):
    """The bytes are not a managed assembly dnfile can read."""


def escape(name: str) -> str:
    return "".join("\\" + c if c in RESERVED else c for c in name)


class Metadata:
    """Names of TypeDefs (with their enclosing types), fields and type references, and the assembly's
    simple name."""

    def __init__(self, data: bytes):
        import dnfile
        import pefile

        logging.getLogger("dnfile").setLevel(logging.ERROR)
        try:
            pe = dnfile.dnPE(data=data, fast_load=True, clr_lazy_load=True)
            pe.parse_data_directories(directories=[pefile.DIRECTORY_ENTRY["IMAGE_DIRECTORY_ENTRY_COM_DESCRIPTOR"]])
        except Exception as e:  # pefile and dnfile raise many kinds on bad input
            raise MetadataError(f"not a readable PE file: {e}") from None
        net = getattr(pe, "net", None)
        tables = getattr(net, "mdtables", None) if net is not None else None
        if tables is None or getattr(tables, "TypeDef", None) is None:
            raise MetadataError("no .NET metadata tables")
        self._pe = pe
        self._tables = tables
        self._enclosing: dict[int, int] | None = None
        self._by_name: dict[str, int] | None = None
        self._method_starts: list[int] | None = None
        self.assembly_name = self._assembly_name()

    def _assembly_name(self) -> str | None:
        table = getattr(self._tables, "Assembly", None)
        if table is None or table.num_rows < 1:
            return None
        try:
            return str(table.get_with_row_index(1).Name)
        except Exception:
            return None

    @property
    def type_count(self) -> int:
        return self._tables.TypeDef.num_rows

    def _row(self, rid: int):
        table = self._tables.TypeDef
        if not 1 <= rid <= table.num_rows:
            return None
        try:
            return table.get_with_row_index(rid)
        except Exception:
            return None

    def _enclosing_of(self, rid: int) -> int | None:
        if self._enclosing is None:
            self._enclosing = {}
            table = getattr(self._tables, "NestedClass", None)
            for i in range(1, (table.num_rows if table is not None else 0) + 1):
                try:
                    row = table.get_with_row_index(i).struct
                except Exception:
                    continue
                self._enclosing[row.NestedClass_Index] = row.EnclosingClass_Index
        return self._enclosing.get(rid)

    def type_name(self, rid: int) -> str | None:
        """``Namespace.Name``, nested types as ``Outer+Inner`` (the namespace is the outermost type's), as
        the DAC's TypeString prints them; None when the row is not there."""
        parts = []
        seen = set()
        while True:
            row = self._row(rid)
            if row is None or rid in seen:
                return None
            seen.add(rid)
            flags = row.struct.Flags
            name = escape(str(row.TypeName))
            if flags & VISIBILITY_MASK >= NESTED_FIRST:
                outer = self._enclosing_of(rid)
                if outer is None:
                    return None
                parts.append(name)
                rid = outer
                continue
            namespace = str(row.TypeNamespace)
            parts.append(f"{escape(namespace)}.{name}" if namespace else name)
            return "+".join(reversed(parts))

    # --- fields and type references --------------------------------------------------------------------

    def _table_row(self, table: str, rid: int):
        t = getattr(self._tables, table, None)
        if t is None or not 1 <= rid <= t.num_rows:
            return None
        try:
            return t.get_with_row_index(rid)
        except Exception:
            return None

    def method_name(self, rid: int) -> str | None:
        """The name of MethodDef row ``rid`` (None when it is not there)."""
        row = self._table_row("MethodDef", rid)
        if row is None:
            return None
        try:
            return str(row.Name)
        except Exception:  # a damaged string heap
            return None

    def method_signature(self, rid: int) -> bytes | None:
        """The signature blob of MethodDef row ``rid`` (None when it is not there)."""
        row = self._table_row("MethodDef", rid)
        try:
            return None if row is None or row.Signature is None else bytes(row.Signature.value)
        except Exception:
            return None

    def method_owner(self, rid: int) -> int | None:
        """The TypeDef (its RID) whose method list holds MethodDef row ``rid``, None when no type's does."""
        if self._method_starts is None:
            starts = []
            for i in range(1, self.type_count + 1):
                row = self._row(i)
                starts.append(row.struct.MethodList_Index if row is not None else 0)
            self._method_starts = starts
        methods = getattr(self._tables, "MethodDef", None)
        if methods is None or not 1 <= rid <= methods.num_rows:
            return None
        import bisect

        return bisect.bisect_right(self._method_starts, rid) or None  # the last type whose list starts by it

    def field(self, rid: int) -> tuple[str, bytes] | None:
        """The name and the signature blob of Field row ``rid`` (None when it is not there)."""
        row = self._table_row("Field", rid)
        if row is None:
            return None
        try:
            sig = row.Signature
            return str(row.Name), bytes(sig.value if sig is not None and sig.value is not None else b"")
        except Exception:
            return None

    def type_spec(self, rid: int) -> bytes | None:
        row = self._table_row("TypeSpec", rid)
        try:
            return None if row is None or row.Signature is None else bytes(row.Signature.value)
        except Exception:
            return None

    def type_ref(self, rid: int) -> tuple[str, str | None] | None:
        """A TypeRef's full name (nested types with ``+``) and the simple name of the assembly that defines
        it (None: this assembly)."""
        parts = []
        for _ in range(16):
            row = self._table_row("TypeRef", rid)
            if row is None:
                return None
            try:
                name, namespace = escape(str(row.TypeName)), str(row.TypeNamespace)
                scope = row.ResolutionScope
                table = type(scope.table).__name__ if scope is not None and scope.table is not None else ""
                index = scope.row_index if scope is not None else 0
            except Exception:
                return None
            if table == "TypeRef":
                parts.append(name)
                rid = index
                continue
            parts.append(f"{escape(namespace)}.{name}" if namespace else name)
            full = "+".join(reversed(parts))
            if table == "AssemblyRef":
                ref = self._table_row("AssemblyRef", index)
                try:
                    return full, str(ref.Name) if ref is not None else None
                except Exception:
                    return full, None
            return full, None  # Module or ModuleRef: defined in this assembly
        return None

    def find_type(self, full_name: str) -> int | None:
        """The TypeDef RID of a type by its full name (``Namespace.Outer+Inner``), None when not defined here."""
        if self._by_name is None:
            self._by_name = {}
            for rid in range(1, self.type_count + 1):
                name = self.type_name(rid)
                if name is not None:
                    self._by_name.setdefault(name, rid)
        return self._by_name.get(full_name)
