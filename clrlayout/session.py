"""The front door: one open dump with its runtime, layout profile, GC heap and MethodTables.

``clrlayout.open(path)`` returns a :class:`Session`; the CLI commands are thin layers over it::

    with clrlayout.open("app.core") as s:
        print(s.info["runtime"]["version"])
        for string in s.strings():
            print(hex(string.address), string.value)

Everything below it (``dump``, ``runtime``, ``heap``, ``objects``, ``analyses``) can be used on its own; the
session only wires the layers together and remembers what it found (the String MethodTable, the
findings of its walks, the warnings that qualify every answer).
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Iterator

import numpy as np

from .dump import Dump, open_dump
from .errors import (ClrLayoutError, HeapNotFound, RootsNotFound, RuntimeNotFound, TruncatedDump, TypeNotFound,
                     UsageError)
from .findings import FindingKind, Findings
from .heap.scan import iter_string_addresses, learn_string_method_table
from .heap.segments import GcHeap, find_gc_heap
from .heap.walk import HeapObject, HeapWalker
from .limits import DEFAULT_LIMITS, Limits
from .objects.instances import REFERENCED_CHARS
from .objects.strings import StringObject, read_strings
from .runtime.detect import RuntimeInfo, detect_runtime, profile_for
from .runtime.methodtable import MethodTables
from .runtime.monovtable import MonoVTables
from .runtime.profiles import Profile, load_named_profile
from .util.arrays import distinct

if TYPE_CHECKING:  # the contract descriptor is looked for on .NET 9+ only: imported there
    from .runtime.contract import CheckResult, ContractDescriptor

__all__ = ["Session", "open_session"]

STRING_TYPE = "System.String"
FREE_TYPE = "Free"


@dataclass
class Session:
    """An open dump and what was found in it.  Use as a context manager (it holds the file open)."""

    dump: Dump
    runtime: RuntimeInfo
    profile: Profile
    heap: GcHeap
    mts: MethodTables
    #: heap anomalies found by the walks of this session (counted; the first ``max_findings`` kept)
    findings: Findings
    #: what qualifies every answer of this session (a heuristic scan, missing memory, ...)
    warnings: list = field(default_factory=list)
    #: set by --mt: the user's MethodTable, trusted if it has a string's shape
    mt_override: int | None = None
    #: directories searched for assemblies whose files are not at the paths the dump names
    assemblies: list = field(default_factory=list)
    #: the runtime's contract descriptor (.NET 9+), or why there is none
    contract: ContractDescriptor | str = "not looked for"
    #: how the profile and the type-system layout compare with the contract descriptor (None: not checked)
    contract_checks: CheckResult | None = None
    _info: dict | None = field(default=None, repr=False)
    _names: object = field(default=None, repr=False)
    _layouts: object = field(default=None, repr=False)
    _loader_heaps: object = field(default=None, repr=False)

    def close(self) -> None:
        if self._names is not None:
            self._names.images.close()
        self.dump.close()

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # --- what the dump holds ----------------------------------------------------------------------

    @property
    def info(self) -> dict:
        """What ``clrlayout info`` shows, as data: format, OS, arch, process, runtime, profile, memory, GC heap,
        String MethodTable and warnings (``info --format json`` prints exactly this)."""
        if self._info is None:
            self._info = self._make_info()
        return self._info

    def _make_info(self) -> dict:
        d = self.dump
        rt, heap = self.runtime, self.heap
        data = {
            "path": d.path,
            "format": d.format,
            "os": d.os,
            "os_version": d.os_version,
            "arch": d.arch,
            "pointer_size": d.pointer_size,
            "process": {"pid": d.pid, "name": d.process_name, "threads": len(d.threads)},
            "runtime": {
                "flavor": rt.flavor,
                "version": rt.version,
                "version_source": rt.version_source,
                "module": None if rt.module is None else {
                    "path": rt.module.path, "base": f"{rt.module.base:#x}", "size": rt.module.size},
            },
            "profile": {"name": self.profile.name, "overrides": list(self.profile.applied_overrides),
                        "string_base_size": self.profile.string.base_size},
            "memory": {"ranges": len(d.memory.regions), "bytes": d.memory.total_bytes},
            #: a minidump's streams of types clrlayout does not read (a tool's own: Wine writes 0xfff0)
            "other_streams": [f"{t:#x}" for t in getattr(d.container, "skipped_streams", None) or []],
            "gc_heap": {
                "method": heap.method,
                "exact": heap.exact,
                "missing_bytes": self.missing_heap_bytes(),
                "gc_mode": heap.gc_mode,
                "gc_dac_vars": None if heap.dac_vars is None else {
                    "address": f"{heap.dac_vars.address:#x}",
                    "version": f"{heap.dac_vars.major}.{heap.dac_vars.minor}",
                    "generation_size": heap.dac_vars.generation_size},
                "segments": [{"kind": s.kind, "start": f"{s.start:#x}", "end": f"{s.end:#x}", "size": s.size,
                              "ephemeral": s.ephemeral} for s in heap.segments],
            },
        }
        try:
            mt = self.string_method_table()
            m = self.mts.get(mt)
            data["string_method_table"] = f"{mt:#x}"
            data["string_method_table_base_size"] = m.base_size if m else None
        except ClrLayoutError as e:
            data["string_method_table"] = None
            self.warnings.append(str(e))
        try:
            data["types"] = self.type_census()
        except ClrLayoutError as e:  # a heap that cannot be walked after all: info still says what it can
            data["types"] = None
            if str(e) not in self.warnings:
                self.warnings.append(str(e))
        data["contract_descriptor"] = self._contract_info()
        data["warnings"] = list(self.warnings)
        return data

    def _contract_info(self) -> dict:
        """The contract descriptor as ``info`` shows it: where it is, what it holds, how the layouts and the
        MethodTables its globals point at compare with clrlayout's."""
        d, checks = self.contract, self.contract_checks
        if isinstance(d, str):
            return {"found": False, "reason": d}
        out = {"found": True, "address": f"{d.address:#x}", "where": d.where, "json_bytes": d.json_bytes,
               "version": d.version, "baseline": d.baseline, "types": len(d.types), "globals": len(d.globals),
               "contracts": len(d.contracts)}
        if checks is not None:
            out["layout_values_checked"] = len(checks.checked)
            out["mismatches"] = [{"descriptor": m.descriptor, "says": m.says, "layout": m.layout,
                                  "expected": m.expected} for m in checks.mismatches]
            out["not_described"] = list(checks.not_described)
        out["method_tables"] = self.contract_method_tables()
        return out

    def contract_method_tables(self) -> dict:
        """The MethodTables the contract descriptor's globals point at (String, free object, Object, ...), each
        with whether clrlayout finds the same: the String MethodTable it learned, the free-object shape, the
        name the metadata gives (``agrees`` None: the variable is not in the dump, or the type's name cannot be
        had)."""
        out = {}
        from .runtime.contract import method_table_variables

        for name, (expected, mt) in method_table_variables(self.contract, self.dump.memory).items():
            agrees = None
            if mt is not None:
                if expected == "string":
                    try:
                        agrees = self.string_method_table() == mt
                    except ClrLayoutError:  # none found: nothing to compare with
                        agrees = None
                elif expected == "free":
                    agrees = getattr(self.mts.get(mt), "kind", None) == "free"
                else:  # a MethodTable whose name cannot be had is not checked (agrees stays None)
                    found = self.type_name(mt)
                    agrees = None if found is None else found == expected
                if agrees is False:
                    self.warnings.append(f"the runtime's contract descriptor says {name} is {mt:#x}, which "
                                         f"clrlayout does not find to be {expected}")
            out[name] = {"method_table": None if mt is None else f"{mt:#x}", "expected": expected,
                         "agrees": agrees}
        return out

    def type_census(self) -> dict | None:
        """The heap's types: how many MethodTables its objects have (Free included), how many of them have
        a name, and why the others have none (reason -> count).  One walk of the exact heap; None without
        one, or without the MethodTable layout to name types by."""
        if not self.heap.exact or self.profile.method_table is None:
            return None
        seen: set[int] = set()
        for win in self.heap_steps().windows():
            seen.update(distinct(win.method_tables).tolist())
        why = self.why_unnamed(seen)
        unnamed = sum(why.values())
        return {"method_tables": len(seen), "named": len(seen) - unnamed, "unnamed": unnamed, "why_unnamed": why}

    def why_unnamed(self, method_tables) -> dict[str, int]:
        """Of these MethodTables, those without a name, by reason (most first)."""
        why: dict[str, int] = {}
        for mt in sorted(method_tables):
            if self.type_name(mt) is None:
                reason = self.names.why.get(mt, "unreadable MethodTable")
                why[reason] = why.get(reason, 0) + 1
        return dict(sorted(why.items(), key=lambda kv: -kv[1]))

    # --- the String MethodTable -------------------------------------------------------------------

    def string_method_table(self) -> int:
        """The System.String MethodTable: the one given (``method_table``), else learned from the heap."""
        if self.mts.string_mt is not None:
            return self.mts.string_mt
        if self.mt_override is not None and self.profile.method_table is None:  # Mono: a MonoVTable
            if self.mts.get(self.mt_override) is None:
                raise TypeNotFound(f"method_table={self.mt_override:#x}: not a plausible MonoVTable in the dump")
            self.mts.string_mt = self.mt_override
            return self.mt_override
        if self.mt_override is not None:
            self.mts.string_mt = self._checked_override(self.mt_override)
            return self.mt_override
        if self.profile.method_table is None:
            raise TypeNotFound("Mono objects carry a MonoVTable, which has no recognisable shape: "
                               "give the String vtable as method_table=ADDRESS")
        if self.heap.exact:
            walker = HeapWalker(self.dump.memory, self.mts, Findings(0))
            for obj in walker.iter_objects(self.heap.segments):
                if obj.type.kind == "string":
                    self.mts.string_mt = obj.method_table
                    return self.mts.string_mt
        else:
            found = learn_string_method_table(self.dump, self.mts, self.heap.bounds)
            if found is not None:
                self.mts.string_mt = found
                return found
        raise self._because(TypeNotFound(self._why_no_string_mt()))

    def _checked_override(self, address: int) -> int:
        """A given String MethodTable (``method_table``): a MethodTable with System.String's shape (detection's checks, but a BaseSize other than the
        profile's is a warning: the profile may be the one that is wrong)."""
        raw = self.mts.read_raw(address)
        if raw is None:
            raise self._because(TypeNotFound(f"method_table={address:#x}: no MethodTable in the dump there"))
        mt = self.mts.get(address)
        shape = None if mt is None else mt.kind
        if shape == "class" and raw.component_size == self.profile.string.component_size \
                and self.mts.looks_like_string(raw, check_base_size=False):
            self.warnings.append(f"method_table={address:#x} has BaseSize {raw.m_BaseSize}; profile {self.profile.label} "
                                 f"says {self.profile.string.base_size}")
            shape = "string"
        if shape != "string":
            name = self.type_name(address) if self.profile.method_table is not None else None
            what = {"array": f"it is {name or 'an array type'}'s (component size {raw.component_size}; a "
                             f"string's is {self.profile.string.component_size})",
                    "free": "it is the free-object MethodTable", "object": "it is System.Object's",
                    None: "there is no valid MethodTable there"}.get(
                shape, f"flags {raw.m_dwFlags:#010x}, BaseSize {raw.m_BaseSize}")
            raise TypeNotFound(f"method_table={address:#x} is not a System.String MethodTable: {what}")
        return address

    def require_exact(self, what: str) -> None:
        """Raises :class:`~clrlayout.errors.HeapNotFound` (or, for a dump cut short, a TruncatedDump that says
        so first) unless the heap can be walked exactly: ``what`` needs it."""
        if not self.heap.exact:
            raise self._because(HeapNotFound(f"{self.dump.path}: {what} needs the exact heap walk (a scan finds "
                                             "strings only): " + "; ".join(self.heap.warnings[-1:])))

    def _because(self, error: ClrLayoutError) -> ClrLayoutError:
        """``error``, or, when the dump file is cut short, a TruncatedDump that says so first (what is missing
        is the likelier cause)."""
        truncation = self.dump.truncation()
        if truncation is None:
            return error
        return TruncatedDump(f"{truncation}; {error}")

    # --- exactness ----------------------------------------------------------------------------------

    def missing_heap_bytes(self) -> int:
        """Bytes of the heap's segments that the dump does not hold."""
        space = self.dump.memory
        missing = 0
        for seg in self.heap.segments:
            pos = seg.start
            while pos < seg.end:
                region = space.next_region(pos)
                if region is None or region.start >= seg.end:
                    missing += seg.end - pos
                    break
                missing += max(0, region.start - pos)
                pos = max(pos, min(space.mapped_end(region.start), seg.end))
        return missing

    def problems(self) -> list[str]:
        """Why this session's answers are not exact and complete (empty: they are): what ``--strict``
        refuses.  Heap anomalies count as they are found, so ask after the walk."""
        out = []
        if self.dump.truncated_bytes:
            out.append(self.dump.truncation())
        if not self.heap.exact:
            out.append("the heap was scanned, not walked exactly (" + "; ".join(self.heap.warnings[-1:]) + ")")
        elif self.missing_heap_bytes():
            out.append(f"{self.missing_heap_bytes():,} bytes of the heap are not in the dump")
        if self.findings.anomalies:
            out.append(f"{self.findings.anomalies:,} heap anomalies")
        if self.findings.missing:
            out.append(f"{self.findings.missing:,} places where the heap's memory is not in the dump")
        return out

    def _why_no_string_mt(self) -> str:
        p = self.profile
        for mt in self.mts.known().values():
            raw = self.mts.read_raw(mt.address)
            if raw is not None and raw.has_component_size and raw.component_size == p.string.component_size \
                    and mt.kind == "class" and raw.m_BaseSize != p.string.base_size:
                return (f"found a String-shaped MethodTable at {mt.address:#x} with BaseSize {raw.m_BaseSize}, "
                        f"but profile {p.label} says {p.string.base_size}: wrong runtime version or profile? "
                        f"(profile=NAME or method_table=ADDRESS selects another)")
        return (f"no System.String MethodTable found in {self.dump.path} "
                f"(profile {p.label}; give it as method_table=ADDRESS if you know it)")

    @property
    def names(self):
        """The :class:`~clrlayout.types.names.TypeNames` of this dump (metadata read as names are asked for)."""
        if self._names is None:
            from .types.images import ManagedImages
            from .types.names import TypeNames

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
        mt = self.mts.get(method_table)
        if mt is not None and mt.kind == "free":
            return FREE_TYPE
        name = self.names.name(method_table) if self.profile.method_table is not None else None
        if name is None and method_table == self.mts.string_mt:
            return STRING_TYPE  # known by its shape (and by --mt) where its metadata cannot be had
        return name

    # --- types and their layouts -----------------------------------------------------------------

    @property
    def layouts(self):
        """The :class:`~clrlayout.types.layouts.TypeLayouts` of this dump (EEClass and FieldDescs, read as
        layouts are asked for)."""
        if self._layouts is None:
            from .types.eeclass import type_system_layout
            from .types.layouts import TypeLayouts

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

    def loader_heaps(self):
        """The runtime's loader heaps (:mod:`clrlayout.runtime.loaderheaps`): their block records searched in
        all the dump's memory but the GC heap and the images, the heaps that hold them in all but the GC heap;
        looked for once."""
        if self._loader_heaps is None:
            from .runtime.loaderheaps import find_loader_heaps

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
        from .heap.bookkeeping import gc_bookkeeping

        return gc_bookkeeping(self.dump, self.heap.dac_vars, self.runtime.module)

    def gc_handle_tables(self) -> list[tuple[int, int]]:
        """``(start, end)`` of the GC's handle table segments (.NET 6+, :mod:`clrlayout.heap.handletables`)."""
        from .heap.handletables import handle_table_segments

        return [(lo, hi) for lo, hi, _ in handle_table_segments(self.dump, self.heap.dac_vars)]

    def object_graph(self, kinds=("handles", "finalizer", "stacks")):
        """The heap's object graph with the roots of ``kinds`` (:class:`~clrlayout.graph.objectgraph.ObjectGraph`:
        references, reachability, dominators), built once per set of kinds (exact walk only)."""
        from .graph.build import build_graph
        from .graph.objectgraph import ObjectGraph
        from .graph.roots import find_roots

        self.require_exact("the object graph")
        key = tuple(sorted(kinds))
        cache = self.__dict__.setdefault("_graphs", {})
        if key not in cache:
            if "_heap_graph" not in self.__dict__:
                self.string_method_table()
                self._heap_graph = build_graph(self.heap_steps().windows(), self.mts, self.dump.memory)
                if self._heap_graph.bad_count:
                    self.warnings.append(f"{self._heap_graph.bad_count:,} references point neither to null nor to "
                                         "the start of an object (heap corruption, or memory the dump lacks); they "
                                         "are left out of the graph")
            roots = find_roots(self.dump, self.heap.dac_vars, self._heap_graph, key)
            if roots.problems:  # an answer without a kind of roots asked for would call live objects dead
                others = ",".join(k for k in ("handles", "finalizer", "stacks")
                                  if k in key and not any(p.startswith(k[:6]) for p in roots.problems))
                raise self._because(RootsNotFound("; ".join(roots.problems) + (
                    f" (the other roots: roots={others})" if others else "")))
            cache[key] = ObjectGraph(self._heap_graph, roots, key)
        return cache[key]

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
        if self.heap.exact and not getattr(self, "_walked_types", False):
            from .heap.fastwalk import FastWalker, HeapSteps

            self._walked_types = True
            self.string_method_table()
            walker = FastWalker(self.dump.memory, self.mts, Findings(self.findings.limit))
            for _ in HeapSteps(walker, self.heap.segments).windows():
                pass

    def referent(self, address: int, limit: int | None = REFERENCED_CHARS):
        """What a reference to ``address`` points at: its type's name and, for a string, its value (shown up
        to ``limit`` characters; None: whole)."""
        from .objects.instances import Referent
        from .objects.strings import read_strings

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

        from .objects.instances import PRIMITIVES

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

    # --- enumeration ------------------------------------------------------------------------------

    def strings(self, selected=None) -> Iterator[StringObject]:
        """Every System.String of the heap, in heap order, each with ``address``, ``method_table``,
        ``length``, ``value``, ``size`` (SOS size), ``aligned_size`` and ``header`` (the sync block word).

        ``selected``: an :class:`~clrlayout.analyses.filters.StringFilter` (None: every string)."""
        for batch in self.iter_batches():
            if selected is not None:
                batch = selected.apply(batch)
            yield from batch.objects()

    def objects(self) -> Iterator[HeapObject]:
        """Every object of the GC heap but free objects, in heap order, each with ``address``,
        ``method_table``, ``size`` (SOS size), ``aligned_size``, ``count`` and ``type_name``.

        Needs the exact heap walk (:class:`~clrlayout.errors.HeapNotFound` otherwise: a scan finds
        strings, not every object)."""
        self.require_exact("listing objects")
        self.string_method_table()
        names: dict[int, str | None] = {}
        known = self.mts.get
        for win in self.heap_steps().windows():
            for off, mt, count, aligned in zip(win.offsets.tolist(), win.method_tables.tolist(),
                                               win.counts.tolist(), win.aligned.tolist()):
                t = known(mt)
                if t.kind == "free":
                    continue
                if mt not in names:
                    names[mt] = self.type_name(mt)
                yield HeapObject(win.base + off, mt, t.object_size(count), aligned, count, t, win.segment,
                                 names[mt])

    def _window_object(self, win, i: int, segment=None) -> HeapObject:
        """Object ``i`` of a window of the vectorised walk, named."""
        mt = int(win.method_tables[i])
        t = self.mts.get(mt)
        count = int(win.counts[i])
        return HeapObject(win.base + int(win.offsets[i]), mt, t.object_size(count), int(win.aligned[i]), count, t,
                          segment or win.segment, self.type_name(mt))

    def objects_named(self, name: str | None, method_table: int | None = None,
                      progress=None, exact: bool = True) -> Iterator[HeapObject]:
        """The objects of the types named ``name`` (as the DAC or as reflection prints it; None: any name;
        ``exact=False``: whose name contains it, as SOS's ``-type``) and of MethodTable ``method_table`` (None:
        any), in heap order, in one walk: each window's MethodTables are named once, as they are met (exact
        walk only)."""
        self.require_exact("listing objects")
        match: dict[int, bool] = {}
        for win in self.heap_steps(progress).windows():
            kinds = distinct(win.method_tables)
            for mt in kinds.tolist():
                if mt not in match:
                    match[mt] = (method_table is None or mt == method_table) and (
                        name is None or self.is_named(mt, name, exact))
            wanted = kinds[[match[mt] for mt in kinds.tolist()]]
            if not len(wanted):
                continue
            for i in np.flatnonzero(np.isin(win.method_tables, wanted)).tolist():
                yield self._window_object(win, i)
        self._walked_types = True

    def object_at(self, address: int) -> HeapObject | None:
        """The object (free space included) whose bytes, header to padding, hold ``address`` (None: no object of
        the exactly walked heap does).  Walks only the segment that holds it, from its start."""
        from .heap.fastwalk import FastWalker, HeapSteps

        self.require_exact("finding an object")
        self.string_method_table()
        h = self.profile.object.header_size
        seg = self.heap.segment_at(address + h) or self.heap.segment_at(address)
        if seg is None:
            return None
        for win in HeapSteps(FastWalker(self.dump.memory, self.mts, self.findings), [seg]).windows():
            starts = win.offsets + (win.base - h)  # the first byte of each object (its header)
            i = int(np.searchsorted(starts, address, side="right")) - 1
            if i < 0:
                continue
            if address < int(starts[i]) + int(win.aligned[i]):
                return self._window_object(win, i, seg)
            if int(starts[-1]) + int(win.aligned[-1]) > address:
                return None
        return None

    def iter_strings(self, decode: bool = True) -> Iterator[StringObject]:
        """Every System.String of the heap, in address order within each segment (values only with
        ``decode``)."""
        for batch in self.iter_batches():
            yield from batch.objects(decode)

    def iter_objects(self) -> Iterator[HeapObject]:
        """Every object of the exact heap walk, free objects included, from the per-object reference
        walker (empty in object-scan mode)."""
        if not self.heap.exact:
            return iter(())
        return HeapWalker(self.dump.memory, self.mts, self.findings).iter_objects(self.heap.segments)

    def iter_batches(self, progress=None):
        """Every System.String of the heap, in batches (numpy arrays over a character buffer), in heap order.

        The exact heap is walked by the vectorised walker; ``progress(bytes)`` is called as it goes."""
        if not self.heap.exact:
            yield from _scan_batches(self)
            return
        if os.environ.get("CLRLAYOUT_WALKER") == "reference":  # the per-object walker (benchmarks, checks)
            yield from _reference_batches(self)
            return
        for win in self.heap_steps(progress).windows():
            yield from self.window_batches(win)

    @property
    def windowed(self) -> bool:
        """Whether the strings come window by window from the vectorised walk (see heap_steps)."""
        return self.heap.exact and os.environ.get("CLRLAYOUT_WALKER") != "reference"

    def heap_steps(self, progress=None):
        """The vectorised walk of the exact heap as steps from cursor to cursor, a window each
        (``heap.fastwalk.HeapSteps``); two processes can walk its windows side by side (``parallel.py``)."""
        from .heap.fastwalk import FastWalker, HeapSteps

        self.string_method_table()
        return HeapSteps(FastWalker(self.dump.memory, self.mts, self.findings, progress), self.heap.segments)

    def window_batches(self, win):
        """The strings of one window of :meth:`heap_steps`, in batches; their anomalies are findings."""
        from .objects.batches import batch_from_window

        for batch in batch_from_window(win, self.string_method_table(), self.profile, self.dump.memory,
                                       self.findings):
            _string_findings(self.findings, batch)
            yield batch


