"""The stack walker of one dump's runtime, and the precise references on its managed threads' stacks: the walker
built from the runtime's contract descriptor (.NET 9 and later, x64; formats/stack-walk.toml adds what the
descriptor leaves out), every managed thread walked from its registers, and each frame's live slots read from its
GC info (:mod:`.stackrefs`).  Where a walk stops early (a frame it cannot unwind, code it cannot find, GC info it
cannot decode), the thread's stack from there on is left for a conservative scan, and said."""

from __future__ import annotations

from dataclasses import dataclass, field

from .. import formats
from .codemap import CodeMap
from .imagememory import ImageBackedMemory
from .profiles import version_matches
from .stackrefs import FrameRefs, frame_references
from .stackwalk import StackWalker, Walk

#: what the walker reads that the contract descriptor must describe
NEEDED = ("RangeSectionMap", "RangeSectionFragment", "RangeSection", "CodeHeapListNode", "RealCodeHeader", "Module",
          "ReadyToRunInfo", "HashMap", "Bucket", "Frame", "InlinedCallFrame")


def walker_for(dump, contract, version: tuple[int, ...] | None, open_file,
               dac_table: dict | None = None) -> StackWalker | str:
    """The runtime's stack walker, or why there is none (a sentence): ``contract`` is the runtime's contract
    descriptor (.NET 9+; or why it has none); before .NET 9, formats/stack-walk.toml's layout for the version, its
    globals found through the runtime's table of DAC globals (``dac_table``: where :func:`~.threadstore.
    finalizer_thread` found it).  ``open_file(path)`` opens a file the dump maps (the code a heap dump leaves
    out, a native library's call frame information)."""
    if dump.arch != "x64":
        return (f"managed stacks are walked on x64 dumps only (this one is {dump.arch}): the unwind data of x86 "
                "and arm64 code is not read yet")
    if dump.os != "linux":
        return ("managed stacks are walked in Linux cores only: a Windows dump's thread contexts, its callee-saved "
                "registers and its TransitionBlock differ, and are not read yet")
    layout = next((e for e in formats.load("stack-walk").get("layouts", [])
                   if version is not None and version_matches(e["versions"], version)), None)
    if contract is not None and not isinstance(contract, str):
        types = {k: dict(v) for k, v in contract.types.items()}
        globals_ = dict(contract.globals)
        names = {v: k[: -len("Identifier")] for k, v in globals_.items()
                 if k.endswith("FrameIdentifier") and isinstance(v, int)}
        gc_version = globals_.get("GCInfoVersion")
        pointers = int(contract.contracts.get("ExecutionManager", 1)) >= 2
    elif layout is not None and "dac_table" in layout:
        found = _by_dac_table(dump.memory, layout, dac_table)
        if isinstance(found, str):
            return found
        types, globals_, names = {}, found[0], found[1]
        gc_version, pointers = layout.get("gc_info_version"), bool(layout.get("nibble_pointers"))
    else:
        return ("managed stacks are walked through the runtime's contract descriptor (.NET 9 and later) or a "
                "layout of formats/stack-walk.toml (.NET Core 3.1, .NET 8); this runtime has neither")
    for name, fields in (layout or {}).items():
        if isinstance(fields, dict) and name != "dac_table":
            types.setdefault(name, {}).update(fields)
    listed = "ExecutionManagerCodeRangeList" in globals_
    unused = ("RangeSectionMap", "RangeSectionFragment") if listed else ()
    missing = [t for t in NEEDED if t not in types and t not in unused]
    if missing or not (listed or "ExecutionManagerCodeRangeMapAddress" in globals_) \
            or not isinstance(gc_version, int):
        return ("the runtime's code map is not described (missing "
                f"{', '.join(missing) or 'ExecutionManagerCodeRangeMapAddress or GCInfoVersion'})")
    memory = ImageBackedMemory(dump.memory, dump.file_mappings, open_file)
    code_map = CodeMap(memory, types, globals_, nibble_pointers=pointers)
    walker = StackWalker(memory, code_map, types, globals_, names, _NativeCode(dump, open_file))
    walker.gc_version = gc_version
    return walker


