"""The roots of the heap, each with its kind (graph-facts.md): what the GC itself scans.

- ``handles``: strong, pinned, async pinned, sized-ref and ref-counted handles (and variable handles whose
  type is strong or pinned); weak handles are listed by :mod:`.handles` but are not roots; a dependent
  handle is an edge from its primary to its secondary, not a root.
- ``finalizer``: the objects ready for finalization (f-reachable: the critical and the normal segments of
  the finalization queue, after the generations' ones); objects merely registered are not roots.
- ``stacks``: where the runtime's stack walker can walk them (.NET 9+, x64: :mod:`clrlayout.runtime.threadstacks`),
  each managed thread's precise references — the slots each frame's GC info says are live, an interior pointer
  rooting the object it points into (``stack``) — and, conservatively, the argument registers a transition Frame
  saved and the part of a stack a walk could not account for; elsewhere every thread's stack memory, from its
  stack pointer to its end, scanned for words that point into a heap object, as the runtime's conservative GC
  mode does (``stack (conservative)``): a superset of the precise stack roots.

Statics are held by handles up to .NET 8 (object[]s of pinned handles); .NET 10's thread statics are held by
per-thread arrays the GC reports directly, which a conservative stack scan does not see: a limitation
docs/limitations.md names.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field

import numpy as np

from ..heap.segments import finalize_queues
from .handles import read_handles

ROOT_KINDS = ("handles", "finalizer", "stacks", "statics")
#: the farthest a segment's heap_segment header lies below its first object (a page, or a region's header)
SEGMENT_HEADER_MAX = 64 * 1024
#: finalization queue slots read at the most (a bound on what a dump controls)
MAX_QUEUE = 1 << 24


@dataclass(frozen=True)
class Root:
    kind: str  # "strong handle", "pinned handle", ..., "finalizer (f-reachable)", "stack",
    #: "stack (conservative)", "thread static"
    object: int  # the object it keeps alive
    address: int  # where the root is: the handle, the queue slot, the stack word (0: a register)
    thread: int | None = None  # a stack or thread-static root's thread (OS id)
    #: a precise stack root's frame (its method's MethodDesc, its SP) and slot (``[rbp-0x38]``, ``rbx``)
    method_desc: int = 0
    frame_sp: int = 0
    slot: str = ""

    def as_dict(self) -> dict:
        out = {"kind": self.kind, "address": f"{self.address:#x}", "object": f"{self.object:#x}"}
        if self.thread is not None:
            out["thread"] = self.thread
        if self.slot:
            out.update(method_desc=f"{self.method_desc:#x}", frame_sp=f"{self.frame_sp:#x}", slot=self.slot)
        return out


@dataclass
class Roots:
    roots: list
    #: (primary, secondary) object addresses of the dependent handles
    dependent: list
    #: why a kind asked for could not be read (it is then missing from ``roots``)
    problems: list
    #: why the dependent handles could not be read (None: read)
    dependent_problem: str | None = None
    #: what is not exact about the roots found, though nothing is missing (a stack scanned conservatively where
    #: its walk stopped): for a warning
    notes: list = field(default_factory=list)


def find_roots(dump, dac_vars, graph, kinds=ROOT_KINDS, contract=None, segments=(), others=(), precise=None) -> Roots:
    """The roots of the kinds asked for, each kept only when it holds the start of a heap object (stack
    words: any address inside one).  ``contract``: the runtime's contract descriptor (.NET 9+), which says
    where each thread keeps its thread statics; a string says why there is none (None: the runtime keeps its
    statics in handles, .NET 8 and before).  ``segments``: the GC heap's, and ``others``: ``(start, end)`` of
    other memory that is no stack (the GC's bookkeeping and handle tables, modules): where a thread's stack ends
    at the latest (:func:`thread_stacks`).  ``precise``: the managed threads' precise stack references
    (:class:`~clrlayout.runtime.threadstacks.PreciseStacks`), else (None) every stack is scanned conservatively."""
    out, dependent, problems, notes = [], [], [], []
    handles, why = read_handles(dump, dac_vars)  # dependent handles are edges, whatever roots are asked for
    if handles is None:
        if "handles" in kinds:
            problems.append(f"handle roots: {why}")
        handles = []
    for h in handles:
        if h.type == 6 and h.secondary:  # dependent: primary -> secondary
            dependent.append((h.object, h.secondary))
        elif h.strong and "handles" in kinds and graph.node(h.object) is not None:
            out.append(Root(f"{h.kind} handle", h.object, h.address))
    if "finalizer" in kinds:
        found = _finalizer_roots(dump, dac_vars, graph)
        if found is None:
            problems.append("finalizer roots: the finalization queue could not be read")
        else:
            out += found
    if "stacks" in kinds and precise is not None:
        out += _precise_stack_roots(dump, graph, precise, segments, others, notes)
    elif "stacks" in kinds:
        out += _stack_roots(dump, graph, segments, others)
    if "statics" in kinds and contract is not None:
        found = None if isinstance(contract, str) else _thread_static_roots(dump.memory, contract, graph)
        if found is None:
            problems.append("statics roots: the runtime's thread list could not be read ("
                            + (contract if isinstance(contract, str) else "not in the dump") + ")")
        else:
            out += found
    return Roots(out, dependent, problems, notes=notes)


def _thread_static_roots(space, contract, graph) -> list | None:
    """.NET 9+ thread statics: each managed thread's ``ThreadLocalData`` holds an ``object[]`` of its
    (non-collectible) thread statics, which the GC reports itself (no handle holds it).  The threads are the
    runtime's list (``ThreadStore``), the offsets the contract descriptor's (graph-facts.md)."""
    arrays = thread_static_arrays(space, contract)
    return None if arrays is None else [r for r in arrays if graph.node(r.object) is not None]


def thread_static_arrays(space, contract) -> list | None:
    """The Root of each managed thread's thread-statics ``object[]`` (.NET 9+; None: the thread list or a thread's
    data cannot be read)."""
    from ..runtime.threadstore import thread_list

    try:
        thread, tls = contract.types["Thread"], contract.types["ThreadLocalData"]
        data_ptr, array_at, os_id = thread["ThreadLocalDataPtr"], tls["NonCollectibleTlsArrayData"], thread["OSId"]
    except KeyError:
        return None
    natives = thread_list(space, contract)
    if isinstance(natives, str):  # the list is not in the dump: its threads' statics cannot be known
        return None
    out = []
    for native in natives:
        data = space.try_read_pointer(native + data_ptr)
        if data is None:
            return None
        array = space.try_read_pointer(data + array_at) if data else 0
        if array is None:
            return None
        if array:
            tid = space.try_read(native + os_id, 4)
            out.append(Root("thread static", array, data + array_at, int.from_bytes(tid, "little") if tid else None))
    return out


def _finalizer_roots(dump, dac_vars, graph) -> list | None:
    space = dump.memory
    ptr = space.pointer_size
    queues = finalize_queues(dump, dac_vars)
    if not queues:
        return None
    ngen = dac_vars.generation_count
    out = []
    for queue in queues:
        fill = space.try_read(queue, (ngen + 2) * ptr)
        if fill is None:
            return None
        words = np.frombuffer(fill, dtype="<u8" if ptr == 8 else "<u4").astype(np.int64)
        start, end = int(words[ngen - 1]), int(words[ngen + 1])  # critical, then normal: ready to run
        if end < start or (end - start) // ptr > MAX_QUEUE or (end - start) % ptr:
            return None
        raw = space.try_read(start, end - start) if end > start else b""
        if raw is None:
            return None
        for i, obj in enumerate(np.frombuffer(raw, dtype="<u8" if ptr == 8 else "<u4").tolist()):
            if obj and graph.node(obj) is not None:
                out.append(Root("finalizer (f-reachable)", obj, start + i * ptr))
    return out


def thread_stacks(dump, segments=(), others=()) -> list:
    """``(thread, start, end)`` of each thread's stack in use: from its stack pointer to the end of the memory
    that holds it, cut where a GC heap segment or other memory known not to be a stack (``others``: ``(start,
    end)``) begins.  An ELF core has no stack list: a thread's stack is the PT_LOAD segment that holds its stack
    pointer, and createdump writes adjacent mappings of the same protection as one segment, so a stack can run
    on into the GC heap, or the GC's bookkeeping, reserved above it (their words would then pass for stack
    words)."""
    bounds = sorted([_segment_base(seg) for seg in segments] + [lo for lo, _ in others])
    ptr = dump.memory.pointer_size
    out = []
    for t in dump.threads:
        start = t.sp if t.sp is not None and t.stack_start is not None and t.stack_start <= t.sp else t.stack_start
        if start is None or not t.stack_end or t.stack_end <= start:
            continue
        start -= start % ptr
        end = t.stack_end
        i = bisect.bisect_right(bounds, start)
        if i < len(bounds) and bounds[i] < end:
            end = bounds[i]
        out.append((t, start, end))
    return out


def _segment_base(seg) -> int:
    """Where a GC heap segment's memory begins: its heap_segment header when that lies just below its first
    object (segments and regions), else the page of its first object (a frozen segment: its header is native)."""
    if seg.header is not None and 0 <= seg.start - seg.header <= SEGMENT_HEADER_MAX:
        return seg.header
    return seg.start - seg.start % 4096


def _precise_stack_roots(dump, graph, precise, segments, others, notes: list) -> list:
    """Each thread's precise references (an interior pointer roots the object it points into; a null or a word
    outside the heap roots nothing); a transition Frame's saved argument registers and the stack a walk could
    not account for, conservatively."""
    out = []
    for t in precise.threads:
        for r in t.refs.refs:
            node = _containing(graph, r.object) if r.flags & 1 else graph.node(r.object)
            if node is not None:
                out.append(Root("stack", int(graph.addresses[node]), r.address, t.os_id, r.method_desc, r.sp,
                                r.slot))
        for address, value, _ in t.refs.unsure:
            node = _containing(graph, value)
            if node is not None:
                out.append(Root("stack (conservative)", int(graph.addresses[node]), address, t.os_id))
    incomplete = precise.incomplete
    if incomplete:
        wanted = {t.os_id: t.unwalked_from for t in incomplete}
        out += _stack_roots(dump, graph, segments, others, wanted)
        first = incomplete[0]
        notes.append(f"{first.why}: {len(incomplete)} of {len(precise.threads)} managed threads' stacks could not be "
                     f"walked to their end (the first: {first.os_id:#x}); the rest of each was scanned "
                     "conservatively")
    return out


def _containing(graph, address: int) -> int | None:
    """The node of the object that holds ``address`` (its start or a byte inside it), or None."""
    if not graph.count or not address:
        return None
    i = int(np.searchsorted(graph.addresses, np.uint64(address), side="right")) - 1
    if i < 0 or address >= int(graph.addresses[i]) + int(graph.aligned[i]):
        return None
    return i


def _stack_roots(dump, graph, segments=(), others=(), only: dict | None = None) -> list:
    """Stack words that point into a heap object (``only``: these threads, each from the address given on)."""
    space = dump.memory
    ptr = space.pointer_size
    out = []
    if not graph.count:
        return out
    lo, hi = int(graph.addresses[0]), int(graph.addresses[-1]) + int(graph.aligned[-1])
    for t, start, end in thread_stacks(dump, segments, others):
        if only is not None:
            if t.id not in only:
                continue
            start = max(start, only[t.id] - only[t.id] % ptr)
            if start >= end:
                continue
        data = space.read_available(start, end - start)
        words = np.frombuffer(data, dtype="<u8" if ptr == 8 else "<u4", count=len(data) // ptr).astype(np.uint64)
        near = np.flatnonzero((words >= lo) & (words < hi))
        if not len(near):
            continue
        values = words[near]
        node = np.searchsorted(graph.addresses, values, side="right") - 1
        inside = (node >= 0) & (values < graph.addresses[node] + graph.aligned[node].astype(np.uint64))
        for i, n in zip(near[inside].tolist(), node[inside].tolist()):
            out.append(Root("stack (conservative)", int(graph.addresses[n]), start + i * ptr, t.id))
    return out