BATCH = 65536


def _string_findings(findings: Findings, batch) -> None:
    """A batch's strings without a terminator or with non-zero header padding, as findings."""
    if batch.terminated is not None and not batch.terminated.all():
        for i in np.flatnonzero(~batch.terminated):
            findings.add(FindingKind.STRING_NOT_TERMINATED, int(batch.addresses[i]),
                         f"no zero terminator after {int(batch.lengths[i])} characters")
    if batch.header_padding is not None and batch.header_padding.any():
        for i in np.flatnonzero(batch.header_padding):
            findings.add(FindingKind.STRING_BAD_HEADER_PADDING, int(batch.addresses[i]),
                         f"header padding DWORD is {int(batch.header_padding[i]):#x}, not 0")


def _reference_batches(session: Session):
    """Batches from the per-object reference walker (heap/walk.py) instead of the vectorised one."""
    from .objects.batches import batch_from_objects

    string_mt = session.string_method_table()
    chunk = []
    for obj in session.iter_objects():
        if obj.method_table == string_mt:
            chunk += [dataclasses.replace(s, heap=obj.segment.generation(obj.address))
                      for s in read_strings(session.dump.memory, session.profile, [obj.address], obj.segment.large,
                                            session.findings)]
            if len(chunk) >= BATCH:
                yield batch_from_objects(session.profile, chunk)
                chunk = []
    if chunk:
        yield batch_from_objects(session.profile, chunk)