def _by_dac_table(space, layout: dict, dac_table: dict | None) -> tuple[dict, dict] | str:
    """Before .NET 9: the code map's address and the Frames' vtables from the runtime's table of DAC globals."""
    spec = layout["dac_table"]
    if not dac_table or dac_table.get("form") != spec.get("form"):
        return "the runtime's table of DAC globals was not found (its code map and Frames are named there)"
    width = 8 if spec["form"] == "address" else 4

    def entry(k: int) -> int | None:
        raw = space.try_read(dac_table["address"] + width * k, width)
        if raw is None:
            return None
        value = int.from_bytes(raw, "little")
        return value if width == 8 else dac_table["module"] + value

    listed = "code_range_list" in spec  # before .NET 8: a list of RangeSections, not a map
    top = entry(spec["code_range_list" if listed else "code_range_map"])
    if top is None:
        return "the runtime's table of DAC globals is not in the dump"
    names = {}
    for k, name in spec["frames"].items():
        vtable = entry(int(k))
        if vtable:
            names[vtable] = name
    globals_ = {"ExecutionManagerCodeRangeList" if listed else "ExecutionManagerCodeRangeMapAddress": top,
                "StubCodeBlockLast": spec.get("stub_code_block_last", 0xF)}
    if "fcall_methods" in spec:
        fcalls = entry(spec["fcall_methods"])
        if fcalls:
            globals_["FCallMethods"] = fcalls
    return globals_, names


class _NativeCode:
    """The call frame information of the native libraries a dump maps, each read once from its file."""

    def __init__(self, dump, open_file):
        import bisect

        self._bisect = bisect
        self._mappings = sorted(m for m in dump.file_mappings if m.path.endswith(".so") or ".so." in m.path)
        self._starts = [m.start for m in self._mappings]
        self._open = open_file
        self._unwinders: dict = {}

    def unwinder(self, ip: int):
        i = self._bisect.bisect_right(self._starts, ip) - 1
        if i < 0 or ip >= self._mappings[i].end:
            return None
        path = self._mappings[i].path
        if path not in self._unwinders:
            from .nativeunwind import NativeUnwinder

            starts = [m.start for m in self._mappings if m.path == path and m.offset == 0]
            bias = min(starts) if starts else min(m.start - m.offset for m in self._mappings if m.path == path)
            f = self._open(path)
            try:
                self._unwinders[path] = NativeUnwinder(f.path, bias) if f is not None else None
            except Exception:  # no usable call frame information (or a file not of its kind): no unwind there
                self._unwinders[path] = None
        return self._unwinders[path]


@dataclass
class ThreadRefs:
    """One managed thread's precise stack references, and what of its stack they do not cover."""

    os_id: int
    walk: Walk
    refs: FrameRefs
    #: where the stack the walk could not account for begins (None: it accounted for all of it): the SP of the
    #: frame it stopped at, or of the thread when it found no frame
    unwalked_from: int | None = None
    #: why (the walk's error, or a frame's GC info that could not be decoded)
    why: str = ""


@dataclass
class PreciseStacks:
    threads: list[ThreadRefs] = field(default_factory=list)

    @property
    def incomplete(self) -> list[ThreadRefs]:
        return [t for t in self.threads if t.unwalked_from is not None]


def precise_stacks(dump, walker: StackWalker, threads, gc_version: int | None = None) -> PreciseStacks:
    """The precise references of each of ``threads`` (the runtime's managed threads: ``os_id`` and ``frame``,
    the top of its explicit Frame chain)."""
    registers = {t.id: (t.context(dump.arch), t.sp) for t in dump.threads}
    out = PreciseStacks()
    for t in threads:
        regs, sp = registers.get(t.os_id, ({}, None))
        walk = walker.walk(regs, t.frame)
        refs = frame_references(walker.space, walk, gc_version or walker.gc_version, walker.t, walker.gc_cache)
        entry = ThreadRefs(t.os_id, walk, refs)
        if refs.failed:
            first, why = refs.failed[0]
            entry.unwalked_from, entry.why = first.sp, f"the GC info of the frame at {first.ip:#x}: {why}"
        elif walk.error:
            last = walk.frames[-1].sp if walk.frames else regs.get("rsp", sp)
            entry.unwalked_from, entry.why = last if last is not None else 0, walk.error
        out.threads.append(entry)
    return out
