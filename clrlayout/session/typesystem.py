"""The dump's types: names as the DAC prints them, field layouts, the types a name selects, what a reference points
at."""

from __future__ import annotations

from ..errors import ClrLayoutError
from ..findings import Findings
from ..limits import REFERENCED_CHARS

STRING_TYPE = "System.String"
FREE_TYPE = "Free"


class TypeSystem:
    """The dump's types: names as the DAC prints them, field layouts, the types a name selects, what a reference
    points at. (a part of :class:`~clrlayout.session.Session`)."""

    @property
    def names(self):
        """The :class:`~clrlayout.types.names.TypeNames` of this dump (metadata read as names are asked for)."""
        if self._names is None:
            from ..types.images import ManagedImages
            from ..types.names import TypeNames

            self._names = TypeNames(self.mts, ManagedImages(self.dump, self.assemblies))
        return self._names

    def is_string_method_table(self, address: int) -> bool:
        """Whether ``address`` is the dump's System.String MethodTable, or could be: when none can be found,
        a MethodTable the user gives (--mt) is tried as one."""
        try:
            return self.string_method_table() == address
        except ClrLayoutError:
            return True

    def type_name(self, method_table: int) -> str | None:
        """The name of the type of a MethodTable as the DAC prints it, from the metadata of its module
        (None: it cannot be had; never a guess)."""
        kept = self.kept_answers("type-names")  # what a command before read from the modules' metadata
        if kept is not None and str(method_table) in kept:
            return kept[str(method_table)]
        mt = self.mts.get(method_table)
        if mt is not None and mt.kind == "free":
            return FREE_TYPE
        said = len(self.warnings)
        name = self.names.name(method_table) if self.profile.method_table is not None else None
        if name is None and method_table == self.mts.string_mt:
            return STRING_TYPE  # known by its shape (and by --mt) where its metadata cannot be had
        if name is not None and len(self.warnings) == said:  # (what warned is named again, and warns again)
            self.keep_answer("type-names", str(method_table), name)
        return name

    @property
    def layouts(self):
        """The :class:`~clrlayout.types.layouts.TypeLayouts` of this dump (EEClass and FieldDescs, read as
        layouts are asked for)."""
        if self._layouts is None:
            from ..types.eeclass import type_system_layout
            from ..types.layouts import TypeLayouts

            # a struct field's type is found among the MethodTables the dump shows: all of the heap's, whatever
            # the layout is asked for by (a MethodTable, a name, an object met early in a walk)
            self._learn_heap_types()

            if self.profile.method_table is None:
                spec = "field layouts are known for CoreCLR (.NET Core 3.0 to .NET 10), not for Mono"
            else:
                spec = type_system_layout(self.runtime.flavor, self.dump.arch, self.dump.os,
                                          self.runtime.version_tuple, self.profile.pointer_size)
            self._layouts = TypeLayouts(self.names, spec,
                                        lambda: [(b.start, b.end) for b in self.loader_heaps().blocks])
        return self._layouts

    def type_layout(self, method_table: int):
        """The field layout of the type of a MethodTable (None: not a MethodTable in the dump)."""
        return self.layouts.layout(method_table)

    def method_tables_named(self, name: str) -> list[int]:
        """The MethodTables of the heap's types (and the types they lead to) whose name is ``name``, as the
        DAC prints it or as reflection does; the heap is walked once to learn them."""
        self._learn_heap_types()
        return [mt for mt in self.layouts.universe() if name in (self.type_name(mt), self.names.reflection_name(mt))]

    def is_named(self, method_table: int, name: str, exact: bool = True) -> bool:
        """Whether the type of ``method_table`` is named ``name`` as the DAC or reflection prints it (or, not
        ``exact``, has a name that contains it)."""
        for n in (self.type_name(method_table), self.names.reflection_name(method_table)):
            if n is not None and (n == name if exact else name in n):
                return True
        return False

    def type_names_containing(self, text: str, limit: int = 5) -> list[str]:
        self._learn_heap_types()
        found = sorted({n for n in map(self.type_name, self.layouts.universe()) if n and text in n})
        return found[:limit]

    def _learn_heap_types(self) -> None:
        """Walks the heap once (unless a walk did) to learn every MethodTable its objects have; what that walk
        finds is not reported (the command's own walk reports it)."""
        if self.heap.exact and not self._walked_types:
            from ..heap.fastwalk import FastWalker, HeapSteps

            self._walked_types = True
            self.string_method_table()
            walker = FastWalker(self.dump.memory, self.mts, Findings(self.findings.limit))
            for _ in HeapSteps(walker, self.heap.segments).windows():
                pass

    def referent(self, address: int, limit: int | None = REFERENCED_CHARS):
        """What a reference to ``address`` points at: its type's name and, for a string, its value (shown up
        to ``limit`` characters; None: whole)."""
        from ..objects.instances import Referent
        from ..objects.strings import read_strings

        word = self.dump.memory.try_read(address, self.profile.pointer_size)
        if word is None:
            return Referent("not in the dump")
        mt = int.from_bytes(word, "little") & ~self.profile.object.method_table_unmask
        if self.mts.get(mt) is None:
            return Referent("no valid MethodTable")
        value = None
        if mt == self.mts.string_mt:
            got = read_strings(self.dump.memory, self.profile, [address], False, Findings(0))
            value = got[0].value if got else None
        return Referent(self.type_name(mt) or f"<unknown type, MT {mt:#x}>", value, limit)

    def array_element(self, method_table: int):
        """(name, show, size, fields) of the elements of an array type: how the layout shows each element
        (fields: a value type's own, offsets from the start of the element)."""
        from dataclasses import replace

        from ..objects.instances import PRIMITIVES

        raw = self.mts.read_raw(method_table)
        mt = self.mts.get(method_table)
        element = raw.get("m_pPerInstInfo", 0) if raw is not None else 0
        emt = self.mts.get(element) if element and not element & 2 else None
        name = self.names.reflection_name(element) if emt is not None else None
        size = mt.component_size if mt is not None else 0
        if name in PRIMITIVES:
            return name, PRIMITIVES[name][1], size, ()
        lay = self.type_layout(element) if emt is not None else None
        if lay is not None and lay.value_type:
            ptr = self.profile.pointer_size
            return name or "?", "struct", size, tuple(replace(f, offset=f.offset - ptr) for f in lay.fields)
        if emt is not None and size == self.profile.pointer_size:
            return name, "reference", size, ()
        return name or "?", "hex", size, ()