def _scan_batches(session: Session):
    """Batches from the checked object scan (one read per string, fields decoded per batch)."""
    from .objects.batches import batch_from_addresses

    string_mt = session.string_method_table()
    space = session.dump.memory
    profile = session.profile
    threshold = profile.object.large_object_threshold
    base, comp = profile.string.base_size, profile.string.component_size

    def large(address: int) -> bool:  # the GC puts objects of at least the threshold on the LOH
        length = space.try_read_u32(address + profile.string.length_offset) or 0
        return base + comp * length >= threshold

    chunk = []

    def flush():
        batch = batch_from_addresses(space, profile, string_mt, chunk, large, session.findings)
        if batch is not None:
            _string_findings(session.findings, batch)
        return batch

    for address in iter_string_addresses(session.dump, session.mts, string_mt, session.findings,
                                         session.heap.bounds):
        chunk.append(address)
        if len(chunk) >= BATCH:
            batch = flush()
            chunk = []
            if batch is not None:
                yield batch
    if chunk:
        batch = flush()
        if batch is not None:
            yield batch


def _contract(dump: Dump, runtime: RuntimeInfo, profile: Profile, search: list) \
        -> tuple[ContractDescriptor | str, CheckResult | None]:
    """The runtime's contract descriptor (or why there is none) and the profile and type-system layout checked
    against it; ``search``: directories the runtime's file may be in (--assemblies)."""
    if runtime.flavor != "coreclr":
        name = {"netfx": "the .NET Framework", "mono": "Mono"}.get(runtime.flavor, runtime.flavor)
        return f"{name} has none (CoreCLR exports one from .NET 9 on)", None
    version = runtime.version_tuple
    if version is not None and version < (9,):
        return f"CoreCLR {runtime.version} is older than .NET 9, which introduced it", None
    from .runtime.contract import check_layouts, find_contract_descriptor
    from .types.eeclass import type_system_layout

    found = find_contract_descriptor(dump, runtime.module, search)
    if isinstance(found, str):
        return found, None

    system = type_system_layout(runtime.flavor, dump.arch, dump.os, version, profile.pointer_size)
    layouts = {"profile": profile, "type_system": None if isinstance(system, str) else system}
    labels = {"profile": f"profile {profile.label}", "type_system": "formats/type-system.toml"}
    return found, check_layouts(found, layouts, labels)


