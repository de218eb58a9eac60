"""The runtime's memory beside the heap (loader heaps, GC bookkeeping, handle tables) and the object graph."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..errors import RootsNotFound

if TYPE_CHECKING:
    from ..graph.statics import Statics
    from ..runtime.loaderheaps import LoaderHeaps
from ..util.allocator import release_freed
from .state import UNSET


class RuntimeMemory:
    """The runtime's memory beside the heap (loader heaps, GC bookkeeping, handle tables) and the object graph. (a
    part of :class:`~clrlayout.session.Session`)."""

    def loader_heaps(self) -> LoaderHeaps:
        """The runtime's loader heaps (:mod:`clrlayout.runtime.loaderheaps`): their block records searched in
        all the dump's memory but the GC heap and the images, the heaps that hold them in all but the GC heap;
        looked for once."""
        if self._loader_heaps is None:
            from ..runtime.loaderheaps import find_loader_heaps

            d = self.dump
            segments = self.heap.segments if self.heap.exact else []
            gc = [(seg.start, max(seg.end, seg.committed or 0)) for seg in segments]
            paths = {m.path for m in d.modules}
            images = [(m.start, m.end) for m in d.file_mappings if m.path in paths] if d.file_mappings \
                else [(m.base, m.end) for m in d.modules]
            self._loader_heaps = find_loader_heaps(d.memory, gc, images)
            if self._loader_heaps.problem:
                self.warnings.append(self._loader_heaps.problem)
        return self._loader_heaps

    def gc_bookkeeping(self) -> list[tuple[int, int]]:
        """``(start, end)`` of the GC's bookkeeping reservations (card table, brick table, mark array, region
        map; .NET 8+, :mod:`clrlayout.heap.bookkeeping`)."""
        from ..heap.bookkeeping import gc_bookkeeping

        return gc_bookkeeping(self.dump, self.heap.dac_vars, self.runtime.module)

    def gc_handle_tables(self) -> list[tuple[int, int]]:
        """``(start, end)`` of the GC's handle table segments (.NET 6+, :mod:`clrlayout.heap.handletables`)."""
        from ..heap.handletables import handle_table_segments

        return [(lo, hi) for lo, hi, _ in handle_table_segments(self.dump, self.heap.dac_vars)]

    def not_stacks(self) -> list[tuple[int, int]]:
        """``(start, end)`` of memory known to be no thread's stack, found without a search: the GC's bookkeeping
        and handle tables, and the modules (a stack scanned ends where one begins)."""
        known = self.gc_bookkeeping() + self.gc_handle_tables()
        return known + [(m.base, m.base + m.size) for m in self.dump.modules if m.size]

    def object_graph(self, kinds=("handles", "finalizer", "stacks", "statics"), exclusive: bool = False):
        """The heap's object graph with the roots of ``kinds`` (:class:`~clrlayout.graph.objectgraph.ObjectGraph`:
        references, reachability, dominators), built once per set of kinds (exact walk only). ``exclusive``: the
        caller's alone, the session keeps none of it, so that it may free the references once its dominator tree
        is made (``ObjectGraph.dominators(release=True)``: what a whole-heap ``retained`` needs, in less memory)."""
        from ..dump.redaction import describe
        from ..graph.build import build_graph
        from ..graph.objectgraph import ObjectGraph
        from ..graph.roots import ROOT_KINDS, find_roots

        self.require_exact("the object graph")
        key = tuple(sorted(kinds))
        mark = self.dump.redaction
        if mark is not None and mark.get("stacks") != "kept" and "stacks" in key:
            others = ",".join(k for k in ROOT_KINDS if k != "stacks")
            raise self._because(RootsNotFound(
                f"this dump was {describe(mark)}: it has no stack roots, and an answer without them would call "
                f"objects only a stack holds dead; choose the roots it still has, roots={others} (or redact the "
                f"original with keep_stacks=True)"))
        cache = self._graphs
        # the caller's alone only when its heap graph is made for it: one made before may be held elsewhere
        exclusive = exclusive and self._heap_graph is None
        if key not in cache:
            if self._heap_graph is None:
                self.string_method_table()
                self._heap_graph = self._indexed_graph(build_graph)
                self._walked_types = True  # the walk met every MethodTable of the heap: naming need not walk again
                if self._heap_graph.bad_count:
                    self.warnings.append(f"{self._heap_graph.bad_count:,} references point neither to null nor to "
                                         "the start of an object (heap corruption, or memory the dump lacks); they "
                                         "are left out of the graph")
            roots = find_roots(self.dump, self.heap.dac_vars, self._heap_graph, key, self._statics_contract(),
                               self.heap.segments, self.not_stacks(),
                               self._precise_stacks() if "stacks" in key else None)
            self.warnings += roots.notes
            if roots.problems:  # an answer without a kind of roots asked for would call live objects dead
                others = ",".join(k for k in ROOT_KINDS
                                  if k in key and not any(p.startswith(k[:6]) for p in roots.problems))
                raise self._because(RootsNotFound("; ".join(roots.problems) + (
                    f" (the other roots: roots={others})" if others else "")))
            if self._allocators is UNSET:
                self._allocators = self.loader_allocators(self._heap_graph)
            og = ObjectGraph(self._heap_graph, roots, key, self._allocators, exclusive)
            where = self._graph_index_path
            if where is not None:  # what is computed from it kept beside the graph's index (graph.index.Layers)
                from ..graph.index import Layers

                og.layers = Layers(where, og.roots_key, og.graph.count, og.edge_count, self.warnings.append)
            cache[key] = og
        if exclusive:  # the graph is the caller's alone: the session forgets it (a later call builds it again)
            self._heap_graph = None
            self._graphs = {}
            return cache.pop(key)
        return cache[key]

    def _indexed_graph(self, build_graph, always: bool = False):
        """The heap graph from the dump's index when there is a usable one, else built by a walk of the heap
        (and written to the index when the walk reported nothing)."""
        import os

        from ..graph.build import HeapGraph
        from ..graph.index import GraphIndex
        from ..graph.references import GcDescs

        index = None
        if self.graph_index is not False and os.path.isfile(self.dump.path):
            try:
                index = GraphIndex(self.dump.path, self.graph_index, self._index_reader())  # type: ignore[arg-type]
            except OSError:
                index = None
        found = index.load() if index is not None else None
        if index is not None and index.rejected:
            self.warnings.append(index.rejected)
        if found is not None:
            self.index_status = "loaded"
            self._graph_index_path = index.path
            arrays, extra = found
            for mt in arrays["types"].tolist() + list(extra.get("method_tables", [])):  # what the walk met
                self.mts.get(int(mt))  # (free space's MethodTable among them: no node has it)
            return HeapGraph(**arrays, descs=GcDescs(self.dump.memory, self.mts))
        before = (self.findings.count, len(self.warnings))
        graph = build_graph(self.heap_steps().windows(), self.mts, self.dump.memory)
        release_freed()  # the walk's and the windows' scratch
        from ..graph.index import MIN_NODES

        clean = not graph.bad_count and (self.findings.count, len(self.warnings)) == before
        self.index_status = "none" if index is None else "anomalies" if not clean else "small"
        if index is not None and clean and (always or self.graph_index is not None or graph.count >= MIN_NODES):
            self.index_status = "written" if index.save({name: getattr(graph, name) for name in (
                "addresses", "kinds", "types", "aligned", "indptr", "indices")},
                {"method_tables": sorted(self.mts.known())}) else "unwritable"
            if self.index_status == "written":
                self._graph_index_path = index.path
        return graph

    def _index_reader(self) -> str:
        """What the heap graph depends on besides the dump: clrlayout's version, the profile, ``--mt``."""
        from .. import __version__

        return f"{__version__} {self.profile.name} {self.mt_override}"

    def build_index(self) -> tuple[str, bool, str | None]:
        """The heap graph built and written to the dump's index (``clrlayout index``): (the index's directory,
        whether it was written now, why there is none: None when it is there)."""
        from ..graph.build import build_graph
        from ..graph.index import GraphIndex

        if self.graph_index is False:
            raise ValueError("no index: the session was opened with index=False")
        self.require_exact("the object graph")
        self.string_method_table()
        where = GraphIndex(self.dump.path, self.graph_index, self._index_reader()).path  # type: ignore[arg-type]
        self._heap_graph = self._indexed_graph(build_graph, always=True)
        self._walked_types = True
        why = {"anomalies": "the heap walk reported anomalies: a dump with findings is walked again by each command, "
                            "never indexed",
               "unwritable": f"{where.parent} cannot be written"}.get(self.index_status)
        return str(where), self.index_status == "written", why

    def statics(self) -> Statics:
        """Where each type's static fields live (:class:`~clrlayout.graph.statics.Statics`), made once."""
        if self._statics is None:
            from ..graph.statics import Statics

            ptr = self.profile.pointer_size

            def object_of(address: int):  # (start, MethodTable) of the object that holds it: the graph's, when made
                graph = self._heap_graph
                if graph is not None:
                    node = graph.containing(address)
                    return None if node is None else (int(graph.addresses[node]), graph.method_table(node))
                o = self.object_at(address)
                return None if o is None or o.is_free else (o.address, o.method_table)

            def array_at(address: int):
                found = object_of(address)
                record = self.mts.get(found[1]) if found is not None else None
                if record is None or record.kind != "array" or address < found[0] + 2 * ptr:
                    return None
                length = self.dump.memory.try_read(found[0] + ptr, 4)
                return None if length is None else (found[0], found[1], int.from_bytes(length, "little"))

            def object_mt(address: int):  # the MethodTable an object there has, if one that validates
                word = self.dump.memory.try_read_pointer(address)
                mt = word & ~3 if word else 0
                return mt if mt and self.mts.get(mt) is not None else None

            def is_a(mt: int, field) -> bool:
                chain, at = [], mt
                for _ in range(64):
                    if not at:
                        break
                    chain.append(self.type_name(at))
                    record = self.mts.get(at)
                    at = record.parent if record is not None else 0
                if field.kind == "struct":
                    return chain[0] == field.type
                # a declared type that is no class of the chain: an interface, or one this dump cannot name (None:
                # no evidence either way)
                return True if field.type in chain else None

            def handle_objects():
                from ..graph.handles import read_handles

                handles, _ = read_handles(self.dump, self.heap.dac_vars)
                return [h.object for h in handles or () if h.strong]

            self._statics = Statics(self.dump.memory, self.layouts, self.names.module_of, self.contract, array_at,
                                    object_mt, is_a, self.layouts.universe,
                                    lambda mt: self.type_name(mt) == "System.Object[]", handle_objects)
            self._statics.note = self._IndexNote(self, "statics")
        return self._statics

    class _IndexNote:
        """A note kept beside the dump's index (:class:`~clrlayout.graph.index.Note`) once the session has one:
        none before its heap graph is loaded or written."""

        def __init__(self, session: RuntimeMemory, name: str):
            self.session, self.name = session, name

        def _note(self):
            import hashlib

            from ..graph.index import Note

            where = self.session._graph_index_path
            if where is None:
                return None
            folders = hashlib.sha256("\0".join(self.session.assemblies).encode()).hexdigest()[:16]
            return Note(where, f"{self.name}-{folders}", self.session.warnings.append)

        def load(self):
            note = self._note()
            return note.load() if note is not None else None

        def save(self, value, replace: bool = False) -> bool:
            note = self._note()
            return note.save(value, replace) if note is not None else False

    def reference_fields(self, og, src: int, dst: int) -> list[str]:
        """How node ``src`` of the object graph ``og`` references node ``dst``: the name of each of its slots that
        holds it (a field, ``[i]``, ``[i].field``), then what else makes it an edge (a dependent handle, a
        collectible type's LoaderAllocator) by name.  The slots' names are kept in a note of the dump's index
        (naming them lays out the type, reading its module's metadata)."""
        graph = og.graph
        address = int(graph.addresses[src])
        key = f"{address:x}-{int(graph.addresses[dst]):x}"
        kept = self.kept_answers("slot-names")
        if kept is not None and key in kept:
            return kept[key] + og.unslotted(src, dst)
        said = len(self.warnings)
        names = self._slot_names(graph, src, dst)
        if len(self.warnings) == said:  # (what warned is named again, and warns again)
            self.keep_answer("slot-names", key, names)
        return names + og.unslotted(src, dst)

    def _slot_names(self, graph, src: int, dst: int) -> list[str]:
        from ..graph.slots import slot_name

        slots = [slot for slot, target in graph.reference_slots(src) if target == dst]
        if not slots:
            return []
        address, mt = int(graph.addresses[src]), graph.method_table(src)
        record = self.mts.get(mt)
        layout = self.type_layout(mt) if self.profile.method_table is not None else None
        element = self.array_element(mt) if record is not None and record.component_size else None
        names = [self._static_name(slot) or
                 slot_name(slot - address, record.component_size if record else 0,
                           (record.base_size - self.profile.object.header_size) if record else 0,
                           layout.fields if layout is not None else (), element[3] if element else ())
                 for slot in slots]
        return names

    def static_holders(self, addresses, arrays) -> dict[int, str]:
        """Object address -> ``Type.Field`` for each of ``addresses`` that a static field holds, looked for
        in the object[]s ``arrays`` (the handles' objects: the runtime's statics arrays among them)."""
        import numpy as np

        ptr, space = self.profile.pointer_size, self.dump.memory
        wanted = np.array(sorted(set(addresses)), dtype=np.uint64)
        out: dict[int, str] = {}
        for start in dict.fromkeys(arrays):
            mt = (space.try_read_pointer(start) or 0) & ~3
            record = self.mts.get(mt)
            length = space.try_read(start + ptr, 4)
            if record is None or record.kind != "array" or record.component_size != ptr or length is None:
                continue
            count = int.from_bytes(length, "little")
            words = np.frombuffer(space.read_available(start + 2 * ptr, count * ptr), dtype=f"<u{ptr}")
            for i in np.flatnonzero(np.isin(words, wanted)).tolist():
                name = self._static_name(start + 2 * ptr + i * ptr, (start, mt, count))
                if name:  # ``Type.Field``, a thread static's with what says so: ``Type.Field (thread static)``
                    out.setdefault(int(words[i]), name.removesuffix(" (static)"))
        return out

    def _static_name(self, slot: int, array=None) -> str | None:
        """``Type.Field (static)`` when the slot of an object[] is a static field's (the runtime's statics arrays);
        ``array``: (start, MethodTable, length) of the array, when known.  Each slot is named once per dump (a
        note of its index: naming lays out the types whose statics share the array, reading their metadata)."""
        kept = self.kept_answers("static-names")
        if kept is not None and str(slot) in kept:
            return kept[str(slot)]
        said = len(self.warnings)
        name = self._static_name_of(slot, array)
        if len(self.warnings) == said:  # (what warned is named again, and warns again)
            self.keep_answer("static-names", str(slot), name)
        return name

    def kept_answers(self, kind: str) -> dict | None:
        """The answers of one kind (a name per slot, per type, per reference...) that commands before found,
        kept in a note of the dump's index (keys: strings); None while the session has no index."""
        if kind not in self._notes:
            if self._graph_index_path is None:
                return None
            kept = self._IndexNote(self, kind).load()
            self._notes[kind] = kept if isinstance(kept, dict) else {}
        return self._notes[kind]

    def keep_answer(self, kind: str, key: str, value) -> None:
        """An answer found, kept with those of its kind (written when the session closes: :meth:`keep_notes`);
        nothing without an index."""
        answers = self.kept_answers(kind)
        if answers is not None:
            answers[key] = value
            self._notes_new.add(kind)

    def keep_notes(self) -> None:
        """The kinds of answers found since their notes were read, written to them with what they held."""
        for kind in sorted(self._notes_new):
            self._IndexNote(self, kind).save(self._notes[kind], replace=True)
        self._notes_new.clear()

    def _static_name_of(self, slot: int, array=None) -> str | None:
        statics = self.statics()
        found = statics.slot(slot, array)
        if found is not None:
            mt, field = found
            return f"{self.type_name(mt) or f'<unknown type, MT {mt:#x}>'}.{field.name} (static)"
        thread = statics.thread_slot(slot)
        if thread is None:
            return None
        mt, field, tid = thread
        name = self.type_name(mt) or f"<unknown type, MT {mt:#x}>"
        on = "" if tid is None else f", thread {tid}"
        return f"{name}'s thread statics (thread {tid})" if field is None else \
            f"{name}.{field.name} (thread static{on})"

    def loader_allocators(self, graph) -> dict[int, int]:
        """MethodTable -> its LoaderAllocator object, for every collectible type among the ``graph``'s objects
        (:mod:`clrlayout.graph.collectible`): the reference an object of such a type holds without a field. A
        collectible type whose allocator is not found is a warning (what only it keeps would be called dead)."""
        import numpy as np

        from ..graph.collectible import ALLOCATOR_TYPE, NATIVE_FIELD, SCOUT_FIELD, allocators_of_types
        from ..runtime.loaderheaps import allocator_span

        spec = self.profile.method_table
        flag = spec.flags.get("Collectible", 0) if spec is not None else 0
        collectible = [m for m in graph.types.tolist()
                       if flag and (r := self.mts.get(m)) is not None and r.flags & flag]
        if not collectible:
            return {}
        read = self.dump.memory.try_read_pointer
        offsets: dict = {}

        def offset(mt: int, name: str) -> int | None:  # a field's offset, per MethodTable
            if (mt, name) not in offsets:
                layout = self.type_layout(mt)
                f = layout.field(name) if layout is not None else None
                offsets[(mt, name)] = f.offset if f is not None else None
            return offsets[(mt, name)]

        natives = {}
        for mt in self.method_tables_named(ALLOCATOR_TYPE):
            scout_at = offset(mt, SCOUT_FIELD)
            kind = graph.kind_of(mt) if scout_at is not None else None
            for node in np.flatnonzero(graph.kinds == kind).tolist() if kind is not None else ():
                managed = int(graph.addresses[node])
                scout = read(managed + scout_at)
                scout_mt = read(scout) if scout else None
                native_at = offset(scout_mt, NATIVE_FIELD) if scout_mt else None
                native = read(scout + native_at) if native_at is not None else None
                if native:
                    natives[native] = managed
        found = allocators_of_types(collectible, self.loader_heaps().blocks, natives, allocator_span())
        missing = len(collectible) - len(found)
        if missing:
            self.warnings.append(f"the LoaderAllocator of {missing:,} collectible type(s) was not found (their "
                                 "assembly's LoaderAllocator object or loader heaps are not in the dump): what only "
                                 "their objects keep alive may be reported dead")
        return found

    def runtime_threads(self) -> list | str:
        """The runtime's managed threads (:class:`~clrlayout.runtime.threadstore.ManagedThread`), or why they cannot
        be read (a sentence): through the contract descriptor (.NET 9+), else at formats/thread-state.toml's Thread
        layout for the version, used only once the heap's managed Thread objects fit it (each native Thread they
        point at holds their managed id and a handle to them).  Found once."""
        if self._runtime_threads is UNSET:
            from ..runtime.threadstore import layout_for, managed_threads, threads_by_layout

            version = self.runtime.version_tuple
            coreclr = self.runtime.flavor == "coreclr"
            contract = self.contract if coreclr and version and version >= (9,) else None
            layout = layout_for(version, self.dump.os) if coreclr and contract is None else None
            found: dict = {}
            kept = None
            if layout is not None and self.heap.exact:
                note = self._IndexNote(self, "threads")  # the managed Thread objects, found by a walk once
                kept = note.load()
                known = {int(n): (int(i), int(o)) for n, i, o in kept["known"]} \
                    if isinstance(kept, dict) and isinstance(kept.get("known"), list) else self._thread_objects()
                module = self.runtime.module
                threads = threads_by_layout(self.dump.memory, layout, known,
                                            (module.base, module.base + module.size) if module is not None else None,
                                            found)
            else:
                threads = managed_threads(self.dump.memory, contract)
            if layout is not None and self.heap.exact and kept is None:  # what the walk found, whatever it gives
                note.save({"known": [[n, i, o] for n, (i, o) in sorted(known.items())]})
            if isinstance(threads, str) and contract is None:
                threads += f" (this runtime: {self.runtime.flavor} {self.runtime.version})"
            self._runtime_threads = threads
            self._dac_table = found.get("dac_table")
        return self._runtime_threads

    def _thread_objects(self) -> dict:
        """native Thread -> (managed id, object) of each managed Thread object of the heap (one walk)."""
        known = {}
        for o in self.objects_named("System.Threading.Thread"):
            layout = self.type_layout(o.method_table)
            fields = {f.name: f for f in layout.fields} if layout is not None else {}
            native_f = fields.get("_DONT_USE_InternalThread", fields.get("DONT_USE_InternalThread"))  # 2.x: no "_"
            id_f = fields.get("_managedThreadId")
            native = self.dump.memory.try_read_pointer(o.address + native_f.offset) if native_f else None
            raw_id = self.dump.memory.try_read(o.address + id_f.offset, 4) if id_f else None
            if native and raw_id is not None:
                known[native] = (int.from_bytes(raw_id, "little"), o.address)
        return known

    def stack_walker(self) -> Any:
        """The runtime's stack walker (:mod:`clrlayout.runtime.threadstacks`), or why there is none (a sentence).
        Made once."""
        if self._walker is UNSET:
            from ..runtime.threadstacks import walker_for

            self.runtime_threads()  # before .NET 9 it finds the table of DAC globals the walker's globals are in
            self._walker = walker_for(self.dump, self._statics_contract(), self.runtime.version_tuple,
                                      self.names.images.file, self._dac_table)
        return self._walker

    def _precise_stacks(self):
        """The managed threads' precise stack references where the runtime's stack walker can walk them (x64
        Linux cores of .NET Core 3.1, .NET 8 and 9+: :mod:`clrlayout.runtime.threadstacks`); None where it cannot
        (every stack is then scanned conservatively).  Not while the dump's reads are recorded for ``trim`` before
        .NET 9: the thread list is found there by searching the runtime's data and the native heap, and a trimmed
        (or redacted) copy keeps what was read as it was."""
        if self._precise is UNSET:
            from ..runtime.threadstacks import precise_stacks

            if getattr(self.dump.memory, "log", None) is not None and self._statics_contract() is None:
                self._precise = None
                return None
            threads = self.runtime_threads()
            walker = self.stack_walker() if not isinstance(threads, str) else threads
            self._precise = None
            if not isinstance(walker, str):
                self._precise = precise_stacks(self.dump, walker, threads, walker.gc_version)
        return self._precise

    def _statics_contract(self):
        """Where the runtime keeps its thread statics: the contract descriptor on .NET 9+ (or why it has none);
        None before, where handles hold the statics."""
        version = self.runtime.version_tuple
        if self.runtime.flavor != "coreclr" or version is None or version < (9,):
            return None
        return self.contract
