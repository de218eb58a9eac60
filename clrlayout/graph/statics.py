"""Static fields: where each type's statics live, their values, and the name of the static that a slot of a statics
array is (what ``roots`` shows instead of ``System.Object[] .[912]``, and ``type`` lists as SOS's ``!dumpclass``).

A type's static fields are at offsets (its FieldDescs') from two bases: its GC statics (references, and value-type
statics boxed: slots of a pinned ``object[]`` the runtime shares among types) and its non-GC statics (primitives).

- .NET 9 and later: the bases are in the ``DynamicStaticsInfo`` just below the type's ``MethodTableAuxiliaryData``,
  as the runtime's contract descriptor says (``DynamicStaticsInfo``: ``GCStatics``, ``NonGCStatics``; the
  ``StaticsPointerMask`` global clears the flag bit).
- Before (.NET Core 2.x-8): a non-generic type's statics are its module's, in the ``DomainLocalModule`` the runtime
  ``Module`` points at: the non-GC statics from the DomainLocalModule's own address, the GC statics from the slot
  of a shared ``object[]`` that its ``m_pGCStatics`` points at.  Where the Module keeps that pointer and where the
  DomainLocalModule keeps ``m_pGCStatics`` change with the version: they are found by what they hold (every GC
  static of the module's known types holds null or an object of the field's type), as the TypeDef maps are.
  Generic instantiations and collectible types keep their statics elsewhere (dynamic entries): not named.

Thread statics: .NET 9 and later, each thread's thread-statics ``object[]`` (found through the contract descriptor)
holds one ``object[]`` per type, at the type's TLS index.  Before, each thread's ``ThreadLocalModule`` of a module
holds a strong handle to an ``object[]`` of that module's GC thread statics (threadstatics.h: ``m_pGCStatics``), at
the FieldDescs' offsets from its data.  Whose module an array is, is found by what it holds, as for the
DomainLocalModule: every object in it at a known thread static's offset and of that field's type, one at least,
and no other module's fields fitting as well.  The thread is not known there (the runtime's Thread is not read
before .NET 9).
"""

from __future__ import annotations

from dataclasses import dataclass

#: bytes of a runtime Module searched for its DomainLocalModule pointer, and of a DomainLocalModule for m_pGCStatics
MODULE_SEARCH = 0x800
#: (only the DomainLocalModule's header: past it lie its classes' flags and non-GC statics, values that a redacted
#: copy of the dump must not keep because they were read)
DLM_SEARCH = 0x30
#: modules whose statics are tried before the search gives up
MAX_MODULES_TRIED = 6


@dataclass(frozen=True)
class StaticValue:
    """One static field of a type and where its value is (None: the dump does not say)."""

    field: object  #: the :class:`~clrlayout.types.layouts.FieldLayout`
    address: int | None
    data: bytes | None
    #: a GC thread static's value on each thread whose statics hold it: (thread's OS id or None where the runtime
    #: does not say, the slot's address, its bytes)
    per_thread: tuple = ()