def open_session(path, *, mt: int | None = None, profile: str | None = None, heap: str = "auto",
                 limits: Limits = DEFAULT_LIMITS, assemblies=None) -> Session:
    """Open a dump and find its runtime, layout profile and GC heap.

    ``path``: a minidump or ELF core (or an already opened :class:`~clrlayout.dump.Dump`).
    ``mt``: the System.String MethodTable, if it cannot be found (Mono).
    ``profile``: a layout profile ``NAME[@VERSION]`` to use instead of the one the runtime selects.
    ``heap``: "auto" walks the heap exactly when its bounds are found and scans otherwise; "scan" always
    uses the checked object scan; "walk" fails unless the exact walk is possible.
    ``limits``: the :class:`~clrlayout.limits.Limits` on everything the dump controls.
    ``assemblies``: directories to find assemblies in when they are not at the paths the dump names.

    Raises only :class:`~clrlayout.errors.ClrLayoutError` subclasses, each with its exit code.
    """
    dump = path if isinstance(path, Dump) else open_dump(os.fspath(path), limits)
    path = dump.path
    try:
        warnings = list(dump.warnings)
        try:
            runtime = detect_runtime(dump)
        except RuntimeNotFound as e:
            truncation = dump.truncation()
            raise TruncatedDump(f"{truncation}; {e}") if truncation else e from None
        if profile:
            prof = load_named_profile(profile, runtime.version_tuple)
            if prof.pointer_size != dump.pointer_size:
                raise UsageError(f"profile={profile}: {prof.pointer_size * 8}-bit, but the dump is of a "
                                 f"{dump.pointer_size * 8}-bit process ({dump.arch})")
        else:
            prof = profile_for(dump, runtime)
        if runtime.version is None:
            warnings.append(f"runtime version unknown: using profile {prof.label}")
        gc = find_gc_heap(dump, runtime.module, limits)
        if heap == "walk" and not gc.exact:
            raise HeapNotFound(f"{path}: no exact heap walk possible: " + "; ".join(gc.warnings[-1:]))
        if heap == "scan" and gc.exact:
            gc = GcHeap(method="object-scan", gc_mode=gc.gc_mode, dac_vars=gc.dac_vars, bounds=gc.bounds)
            warnings.append("heap=scan: using the checked object scan although the exact walk is possible")
        elif not gc.exact:
            warnings.append("no exact heap walk: strings are found by a checked scan, which cannot tell dead "
                            "bytes past the heap's end from live objects (reason below)")
        warnings += gc.warnings
        mts = MethodTables(dump.memory, prof, limits) if prof.method_table is not None \
            else MonoVTables(dump.memory, prof, limits)
        search = [os.fspath(a) for a in (assemblies or [])]
        contract, checks = _contract(dump, runtime, prof, search)
        if checks is not None:
            warnings += [str(m) for m in checks.mismatches]
        return Session(dump, runtime, prof, gc, mts, Findings(limits.max_findings), warnings, mt_override=mt,
                       assemblies=search, contract=contract,
                       contract_checks=checks)
    except BaseException:
        dump.close()
        raise
