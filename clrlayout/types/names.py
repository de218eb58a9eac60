"""Type names without the DAC, as the DAC's ``GetMethodTableName`` (and so SOS ``!dumpobj``) prints them.

A MethodTable's name is its TypeDef's (token in the MethodTable, metadata of its module's image), with
``+`` between nested types, ``[[Arg, Assembly],...]`` for the arguments of a generic instantiation (from its
dictionary), ``[]``, ``[,]`` or ``[*]`` after an array's element type, and ``Free`` for the free object.
What cannot be named (no image, an unknown token, a type handle that is not a MethodTable) has no name
(``None``), never a guessed one; ``why`` says why.

The same names come in reflection's style too (``Type.ToString()``: ``List`1[System.String]``, no
assembly names), the style of a field's declared type.
"""

from __future__ import annotations

from ..runtime.methodtable import MethodTables
from ..runtime.structs import relative_target
from .images import ManagedImages

#: how deep generic arguments and array element types are followed (a bound on what a dump controls)
MAX_DEPTH = 16
#: type arguments read of one instantiation
MAX_TYPE_ARGS = 64


class TypeNames:
    """Names of MethodTables, each worked out once."""

    def __init__(self, mts: MethodTables, images: ManagedImages):
        self.mts = mts
        self.images = images
        self.space = mts.space
        self.profile = mts.profile
        self._flags = mts.profile.method_table.flags
        self._fields = mts.profile.method_table.fields
        self._names: dict[int, str | None] = {}
        self._reflection: dict[int, str | None] = {}
        self._assemblies: dict[int, str | None] = {}
        #: MethodTable -> why it has no name
        self.why: dict[int, str] = {}

    def name(self, address: int) -> str | None:
        if address not in self._names:
            why: list[str] = []
            name = self._name(address, 0, why)
            if name is None:
                self.why[address] = why[0] if why else "unreadable MethodTable"
            self._names[address] = name
        return self._names[address]

    def reflection_name(self, address: int) -> str | None:
        """The name as reflection's ``Type.ToString()`` prints it: type arguments without assemblies."""
        if address not in self._reflection:
            self._reflection[address] = self._name(address, 0, [], reflection=True)
        return self._reflection[address]

    def assembly_name(self, address: int) -> str | None:
        """The simple name of the assembly that defines the type of ``address`` (an array's: its element's)."""
        return self._assembly(address, 0, [])

    def image_of(self, address: int):
        """The managed image (with its metadata) of the module of the type at ``address``, or None."""
        raw = self._raw(address)
        return None if raw is None else self._image(self._module(raw, address), [])

    def module_of(self, address: int) -> int | None:
        """The runtime Module of the type at ``address`` (``MethodTable::GetModule``)."""
        raw = self._raw(address)
        return None if raw is None else self._module(raw, address)

    def token_of(self, address: int) -> int:
        """The TypeDef RID of the type at ``address`` (0: none)."""
        raw = self._raw(address)
        return 0 if raw is None else self._token(raw)

    def type_arguments(self, address: int) -> list[int] | None:
        """The type handles of the arguments of a generic instantiation ([] for other types; None when its
        dictionary is not in the dump)."""
        raw = self._raw(address)
        if raw is None or raw.has_component_size or not raw.m_dwFlags & self._flags["GenericsMask"]:
            return []
        return self._arg_handles(raw, [])

    # --- the pieces ---------------------------------------------------------------------------------

    def _raw(self, address: int):
        return self.mts.read_raw(address)

    def _module(self, raw, address: int) -> int | None:
        """The MethodTable's module (``MethodTable::GetModule``)."""
        if "m_pModule" in raw:
            return raw.m_pModule  # .NET 9+: every MethodTable has its module
        f = self._flags
        flags2 = raw.get("m_wFlags2", 0)
        module = raw.get("m_pLoaderModule")
        if raw.m_dwFlags & (f["HasComponentSize"] | f["GenericsMask"]) == 0:
            return module
        mt = raw
        if not raw.has_component_size:  # a generic instantiation: its canonical MethodTable's
            union = raw.m_pEEClass
            mask = self.profile.method_table.eeclass_or_canon_mask
            if union & mask:
                mt = self._raw(union & ~3)
                if mt is None:
                    return None
                flags2 = mt.get("m_wFlags2", 0)
                module = mt.get("m_pLoaderModule")
        if not flags2 & f["Flags2_HasModuleOverride"]:
            return module
        # the ModuleOverride multipurpose slot (methodtable.inl GetMultipurposeSlotOffset)
        ptr = self.profile.pointer_size
        slots = flags2 & f["Flags2_MultipurposeSlotsMask"]
        raw_index = bin(slots).count("1")
        index = 0 if (slots & 3) == 2 and raw_index == 1 else raw_index
        slot1 = self._fields["m_pPerInstInfo"].offset
        if index < 2:
            offset = slot1 + ptr * index
        else:
            offset = self.profile.method_table.size + ptr * (index - 2) + ptr * ((mt.get("m_wNumVirtuals", 0) + 7) >> 3)
        base = address if mt is raw else (raw.m_pEEClass & ~3)
        data = self.space.try_read(base + offset, ptr)
        if not data:
            return None
        value = int.from_bytes(data, "little")
        if self.profile.method_table.relative_slots:  # RelativeFixupPointer<PTR_Module> (2.x)
            value = relative_target(base + offset, value, ptr)
            if value & 1:  # FIXUP_POINTER_INDIRECTION: the slot's target holds the Module
                data = self.space.try_read(value & ~1, ptr)
                value = int.from_bytes(data, "little") if data else 0
        return value or None

    def _token(self, raw) -> int:
        if "m_dwFlags2" in raw:
            return raw.m_dwFlags2 >> self._flags["Flags2_TokenShift"]
        return raw.get("m_wToken", 0)

    def _assembly(self, address: int, depth: int, why: list) -> str | None:
        """The simple name of the assembly of the type at ``address`` (an array's is its element's)."""
        if address & 2 and self.profile.type_desc and depth < MAX_DEPTH:  # its template's or its argument's
            fields = self._type_desc(address & ~3)
            if fields is None:
                return None
            kind, template, arg = fields
            inner = template if kind in (0x14, 0x1D) else arg
            return self._assembly(inner, depth + 1, why) if inner else None
        raw = self._raw(address)
        if raw is None:
            return None
        if self._is_array(raw):
            element = raw.get("m_pPerInstInfo", 0)
            return self._assembly(element, depth + 1, why) if depth < MAX_DEPTH else None
        image = self._image(self._module(raw, address), why)
        return image.metadata.assembly_name if image is not None else None

    def _image(self, module: int | None, why: list):
        """The image of a runtime Module, or None with the reason in ``why``."""
        image = self.images.of_module(module) if module else None
        if image is None:
            why.append(self.images.failures.get(module, "module's image not found") if module else "no module")
        return image

    def _is_interface(self, raw) -> bool:
        """An interface's MethodTable: never an object's, so not one the heap's checks accept (2.x gives it
        BaseSize 0), but an array's element type or a type argument may be one."""
        f = self._flags
        return not raw.has_component_size and raw.m_dwFlags & f["Category_Mask"] == f["Category_Interface"]

    def _is_array(self, raw) -> bool:
        f = self._flags
        return raw.has_component_size and raw.m_dwFlags & f["Category_Array_Mask"] == f["Category_Array"]

    def _name(self, address: int, depth: int, why: list, reflection: bool = False) -> str | None:
        cache = self._reflection if reflection else self._names
        if address in cache:
            if cache[address] is None and address in self.why:  # the reason too, whatever the order of asking
                why.append(self.why[address])
            return cache[address]
        if depth > MAX_DEPTH:
            why.append("type nested too deep")
            return None
        if address & 2:  # a TypeDesc: an array (before .NET 5) by its MethodTable, a pointer or by-ref by its type
            return self._type_desc_name(address & ~3, depth, why, reflection)
        mt = self.mts.get(address)
        raw = self._raw(address)
        if raw is None or (mt is None and not self._is_interface(raw)):
            why.append("unreadable MethodTable")
            return None
        if mt is not None and mt.kind == "free":
            return "Free"
        if self._is_array(raw):
            element = self._name(raw.get("m_pPerInstInfo", 0), depth + 1, why, reflection)
            if element is None:
                return None
            f = self._flags
            if raw.m_dwFlags & f["Category_IfArrayThenSzArray"]:
                return element + "[]"
            rank = (raw.m_BaseSize - 3 * self.profile.pointer_size) // 8
            return element + ("[*]" if rank == 1 else "[" + "," * (rank - 1) + "]")
        image = self._image(self._module(raw, address), why)
        if image is None:
            return None
        token = self._token(raw)
        name = image.metadata.type_name(token) if token else None
        if name is None:
            why.append("TypeDef token not in the metadata")
            return None
        if raw.m_dwFlags & self._flags["GenericsMask"] and not raw.has_component_size:
            args = self._type_args(raw, depth, why, reflection)
            if args is None:
                return None
            if args and reflection:
                name += "[" + ",".join(args) + "]"
            elif args:
                name += "[" + ",".join(f"[{a}]" for a in args) + "]"
        return name

    def _type_desc(self, address: int) -> tuple[int, int, int] | None:
        """A ParamTypeDesc's kind (CorElementType), template MethodTable and argument type handle."""
        spec = self.profile.type_desc
        ptr = self.profile.pointer_size
        data = self.space.try_read(address, ptr * 3) if spec else None
        if data is None:
            return None
        kind = int.from_bytes(data[:4], "little") & spec["kind_mask"]
        at = spec["template_method_table"] * ptr
        template = int.from_bytes(data[at : at + ptr], "little")
        if spec.get("template_relative"):  # a self-relative pointer (2.x)
            template = relative_target(address + at, template, ptr)
        arg = int.from_bytes(data[spec["argument"] * ptr :][:ptr], "little")
        return kind, template, arg

    def _type_desc_name(self, address: int, depth: int, why: list, reflection: bool) -> str | None:
        fields = self._type_desc(address)
        if fields is None:
            why.append("type argument that is not a MethodTable")
            return None
        kind, template, arg = fields
        if kind in (0x14, 0x1D) and template:  # ARRAY, SZARRAY: the array's MethodTable names it
            return self._name(template, depth + 1, why, reflection)
        if kind in (0x0F, 0x10) and arg:  # PTR, BYREF
            inner = self._name(arg, depth + 1, why, reflection)
            return None if inner is None else inner + ("*" if kind == 0x0F else "&")
        why.append("type argument that is not a MethodTable")
        return None

    def _type_args(self, raw, depth: int, why: list, reflection: bool = False) -> list[str] | None:
        """``Name, Assembly`` of each type argument of an instantiation (``Name`` in reflection's style)."""
        handles = self._arg_handles(raw, why)
        if handles is None:
            return None
        out = []
        for th in handles:
            name = self._name(th, depth + 1, why, reflection)
            if name is not None and reflection:
                out.append(name)
                continue
            assembly = self._assembly(th, depth + 1, why) if name is not None else None
            if name is None or assembly is None:
                return None
            out.append(f"{name}, {assembly}")
        return out

    def _arg_handles(self, raw, why: list) -> list[int] | None:
        """The argument type handles of an instantiation, from its dictionary: the last of its dictionaries
        (PerInstInfo[NumDicts - 1]) starts with them."""
        ptr = self.profile.pointer_size
        if not raw.get("m_wFlags2", raw.get("m_dwFlags2", 0)) & self._flags["Flags2_HasPerInstInfo"]:
            return []
        per_inst = raw.m_pPerInstInfo
        info = self.space.try_read(per_inst - ptr, ptr) if per_inst else None
        if info is None:
            why.append("generic dictionary not in the dump")
            return None
        num_dicts = int.from_bytes(info[ptr - 4 : ptr - 2], "little")
        num_args = int.from_bytes(info[ptr - 2 : ptr], "little")
        if not 1 <= num_dicts <= 1024 or not 1 <= num_args <= MAX_TYPE_ARGS:
            why.append("implausible generic dictionary")
            return None
        dictionary = self.space.try_read(per_inst + ptr * (num_dicts - 1), ptr)
        handles = self.space.try_read(int.from_bytes(dictionary, "little"), ptr * num_args) if dictionary else None
        if handles is None:
            why.append("generic dictionary not in the dump")
            return None
        return [int.from_bytes(handles[k * ptr : (k + 1) * ptr], "little") for k in range(num_args)]
