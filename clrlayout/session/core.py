"""The engine under the model: one open dump with its runtime, layout profile, GC heap and MethodTables.

``clrlayout.open(path)`` returns the typed model (:mod:`clrlayout.model`) over a :class:`Session`; the
commands and the model ask the session, which wires the layers together and remembers what it found (the
String MethodTable, the findings of its walks, the warnings that qualify every answer).  Its parts, one job
each: what the dump is (:mod:`.describe`), its types (:mod:`.typesystem`), walking its heap
(:mod:`.walks`), the runtime's other memory and the object graph (:mod:`.memory`), opening one
(:mod:`.opening`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..dump import DumpFile
from ..errors import ClrLayoutError, HeapNotFound, TruncatedDump, TypeNotFound
from ..findings import Findings
from ..heap.scan import learn_string_method_table
from ..heap.segments import GcHeap
from ..heap.walk import HeapWalker
from ..runtime.detect import RuntimeInfo
from ..runtime.methodtable import MethodTables
from ..runtime.profiles import Profile
from .describe import Describe
from .memory import RuntimeMemory
from .state import UNSET
from .typesystem import TypeSystem
from .walks import Walks

if TYPE_CHECKING:  # the contract descriptor is looked for on .NET 9+ only: imported there
    from ..graph.build import HeapGraph
    from ..runtime.contract import CheckResult, ContractDescriptor


@dataclass
class Session(Describe, TypeSystem, Walks, RuntimeMemory):
    """An open dump and what was found in it.  Use as a context manager (it holds the file open)."""

    dump: DumpFile
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
    #: where the heap graph's index is kept (:mod:`clrlayout.graph.index`): None the default directory, a
    #: directory, or False for none
    graph_index: object = None
    #: what the session found, each kept once found: None or UNSET (where None is an answer) until then
    _info: dict | None = field(default=None, repr=False)
    _names: object = field(default=None, repr=False)
    _layouts: object = field(default=None, repr=False)
    _loader_heaps: object = field(default=None, repr=False)
    #: whether a walk met every MethodTable of the heap (naming need not walk again)
    _walked_types: bool = field(default=False, repr=False)
    #: object_at: whether it looked once (a second call makes the index), and the index of every object's start
    _looked_up: bool = field(default=False, repr=False)
    _object_starts: list | None = field(default=None, repr=False)
    #: the heap graph (:mod:`clrlayout.graph.build`), the object graph per set of root kinds, the collectible
    #: types' LoaderAllocators, where the graph's index is and what became of it ("loaded", "written", ...)
    _heap_graph: HeapGraph | None = field(default=None, repr=False)
    _graphs: dict = field(default_factory=dict, repr=False)
    _allocators: object = field(default=UNSET, repr=False)
    _graph_index_path: object = field(default=None, repr=False)
    index_status: str | None = field(default=None, repr=False)
    #: where the statics live (:class:`~clrlayout.graph.statics.Statics`)
    _statics: object = field(default=None, repr=False)
    #: answers kept in notes of the dump's index, by kind (the names of the statics' slots, of the types, of the
    #: references' slots: RuntimeMemory.kept_answers), and the kinds with answers found since they were read
    _notes: dict = field(default_factory=dict, repr=False)
    _notes_new: set = field(default_factory=set, repr=False)
    #: the runtime's threads (or why not), the runtime's table of DAC globals, the stack walker (or why not), the
    #: precise stack references (None: none), glibc's heap (None: none)
    _runtime_threads: object = field(default=UNSET, repr=False)
    _dac_table: object = field(default=None, repr=False)
    _walker: object = field(default=UNSET, repr=False)
    _precise: object = field(default=UNSET, repr=False)
    _native_heap: object = field(default=UNSET, repr=False)

    def close(self) -> None:
        self.keep_notes()
        if self._names is not None:
            self._names.images.close()
        self.dump.close()

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

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
        """A given String MethodTable (``method_table``): a MethodTable with System.String's shape (detection's
        checks, but a BaseSize other than the
        profile's is a warning: the profile may be the one that is wrong)."""
        raw = self.mts.read_raw(address)
        if raw is None:
            raise self._because(TypeNotFound(f"method_table={address:#x}: no MethodTable in the dump there"))
        mt = self.mts.get(address)
        shape = None if mt is None else mt.kind
        if shape == "class" and raw.component_size == self.profile.string.component_size \
                and self.mts.looks_like_string(raw, check_base_size=False):
            self.warnings.append(f"method_table={address:#x} has BaseSize {raw.m_BaseSize}; "
                                 f"profile {self.profile.label} says {self.profile.string.base_size}")
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

    # --- exactness ----------------------------------------------------------------------------------

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
