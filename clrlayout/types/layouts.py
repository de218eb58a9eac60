"""The field layout of a type: every instance field, inherited ones included, at its offset (JOL's class
layout, SOS's ``DisplayFields``), from the runtime's EEClass and FieldDescs and the metadata of each
declaring class.

Offsets count from the object pointer (the address of the MethodTable pointer), as SOS prints them; a
value type's fields also carry their offset in the unboxed value.  A field of a value type is expanded
with its own fields when the struct's MethodTable is known: the types of the heap, their parents, array
elements and type arguments; a non-generic struct's from its Module's TypeDef map; an instantiation of a
generic struct that no object shows (a ``Nullable<int>`` field: a Nullable boxes as its T) from where the
runtime loaded it, its loader heaps (the MethodTables there whose parent is System.ValueType, with the
instantiation's TypeDef and type arguments; for reference type arguments, the shared ``__Canon`` one the
runtime lays the field out with; on 2.x also in the NGEN images, which hold CoreLib's precompiled ones).
Otherwise its size is the room up to the next field and it is marked so.
What cannot be read is said in ``TypeLayout.problems``, never guessed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace

import numpy as np

from . import signatures as sigs
from .declared import DeclaredTypes
from .eeclass import TypeSystemLayout
from .names import TypeNames

#: how deep embedded structs are expanded
MAX_NESTING = 8
#: parents followed up a class's chain (real chains are a dozen deep; a bound on what a dump controls)
MAX_PARENTS = 64


@dataclass(frozen=True)
class FieldLayout:
    name: str
    #: from the object pointer for a field of a class or of a boxed value; from the start of the value for
    #: the fields of an embedded struct (see TypeLayout.fields / FieldLayout.fields)
    offset: int
    size: int
    element_type: int  # the FieldDesc's CorElementType
    type: str  # the declared type, as the DAC prints it (System.Func`2[[System.Object, System.Private.CoreLib],...])
    declaring_type: str  # likewise
    token: int
    kind: str  # "primitive" | "reference" | "pointer" | "struct"
    #: value types: the struct's MethodTable, when known
    field_method_table: int | None = None
    #: value types: the struct's own fields (offsets from the start of the struct); empty when unknown
    fields: tuple = ()
    #: False for a struct whose MethodTable is not known: its size is the room up to the next field
    size_known: bool = True
    is_static: bool = False
    show: str = ""
    #: a static field's storage: "gc" (a reference, or a boxed struct, in the type's GC statics), "nongc" (a
    #: primitive, in its non-GC statics), "thread" (thread-local), "rva" (data in the image); "" for instance fields
    storage: str = ""
    #: declared by a parent class of the type the layout is of
    inherited: bool = False
    #: ``type`` and ``declaring_type`` as reflection prints them (``Type.ToString()``: System.Func`2[System.Object,...])
    reflection_type: str = ""
    reflection_declaring_type: str = ""

    @property
    def end(self) -> int:
        return self.offset + self.size


@dataclass(frozen=True)
class TypeLayout:
    method_table: int
    name: str | None
    base_size: int
    component_size: int
    value_type: bool
    #: the MethodTables of the parent chain, nearest first
    parents: tuple
    #: instance fields, inherited ones included, by offset from the object pointer
    fields: tuple
    #: static fields the type's own class declares (offsets are into its statics, not the object)
    statics: tuple = ()
    #: a value type's size unboxed (BaseSize - the EEClass's base size padding)
    unboxed_size: int | None = None
    problems: tuple = ()

    @property
    def complete(self) -> bool:
        return not self.problems

    def field(self, name: str) -> FieldLayout | None:
        """The instance field named ``name`` (the nearest class's, where a parent declares one too)."""
        return next((f for f in self.fields if f.name == name), None)


@dataclass
class _Class:
    """One class of a chain: its EEClass data and own FieldDescs (or why they could not be read)."""

    data: object = None
    own: list = field(default_factory=list)
    problem: str | None = None


class TypeLayouts(DeclaredTypes):
    """Field layouts of the MethodTables of one dump, each worked out once."""

    def __init__(self, names: TypeNames, spec: TypeSystemLayout | str,
                 loaded: Callable[[], list] | None = None):
        """``loaded``: the ranges ``(start, end)`` of the runtime's loader heaps, asked for the first time a
        generic struct no object shows is looked for."""
        self.names = names
        self.loaded = loaded
        #: the MethodTables in the loader heaps whose parent is System.ValueType (None: not looked for yet)
        self._value_types: list[int] | None = None
        self.mts = names.mts
        self.space = names.space
        self.profile = names.profile
        self.spec = spec
        self._classes: dict[int, _Class] = {}
        self._layouts: dict[int, TypeLayout] = {}
        self._index: dict | None = None  # (image id, TypeDef RID) -> [MethodTable]
        self._modules: dict[int, int] = {}  # image id -> runtime Module
        self._maps = None

    # --- one class ----------------------------------------------------------------------------------

    def _canonical(self, address: int) -> tuple[int, int] | None:
        """(canonical MethodTable, EEClass address) of the type at ``address``."""
        raw = self.mts.read_raw(address)
        if raw is None:
            return None
        union = raw.m_pEEClass
        mask = self.profile.method_table.eeclass_or_canon_mask
        if union & 3 == 0:
            return address, union
        if not union & mask:
            return None
        canon = union & ~3
        craw = self.mts.read_raw(canon)
        if craw is None or craw.m_pEEClass & 3:
            return None
        return canon, craw.m_pEEClass

    def class_data(self, address: int, depth: int = 0) -> _Class:
        """The EEClass and own FieldDescs of the class of the type at ``address``."""
        if address in self._classes:
            return self._classes[address]
        c = _Class()
        if depth > MAX_PARENTS:
            c.problem = "parent chain too long"
            return c
        self._classes[address] = c
        if isinstance(self.spec, str):
            c.problem = self.spec
            return c
        canon = self._canonical(address)
        if canon is None:
            c.problem = "MethodTable's EEClass not in the dump"
            return c
        data = self.spec.read_class(self.space, canon[1], canon[0])
        if isinstance(data, str):
            c.problem = data
            return c
        c.data = data
        mt = self.mts.get(address)
        inherited = 0
        if mt is not None and mt.parent:
            parent = self.class_data(mt.parent, depth + 1)
            if parent.data is None:
                c.problem = f"parent {mt.parent:#x}: {parent.problem}"
                return c
            inherited = parent.data.num_instance_fields
        own = data.num_instance_fields - inherited + data.num_static_fields
        if own < 0:
            c.problem = "EEClass counts fewer instance fields than its parent's"
            return c
        fds = self.spec.read_field_descs(self.space, data.field_desc_list, own) if own else []
        if fds is None:
            c.problem = "FieldDescs not in the dump"
            return c
        c.own = fds
        return c

    # --- the layout ---------------------------------------------------------------------------------

    def layout(self, address: int) -> TypeLayout | None:
        """The layout of the type at ``address`` (None when it is not a valid MethodTable)."""
        if address not in self._layouts:
            mt = self.mts.get(address)
            if mt is None:
                return None
            self._layouts[address] = self._layout(address, mt, 0)
        return self._layouts[address]

    def _layout(self, address: int, mt, depth: int) -> TypeLayout:
        ptr = self.profile.pointer_size
        problems: list[str] = []
        chain = self._chain(address)
        fields: list[FieldLayout] = []
        statics: list[FieldLayout] = []
        value_type = self._is_value_type(chain)
        for cls in reversed(chain):
            c = self.class_data(cls)
            if c.problem:
                problems.append(f"{self._display(cls)}: {c.problem}")
                continue
            unknown = f"<unknown type, MT {cls:#x}>"
            declaring = (self.names.name(cls) or unknown, self.names.reflection_name(cls) or unknown)
            for fd in c.own:
                if fd.is_static and cls == address:
                    f = self._field(cls, fd, declaring, depth, problems)
                    storage = "thread" if fd.is_thread_local else "rva" if fd.is_rva else \
                        "gc" if f.kind in ("reference", "struct") else "nongc"
                    statics.append(replace(f, storage=storage))
                elif not fd.is_static and self.spec.is_real_offset(fd.offset):  # else EnC-added, unplaced
                    f = self._field(cls, fd, declaring, depth, problems)
                    fields.append(replace(f, inherited=True) if cls != address else f)
        fields.sort(key=lambda f: f.offset)
        # instance offsets count from the end of the MethodTable pointer; SOS shows them from the object pointer
        fields = [_shift(f, ptr) for f in fields]
        data_end = mt.base_size - self.profile.object.header_size
        own = self.class_data(address).data
        padding = own.base_size_padding if own is not None else None
        unboxed = mt.base_size - padding if value_type and padding is not None else None
        if value_type and unboxed is not None:
            data_end = ptr + unboxed
        fields = _sized(fields, data_end)
        return TypeLayout(address, self.names.name(address), mt.base_size, mt.component_size, value_type,
                          tuple(chain[1:]), tuple(fields), tuple(statics), unboxed, tuple(problems))

    def _chain(self, address: int) -> list[int]:
        """The type at ``address`` and its parents, nearest first."""
        chain: list[int] = []
        at = address
        while at and len(chain) <= MAX_PARENTS:
            chain.append(at)
            m = self.mts.get(at)
            at = m.parent if m is not None else 0
        return chain

    def _is_value_type(self, chain: list[int]) -> bool:
        """A type whose parent is System.ValueType or System.Enum (and not those two themselves)."""
        if len(chain) < 3:
            return False
        parent = self.names.name(chain[1])
        return parent in ("System.ValueType", "System.Enum") and self.names.name(chain[0]) != "System.Enum"

    def _display(self, address: int) -> str:
        return self.names.name(address) or f"MethodTable {address:#x}"

    def _field(self, cls: int, fd, declaring_names: tuple[str, str], depth: int, problems: list) -> FieldLayout:
        name, sig, image, context = self._declaration(cls, fd)
        f = self._field_of(fd, name, sig, image, context, declaring_names[0], depth, problems)
        reflection = self._sig_text(sig, image, context) if sig is not None else f.type
        return replace(f, reflection_declaring_type=declaring_names[1], reflection_type=reflection)

    def _declaration(self, cls: int, fd):
        """(name, signature, image, type arguments) of a FieldDesc of the class at ``cls``."""
        image = self.names.image_of(cls)
        meta = image.metadata if image is not None else None
        got = meta.field(fd.token & 0xFFFFFF) if meta is not None else None
        name = got[0] if got else f"<field {fd.token:#010x}>"
        sig = None
        if got and got[1]:
            try:
                sig = sigs.field_signature(got[1])
            except sigs.SignatureError:
                sig = None
        return name, sig, image, self.names.type_arguments(cls) or []

    def _field_of(self, fd, name: str, sig, image, context: list, declaring: str, depth: int,
                  problems: list) -> FieldLayout:
        ptr = self.profile.pointer_size
        declared = self._sig_text(sig, image, context, dac=True) if sig is not None else None
        et = self.spec.element_types.get(fd.element_type, {"name": f"element type {fd.element_type:#x}",
                                                           "size": 0, "show": "hex"})
        show = et["show"]
        kind = {"reference": "reference", "pointer": "pointer", "struct": "struct"}.get(show, "primitive")
        if declared is None:
            declared = et["name"]
        if kind != "struct":
            size = et["size"] or ptr
            return FieldLayout(name, fd.offset, size, fd.element_type, declared, declaring, fd.token, kind,
                               is_static=fd.is_static, show=show)
        struct_mt = self._struct_method_table(sig, image, context) if sig is not None else None
        if struct_mt is None or depth >= MAX_NESTING:
            return FieldLayout(name, fd.offset, 0, fd.element_type, declared, declaring, fd.token, kind,
                               size_known=False, is_static=fd.is_static, show=show)
        inner = self._layouts.get(struct_mt)
        if inner is None:  # each struct worked out once (a struct of structs is not a tree to re-walk)
            inner = self._layouts[struct_mt] = self._layout(struct_mt, self.mts.get(struct_mt), depth + 1)
        if inner.unboxed_size is None:
            return FieldLayout(name, fd.offset, 0, fd.element_type, declared, declaring, fd.token, kind,
                               struct_mt, size_known=False, is_static=fd.is_static, show=show)
        inner_fields = tuple(_shift(f, -ptr) for f in inner.fields)  # from the start of the value
        problems += [p for p in inner.problems if p not in problems]
        return FieldLayout(name, fd.offset, inner.unboxed_size, fd.element_type, declared, declaring, fd.token,
                           kind, struct_mt, inner_fields, is_static=fd.is_static, show=show)

    # --- declared types -----------------------------------------------------------------------------

    def _resolve(self, image, token: int):
        """(image, TypeDef RID) of a TypeDef or TypeRef token seen in ``image``'s metadata, or None."""
        table, rid = token >> 24, token & 0xFFFFFF
        if table == 0x02:
            return image, rid
        if table != 0x01:
            return None
        ref = image.metadata.type_ref(rid)
        if ref is None:
            return None
        full, assembly = ref
        candidates = self.names.images.by_assembly(assembly) if assembly else [image]
        for target in candidates + [i for i in self.names.images.loaded() if i not in candidates]:
            found = target.metadata.find_type(full)  # also follows type forwarding (facades)
            if found:
                return target, found
        return None

    # --- the MethodTables of value types ------------------------------------------------------------

    def _struct_method_table(self, sig, image, context: list, depth: int = 0) -> int | None:
        """The MethodTable of the value type a signature names, among the MethodTables the dump shows."""
        if image is None or depth > 8:
            return None
        if sig.element == sigs.VAR:
            return context[sig.number] if sig.number < len(context) else None
        if sig.element in sigs.PRIMITIVE_NAMES:
            core = self._core_image()
            rid = core.metadata.find_type(sigs.PRIMITIVE_NAMES[sig.element]) if core is not None else None
            return self.typedef_method_table(core, rid) if rid else None
        if sig.element == sigs.VALUETYPE or sig.element == sigs.CLASS:
            if sig.token >> 24 == 0x1B:
                spec = image.metadata.type_spec(sig.token & 0xFFFFFF)
                try:
                    return self._struct_method_table(sigs.type_spec(spec), image, context, depth + 1) if spec else None
                except sigs.SignatureError:
                    return None
            where = self._resolve(image, sig.token)
            if where is None:
                return None
            return self.typedef_method_table(*where)
        if sig.element == sigs.GENERICINST:
            where = self._resolve(image, sig.token)
            if where is None:
                return None
            args = [self._struct_method_table(a, image, context, depth + 1) for a in sig.args]
            if None in args:
                return None
            hits = [m for m in self._candidates(*where) if self.names.type_arguments(m) == args]
            if not hits:
                hits = self._loaded_instantiation(*where, args)
            return hits[0] if len(hits) == 1 else None
        return None

    def _loaded_instantiation(self, image, rid: int, args: list[int]) -> list[int]:
        """The instantiation of the generic value type ``rid`` of ``image`` over ``args`` among the value
        types of the runtime's loader heaps: the exact one, else the one the runtime lays fields out with
        (reference type arguments shared as ``System.__Canon``)."""
        loaded = [m for m in self._loaded_value_types()
                  if self.names.token_of(m) == rid and self.names.image_of(m) is image]
        if not loaded:
            return []
        hits = [m for m in loaded if self.names.type_arguments(m) == args]
        if not hits:
            canon = self._canon_method_table()
            shared = [arg if self._is_value_type(self._chain(arg)) else canon for arg in args]
            if canon is None or shared == args:
                return []
            hits = [m for m in loaded if self.names.type_arguments(m) == shared]
        return [m for m in hits if self.mts.get(m) is not None]

    def _canon_method_table(self) -> int | None:
        core = self._core_image()
        rid = core.metadata.find_type("System.__Canon") if core is not None else None
        return self.typedef_method_table(core, rid) if rid else None

    def _loaded_value_types(self) -> list[int]:
        """Where a word of the runtime's loader heaps points at System.ValueType as a MethodTable's parent
        pointer does: the MethodTables of the value types the runtime loaded (not validated here)."""
        if self._value_types is not None:
            return self._value_types
        self._value_types = []
        value_type = next((m for m in self.universe() if self.names.name(m) == "System.ValueType"), None)
        if value_type is None or self.loaded is None:
            return self._value_types
        ranges = list(self.loaded())
        if not isinstance(self.spec, str) and self.spec.relative:
            # a runtime built with FEATURE_PREJIT (2.x) also finds types its NGEN images hold precompiled
            # (CoreLib's Nullable<bool>): the managed modules' memory is searched too
            ranges += [(m.base, m.end) for m in self.names.images.dump.modules]
        ptr = self.profile.pointer_size
        parent_at = self.profile.method_table.field("m_pParentMethodTable").offset
        found: set[int] = set()
        for start, end in ranges:  # read unrecorded: the MethodTables it finds are noted as they are validated
            found.update(at - parent_at for at in self._words_equal(start, end, value_type))
        self._value_types = sorted(a for a in found if a > 0 and a % ptr == 0)
        return self._value_types

    def _words_equal(self, start: int, end: int, value: int) -> list[int]:
        """The addresses of the pointer-aligned words in ``[start, end)`` that the dump holds and that are
        ``value``."""
        ptr = self.profile.pointer_size
        word = np.dtype(("<" if self.space.little_endian else ">") + ("u8" if ptr == 8 else "u4"))
        out: list[int] = []
        for at, data in self.space.iter_windows(start, end):
            head = -at % ptr
            w = np.frombuffer(data, dtype=word, count=(len(data) - head) // ptr, offset=head)
            out += [at + head + i * ptr for i in np.flatnonzero(w == value).tolist()]
        return out

    def typedef_method_table(self, image, rid: int) -> int | None:
        """The MethodTable of a non-generic TypeDef: one the dump shows, else the one its Module's map holds."""
        hits = [m for m in self._candidates(image, rid) if not self.names.type_arguments(m)]
        if len(hits) == 1:
            return hits[0]
        if hits or isinstance(self.spec, str) or not self.spec.lookup_map:
            return None
        if self._maps is None:
            from .modulemaps import TypeDefMaps

            known: dict[int, dict] = {}
            for m in self.universe():
                raw = self.mts.read_raw(m)
                if raw is not None and not raw.has_component_size and not self.names.type_arguments(m):
                    known.setdefault(self.names.module_of(m), {})[self.names.token_of(m)] = m
            known.pop(None, None)
            self._maps = TypeDefMaps(self.names, self.spec.lookup_map, known)
        mt = self._maps.method_table(self._modules.get(id(image)), rid)
        return mt if mt is not None and self.names.image_of(mt) is image else None

    def _core_image(self):
        string_mt = self.mts.string_mt
        return self.names.image_of(string_mt) if string_mt else None

    def _candidates(self, image, rid: int) -> list[int]:
        if self._index is None:
            self._index = {}
            for m in self.universe():
                img = self.names.image_of(m)
                if img is not None:
                    self._index.setdefault((id(img), self.names.token_of(m)), []).append(m)
                    self._modules.setdefault(id(img), self.names.module_of(m))
        return self._index.get((id(image), rid), [])

    def universe(self) -> list[int]:
        """Every MethodTable the dump shows: the validated ones, their parents, array element types and
        type arguments (closed over), free and array types aside."""
        seen: set[int] = set()
        todo = list(self.mts.known())
        out = []
        while todo and len(seen) < 1_000_000:
            a = todo.pop()
            if a in seen or not a or a & 2:
                continue
            seen.add(a)
            m = self.mts.get(a)
            if m is None or m.kind == "free":
                continue
            out.append(a)
            todo.append(m.parent)
            if m.kind == "array":
                raw = self.mts.read_raw(a)
                todo.append(raw.get("m_pPerInstInfo", 0) if raw is not None else 0)
            else:
                todo += self.names.type_arguments(a) or []
        return sorted(out)


def _shift(f: FieldLayout, by: int) -> FieldLayout:
    return replace(f, offset=f.offset + by)


def _sized(fields: list[FieldLayout], end: int) -> list[FieldLayout]:
    """Gives a struct of unknown size the room up to the next field (or the end of the fields)."""
    out = []
    for i, f in enumerate(fields):
        if not f.size_known:
            nxt = fields[i + 1].offset if i + 1 < len(fields) else end
            f = replace(f, size=max(0, nxt - f.offset))
        out.append(f)
    return out
