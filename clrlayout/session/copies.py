"""What a trimmed or redacted copy of a dump keeps (``clrlayout trim``): the analysis run with the address space
recording every read (the GcDacVars structure, the heap segments it leads to, every MethodTable looked at, every
string's bytes; with ``types``, what naming, laying out and the object graph read), and what a written copy holds
when it is read back."""

from __future__ import annotations

from dataclasses import replace

from ..dump.copying import PAGE, pages
from ..graph.roots import ROOT_KINDS
from ..limits import DEFAULT_LIMITS, Limits
from . import Session, open_session


def what_it_holds(out: str, mt, profile, limits) -> tuple[int, int, int]:
    """(memory ranges, strings, places with missing memory) of a written dump, as info and dump see it."""
    with open_session(out, mt=mt, profile=profile, limits=limits) as b:
        count = sum(1 for _ in b.iter_strings(decode=False))
        return len(b.dump.memory.regions), count, b.findings.missing


def needed_ranges(path: str, mt: int | None = None, profile: str | None = None,
                  limits: Limits = DEFAULT_LIMITS, max_strings: int | None = None,
                  types: bool = False, redaction: dict | None = None):
    """Page-rounded ranges of memory the string analysis reads, and the number of strings found (with
    ``redaction``: also the intervals kept as they are and the report of what is zeroed, session/redactplan.py).

    With ``max_strings``, only what the first N strings need (the rest of the heap is left out).  With
    ``types``, also every object's bytes and what naming and laying out every type of the heap reads (its
    MethodTables, EEClasses, FieldDescs, Modules and, where the dump holds them, the images' metadata), and
    what the object graph reads (GC descriptions, handle tables, the finalization queue)."""
    if max_strings is not None:  # read in small windows, so that stopping early keeps the dump small
        limits = replace(limits, scan_window=min(limits.scan_window, 4096))
    source = path
    if redaction is not None:  # every read recorded, those of opening too: only bytes read are kept as they are
        from ..dump import open_dump

        source = open_dump(path, limits)
        source.memory.start_recording()
    with open_session(source, mt=mt, profile=profile, limits=limits) as a:
        space = a.dump.memory
        log = space.log if redaction is not None else space.start_recording()
        a.string_method_table()
        count = 0
        for _ in a.iter_strings(decode=True):
            if max_strings is not None and count >= max_strings:
                break
            count += 1
        if types and a.heap.exact:
            _read_types(a, values=redaction is None)
        # what opening the dump read before recording started: the runtime's version string, and the heap
        # segments' headers
        from ..runtime.detect import detect_runtime

        detect_runtime(a.dump)
        if a.heap.dac_vars is not None:
            from ..heap.segments import find_gc_heap

            find_gc_heap(a.dump, a.runtime.module, limits)
        if not isinstance(a.contract, str):  # the runtime's contract descriptor and the variables it names
            from ..runtime.contract import find_contract_descriptor, method_table_variables

            found = find_contract_descriptor(a.dump, a.runtime.module, a.assemblies)
            if not isinstance(found, str):
                method_table_variables(found, space)
        space.stop_recording()
        if redaction is not None:  # only the bytes read outside the heap, and the heap's structure
            from .redactplan import plan

            keep, report = plan(a, log.ranges, **redaction)
            return keep.pages(PAGE), count, keep, report
        return pages(log.ranges), count, None, None


def _read_types(a: Session, values: bool = True) -> None:
    """Read what `type`, `object` and `dump --layout` of any object need: each object's bytes, its type's
    name (the DAC's and reflection's) and layout, an array's element type, and every type they lead to; where each
    type's statics are, and (``values``: not for a redacted copy) their values."""
    header = a.profile.object.header_size
    arrays = set()
    for obj in a.objects():  # per object its bytes; the rest per MethodTable
        a.dump.memory.read_available(obj.address - header, obj.aligned_size)
        if obj.type.component_size:
            arrays.add(obj.method_table)
    for method_table in arrays:
        a.array_element(method_table)
    for method_table in list(a.layouts.universe()):
        a.type_name(method_table)
        a.names.reflection_name(method_table)
        a.type_layout(method_table)
    _read_graph(a)
    statics = a.statics()  # what `type` and the naming of statics in `roots`/`retained` read
    for method_table in statics.all_types():
        a.type_name(method_table)
    statics.read_all(values)  # where they are; their values but for a redacted copy
    # what `memory` reads beyond the heap walk: the loader heaps, the GC's bookkeeping and handle tables
    a.loader_heaps()
    a.gc_bookkeeping()
    a.gc_handle_tables()


def _read_graph(a: Session) -> None:
    """Read what the object graph reads: each type's GC description (below its MethodTable), the handle
    tables, the finalization queue (the thread stacks are kept anyway); a root kind the dump does not hold
    is left out."""
    from ..errors import ClrLayoutError

    for kinds in (ROOT_KINDS, ("handles",), ("finalizer",)):
        try:
            a.object_graph(kinds)
        except ClrLayoutError:
            continue
