"""``clrlayout trim``: a much smaller dump of the same format that gives the same ``info`` and ``dump`` (with
``--types``, also the same ``stats``, ``type`` and ``object``, where the dump held what they read).

The analysis is run with the address space recording every read (the GcDacVars structure, the heap
segments it leads to, every MethodTable looked at, every string's bytes).  Those ranges, rounded out to
pages, plus the thread stacks, are the memory the new dump keeps; the streams or notes that describe the
process (system info, modules, threads, misc info / NT_FILE, NT_PRSTATUS, ...) are kept whole.  The
output is written to a temporary file beside the target, checked, and renamed into place.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass, replace

from .. import __version__
from ..errors import OutputError, TruncatedDump
from ..graph.roots import ROOT_KINDS
from ..limits import DEFAULT_LIMITS, Limits
from ..session import Session, open_session
from .ranges import PAGE, pages


@dataclass
class TrimResult:
    input_bytes: int
    output_bytes: int
    kept_memory: int
    total_memory: int
    ranges: int  #: memory ranges of the output, as ``info`` counts them
    strings: int  #: strings the trim was asked to keep (all of them, or the first ``max_strings``)
    strings_in_output: int  #: whole strings a walk of the output finds (pages hold more than the first N)
    missing_in_output: int  #: places where the output's heap walk meets memory that is not in it
    redacted: object = None  #: with ``redact``: the :class:`~clrlayout.trim.redact.RedactReport`


def _what_it_holds(out: str, mt, profile, limits) -> tuple[int, int, int]:
    """(memory ranges, strings, places with missing memory) of a written dump, as info and dump see it."""
    with open_session(out, mt=mt, profile=profile, limits=limits) as b:
        count = sum(1 for _ in b.iter_strings(decode=False))
        return len(b.dump.memory.regions), count, b.findings.missing


def needed_ranges(path: str, mt: int | None = None, profile: str | None = None,
                  limits: Limits = DEFAULT_LIMITS, max_strings: int | None = None,
                  types: bool = False, redaction: dict | None = None):
    """Page-rounded ranges of memory the string analysis reads, and the number of strings found.

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
            from .redact import plan

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


#: what a redacted dump lacks, as its mark says (clrlayout.dump.redaction)
REMOVED = ["string characters", "elements of arrays of primitives", "primitive fields and boxed values",
           "free space and the heap's bytes past its allocated ends", "native memory and mapped files",
           "the images' code, literals (#US) and #Blob values other than field and type signatures",
           "floating-point and vector registers", "the command line (NT_PRPSINFO) and MiscInfo but the process id"]


def redaction_mark(keep_stacks: bool, keep_types=()) -> dict:
    return {"redacted_by": f"clrlayout {__version__}", "stacks": "kept" if keep_stacks else "removed",
            "removed": REMOVED + ([] if keep_stacks else ["thread stacks"]), "kept_types": sorted(keep_types)}


def trim(path: str, out: str, mt: int | None = None, profile: str | None = None,
         limits: Limits = DEFAULT_LIMITS, max_strings: int | None = None, types: bool = False,
         redact: bool = False, redact_keep=(), keep_stacks: bool = False, also=()) -> TrimResult:
    """Writes the trimmed dump to ``out``.  ``redact``: every byte that is not structure zeroed (trim/redact.py;
    implies ``types``); ``redact_keep``: type names whose objects stay whole; ``keep_stacks``: the thread
    stacks stay whole; ``also``: more ``(start, end)`` ranges to keep (not with ``redact``), as a sample that
    must hold some native memory asks.  The output is written to a temporary file beside ``out``, checked (it
    opens, and its heap walk finds every string the input's found), then renamed into place: nothing is left at
    ``out`` when any of that fails.  A dump cut short is not redacted (a copy would not say that it was)."""
    from ..dump import open_dump

    if redact:
        with open_dump(path, limits) as dump:
            why = dump.truncation()
        if why is not None:
            raise TruncatedDump(f"{why}; a redacted copy would not say so, so none is written", path)
    redaction = dict(keep_type_names=tuple(redact_keep), keep_stacks=keep_stacks) if redact else None
    ranges, count, keep, report = needed_ranges(path, mt, profile, limits, max_strings, types or redact, redaction)
    if also:
        if redact:
            raise ValueError("also= keeps memory as it is; redact= zeroes what is not structure")
        ranges = pages(list(ranges) + list(also))
    mark = redaction_mark(keep_stacks, redact_keep) if redact else None
    with open_dump(path, limits) as dump:
        if dump.format == "minidump":
            from .minidump import write_minidump as writer
        else:
            from .elf import write_elf_core as writer
        directory = os.path.dirname(os.path.abspath(out)) or "."
        try:
            fd, tmp = tempfile.mkstemp(prefix=".clrlayout-trim-", dir=directory)
        except OSError as e:
            raise OutputError(f"cannot write to {directory}: {e.strerror}") from None
        try:
            with os.fdopen(fd, "wb") as f:
                # the comment does not name the input, so that trimming a trimmed dump gives the same bytes
                comment = f"trimmed by clrlayout {__version__}: {count} strings"
                kept = writer(dump, ranges, f, comment=comment, keep=keep, keep_stacks=keep_stacks or not redact,
                              mark=mark)
            total = dump.memory.total_bytes
            regions, held, missing = _what_it_holds(tmp, mt, profile, limits)  # checked before it is in place
            if redact and (held < count or missing):
                raise OutputError(f"the redacted copy does not read as the original ({held:,} of {count:,} strings; "
                                  f"{missing:,} places with memory missing): not written (a bug in clrlayout)")
            umask = os.umask(0)
            os.umask(umask)
            os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes 0600; an output file gets the usual mode
            os.replace(tmp, out)
        except OSError as e:
            raise OutputError(f"cannot write {out}: {e.strerror}") from None
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
    return TrimResult(os.path.getsize(path), os.path.getsize(out), kept, total, regions, count, held, missing, report)