class Statics:
    """``space``: the dump's memory; ``layouts``: TypeLayouts; ``module_of(mt)``; ``contract``: the runtime's contract
    descriptor (a string when there is none); ``array_at(address)``: (start, MethodTable, length) of the heap
    object that holds an address, or None; ``object_mt(address)``: the MethodTable of the object that starts
    there, or None; ``is_a(mt, field)``: whether an object of ``mt`` fits the field (None: the dump cannot tell, an
    interface say)."""

    def __init__(self, space, layouts, module_of, contract, array_at, object_mt, is_a, known_types, is_object_array,
                 handle_objects=lambda: ()):
        self.space, self.layouts, self.module_of = space, layouts, module_of
        self.handle_objects = handle_objects  #: the objects the strong handles hold (before .NET 9: thread statics)
        self.is_object_array = is_object_array  #: whether a MethodTable is System.Object[]'s
        self.contract = contract
        self.array_at, self.object_mt, self.is_a = array_at, object_mt, is_a
        self.known_types = known_types  #: the MethodTables to learn the DomainLocalModule's shape from
        self.ptr = space.pointer_size
        self._offsets: tuple[int, int] | bool | None = False  # (in the Module, in the DomainLocalModule)
        self._named: dict[int, tuple[int, object] | None] = {}
        self._by_base: dict[int, list[int]] | None = None
        self._thread_map: dict | None = None
        self._by_type: dict | None = None
        self._thread_arrays: set | None = None
        #: where the GC statics' bases are kept between runs (:class:`~.index.Note`: load() and save()), or None
        self.note = None

    # --- the bases -------------------------------------------------------------------------------------------

    def bases(self, mt: int) -> tuple[int | None, int | None]:
        """(GC statics, non-GC statics) base of the type, None where it is not known."""
        c = self.contract
        if not isinstance(c, str) and "DynamicStaticsInfo" in c.types \
                and "AuxiliaryData" in c.types.get("MethodTable", {}):
            info = c.types["DynamicStaticsInfo"]
            aux = self.space.try_read_pointer(mt + c.types["MethodTable"]["AuxiliaryData"])
            if not aux:
                return None, None
            mask = c.globals.get("StaticsPointerMask", ~1) & ((1 << 8 * self.ptr) - 1)
            at = aux - info["!"]
            gc, nongc = (self.space.try_read_pointer(at + info[k]) for k in ("GCStatics", "NonGCStatics"))
            return ((gc & mask or None) if gc is not None else None,
                    (nongc & mask or None) if nongc is not None else None)
        module = self.module_of(mt)
        offsets = self._dlm_offsets()
        if module is None or not offsets:
            return None, None
        dlm = self.space.try_read_pointer(module + offsets[0])
        gc = self.space.try_read_pointer(dlm + offsets[1]) if dlm else None
        return gc or None, dlm or None

    def _dlm_offsets(self) -> tuple[int, int] | None:
        """Where the Module keeps its DomainLocalModule and where that keeps m_pGCStatics: the first pair for which
        every GC static of the known types' modules holds null or an object of its type, one at least an object."""
        if self._offsets is False and self.note is not None:
            self._noted()
        if self._offsets is not False:
            return self._offsets
        self._offsets = None
        by_module: dict[int, list] = {}
        for mt in self.known_types():
            module = self.module_of(mt)
            if module and not self.layouts.names.type_arguments(mt):
                by_module.setdefault(module, []).append(mt)
        tried = 0
        # the modules with the fewest types first (the application's): only their types are laid out
        for module, mts in sorted(by_module.items(), key=lambda kv: (len(kv[1]), kv[0])):
            fields = [f for mt in mts for f in (getattr(self.layouts.layout(mt), "statics", None) or ())
                      if f.storage == "gc"]
            if not fields:
                continue
            found = self._search(module, fields)
            if found is not None:
                self._offsets = found
                break
            tried += 1
            if tried >= MAX_MODULES_TRIED:
                break
        return self._offsets

    def _search(self, module: int, fields: list) -> tuple[int, int] | None:
        ptr, space = self.ptr, self.space
        end, o1 = MODULE_SEARCH, -ptr
        while o1 + 2 * ptr <= end:  # a word at a time, never into what the Module points at just past itself (the
            o1 += ptr  # DomainLocalModule follows it: its statics are values a redacted copy must not keep)
            dlm = space.try_read_pointer(module + o1)
            if dlm is None:
                break
            if module < dlm < module + end:
                end = dlm - module
            if dlm <= 0xFFFF or dlm % ptr:
                continue
            for o2 in range(0, DLM_SEARCH, ptr):  # a word at a time: no more of it read than needed
                base = space.try_read_pointer(dlm + o2)
                if base is None:
                    break
                if base > 0xFFFF and base % ptr == 0 and self._holds(base, fields):
                    return o1, o2
        return None

    def _holds(self, base: int, fields: list) -> bool:
        """Whether from ``base`` each field's slot holds null or an object of its type (one object at least, of the
        field's own class): the evidence that ``base`` is where the module's GC statics begin."""
        objects = 0
        for f in fields:
            slot = base + f.offset
            value = self.space.try_read_pointer(slot)
            if value:
                mt = self.object_mt(value)
                fits = self.is_a(mt, f) if mt is not None else False
                if fits is False:
                    return False
                objects += fits is True
        return objects > 0

    # --- values and names -----------------------------------------------------------------------------------

    def values(self, mt: int) -> list[StaticValue]:
        """Each static field of the type with where its value is: GC ones (a reference, a boxed struct's reference)
        and non-GC ones (the primitive's bytes); thread-local and RVA statics have no single place (None)."""
        lay = self.layouts.layout(mt)
        if lay is None:
            return []
        gc, nongc = self.bases(mt) if any(f.storage in ("gc", "nongc") for f in lay.statics) else (None, None)
        out = []
        threads = self._per_thread(mt) if any(f.storage == "thread" for f in lay.statics) else {}
        for f in lay.statics:
            base = gc if f.storage == "gc" else nongc if f.storage == "nongc" else None
            if base is None:
                out.append(StaticValue(f, None, None, tuple(
                    (tid, slot, self.space.try_read(slot, self.ptr)) for tid, slot in threads.get(f.name, ()))))
                continue
            size = self.ptr if f.storage == "gc" else f.size
            out.append(StaticValue(f, base + f.offset, self.space.try_read(base + f.offset, size)))
        return out

    def slot(self, address: int, array=None) -> tuple[int, object] | None:
        """(MethodTable, FieldLayout) of the GC static whose slot is at ``address``, or None.  Only the types whose
        GC statics begin in the same object[] (``array``: its start, MethodTable and length, when known) at or
        below the address are looked at, nearest first."""
        if address in self._named:
            return self._named[address]
        found = None
        array = array or self.array_at(address)
        if array is not None and self.is_object_array(array[1]):  # statics live in the runtime's object[]s
            start = array[0]
            end = start + 2 * self.ptr + array[2] * self.ptr
            near = sorted(((b, mts) for b, mts in self._gc_bases().items() if start < b <= address < end),
                          key=lambda bm: -bm[0])
            for _, mts in near:
                for mt in mts:
                    for v in self.values(mt):
                        if v.field.storage == "gc" and v.address == address:
                            found = (mt, v.field)
                            break
                    if found:
                        break
                if found:
                    break
        self._named[address] = found
        return found

    def thread_slot(self, address: int) -> tuple[int, object | None, int | None] | None:
        """(MethodTable, FieldLayout, thread) of the GC thread static whose slot is at ``address``.  .NET 9+: a slot
        of a thread's thread-statics object[] is a type's (its field None: the type's own object[] of them), a slot
        of that object[] a field's.  Before: a slot of a module's object[] of a thread's statics, the thread None
        (not known).  None: no thread static is there."""
        if self._thread_map is None:
            if self._thread_arrays is None:  # cheap: the threads' arrays and their elements, not the types' layouts
                self._thread_arrays = self._tls_arrays()
            array = self.array_at(address) if self._thread_arrays else None
            if array is None or array[0] not in self._thread_arrays:
                return None
        return self._thread_slots().get(address)

    def _thread_slots(self) -> dict:
        """Slot -> (MethodTable, FieldLayout or None, thread) of every GC thread static, made once."""
        if self._thread_map is None:
            self._thread_map = self._thread_statics()
        return self._thread_map

    def _per_thread(self, mt: int) -> dict[str, list[tuple[int | None, int]]]:
        """Field name -> (thread, slot) of each of the type's GC thread statics, on every thread that has them."""
        if self._by_type is None:  # the slots grouped by type once
            self._by_type = {}
            for slot, (owner, f, tid) in sorted(self._thread_slots().items()):
                if f is not None:
                    self._by_type.setdefault(owner, {}).setdefault(f.name, []).append((tid, slot))
        return self._by_type.get(mt, {})

    def read_all(self, values: bool = True) -> None:
        """Read everything :meth:`values`, :meth:`slot` and :meth:`thread_slot` may read (what a trimmed dump must
        keep to answer as the original); ``values``: the primitives' values too (not for a redacted copy)."""
        for mt in self.all_types():
            self.layouts.layout(mt)  # the fields' offsets and types: structure
            if values:
                self.values(mt)
            else:
                self.bases(mt)
        self._thread_statics()

    def _tls_arrays(self) -> set:
        """The start of each thread's thread-statics object[] and of each object[] it holds (.NET 9+); before,
        of each object[] a strong handle holds that is no module's regular statics."""
        from .roots import thread_static_arrays

        c = self.contract
        if isinstance(c, str) or "ThreadStaticsInfo" not in c.types:
            return self._handle_arrays()
        out = set()
        for root in thread_static_arrays(self.space, c) or []:
            out.add(root.object)
            length = self.space.try_read(root.object + self.ptr, 4)
            count = min(int.from_bytes(length, "little"), 1 << 16) if length else 0
            data = self.space.try_read(root.object + 2 * self.ptr, count * self.ptr) or b""
            out.update(int.from_bytes(data[i:i + self.ptr], "little") for i in range(0, len(data), self.ptr))
        out.discard(0)
        return out

    def _thread_statics(self) -> dict:
        from .roots import thread_static_arrays

        c, space, ptr = self.contract, self.space, self.ptr
        if isinstance(c, str) or "ThreadStaticsInfo" not in c.types:
            return self._module_thread_statics()
        if "AuxiliaryData" not in c.types.get("MethodTable", {}):
            return {}
        info = c.types["ThreadStaticsInfo"]
        by_index: dict[int, tuple[int, list]] = {}
        for mt in self.all_types():
            lay = self.layouts.layout(mt)
            fields = [f for f in (lay.statics if lay is not None else ()) if f.storage == "thread"
                      and f.kind in ("reference", "struct")]
            aux = space.try_read_pointer(mt + c.types["MethodTable"]["AuxiliaryData"]) if fields else None
            index = space.try_read(aux - info["!"] + info["GCTlsIndex"], 4) if aux else None
            if index is not None and int.from_bytes(index, "little") >> 24 == 0:  # a non-collectible type's
                by_index[int.from_bytes(index, "little")] = (mt, fields)
        # a TLS index counts slots the non-collectible array does not hold (the runtime's own first ones)
        unused = c.globals.get("NumberOfTlsOffsetsNotUsedInNoncollectibleArray", 0)
        by_index = {index - unused: v for index, v in by_index.items() if index >= unused}
        out: dict = {}
        for root in thread_static_arrays(space, c) or []:
            length = space.try_read(root.object + ptr, 4)
            count = int.from_bytes(length, "little") if length else 0
            for index, (mt, fields) in by_index.items():
                if index >= count:
                    continue
                slot = root.object + 2 * ptr + index * ptr
                out[slot] = (mt, None, root.thread)
                own = space.try_read_pointer(slot)
                for f in fields if own else ():
                    out[own + f.offset] = (mt, f, root.thread)  # offsets count from the array object
        return out

    def _handle_arrays(self) -> set:
        regular = self.arrays()
        out = set()
        for obj in dict.fromkeys(self.handle_objects()):
            mt = self.object_mt(obj)
            if mt is not None and obj not in regular and self.is_object_array(mt):
                out.add(obj)
        return out

    def _module_thread_statics(self) -> dict:
        """Slot -> (MethodTable, FieldLayout, None) of every GC thread static in the object[]s of the threads'
        ThreadLocalModules (before .NET 9), each array given to the one module whose fields its objects fit."""
        space, ptr = self.space, self.ptr
        by_module: dict[int, dict[int, tuple[int, object]]] = {}
        for mt in self.all_types():
            lay = self.layouts.layout(mt)
            module = self.module_of(mt)
            if lay is None or not module or self.layouts.names.type_arguments(mt):
                continue
            for f in lay.statics:
                if f.storage == "thread" and f.kind in ("reference", "struct") and f.offset % ptr == 0:
                    by_module.setdefault(module, {})[f.offset // ptr] = (mt, f)
        out: dict = {}
        for start in sorted(self._tls_arrays()):
            length = space.try_read(start + ptr, 4)
            count = min(int.from_bytes(length, "little"), 1 << 16) if length else 0
            data = space.try_read(start + 2 * ptr, count * ptr) or b""
            words = [int.from_bytes(data[i:i + ptr], "little") for i in range(0, len(data), ptr)]
            held = {i for i, word in enumerate(words) if word}
            # the module whose thread statics' slots hold every object of the array, each of its field's type
            fitting = [fields for fields in by_module.values() if max(fields) < len(words) and held <= fields.keys()
                       and self._holds(start + 2 * ptr, [f for _, f in fields.values()])]
            if len(fitting) == 1:
                for index, (mt, f) in fitting[0].items():
                    out[start + 2 * ptr + index * ptr] = (mt, f, None)
        return out

    def _gc_bases(self) -> dict[int, list[int]]:
        """GC statics base -> the types whose statics begin there (a module's types share one before .NET 9)."""
        if self._by_base is None and self.note is not None:
            self._noted()
        if self._by_base is None:
            self._by_base = {}
            for mt in self.all_types():
                gc, _ = self.bases(mt)
                if gc:
                    self._by_base.setdefault(gc, []).append(mt)
            if self.note is not None:
                self.note.save({"bases": sorted(self._by_base.items()), "offsets": self._offsets})
        return self._by_base

    def _noted(self) -> None:
        """The bases and the DomainLocalModule's offsets as a run before found them (the note of the dump's index)."""
        kept = self.note.load() if self.note is not None else None
        if not isinstance(kept, dict):
            return
        bases, offsets = kept.get("bases"), kept.get("offsets", False)
        if isinstance(bases, list) and all(isinstance(b, int) and isinstance(m, list) for b, m in bases) and (
                offsets is None or offsets is False or (isinstance(offsets, list) and len(offsets) == 2)):
            self._by_base = {b: [int(mt) for mt in m] for b, m in bases}
            self._offsets = tuple(offsets) if isinstance(offsets, list) else offsets

    def arrays(self) -> set[int]:
        """The start of each object[] the GC statics are kept in (a module's before .NET 9, a type's after): the
        runtime's containers of static fields, which a leak report looks through (Eclipse MAT's class statics)."""
        out = set()
        for base in self._gc_bases():
            array = self.array_at(base)
            if array is not None and self.is_object_array(array[1]):
                out.add(array[0])
        return out

    def all_types(self) -> list[int]:
        """The MethodTables of every non-generic TypeDef of the modules of the known types (loaded: in their
        Module's map), instances or not."""
        out = set(self.known_types())
        names = self.layouts.names
        for mt in out:  # the images of the known types' modules, read if they were not yet
            names.image_of(mt)
        for image in names.images.loaded():
            for rid in range(2, image.metadata.type_count + 1):  # RID 1 is <Module>
                mt = self.layouts.typedef_method_table(image, rid)
                if mt is not None:
                    out.add(mt)
        return sorted(out)
