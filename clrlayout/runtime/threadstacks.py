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


def walker_for(dump, contract, version: tuple[int, ...] | None, open_file) -> StackWalker | str:
    """The runtime's stack walker, or why there is none (a sentence): ``contract`` is the runtime's contract
    descriptor (or why it has none), ``open_file(path)`` opens a file the dump maps (for the code a heap dump
    leaves out)."""
    if dump.arch != "x64":
        return (f"managed stacks are walked on x64 dumps only (this one is {dump.arch}): the unwind data of x86 "
                "and arm64 code is not read yet")
    if dump.os != "linux":
        return ("managed stacks are walked in Linux cores only: a Windows dump's thread contexts, its callee-saved "
                "registers and its TransitionBlock differ, and are not read yet")
    if contract is None or isinstance(contract, str):
        return ("managed stacks are walked through the runtime's contract descriptor (.NET 9 and later); this "
                "runtime has none")
    types = {k: dict(v) for k, v in contract.types.items()}
    for layout in formats.load("stack-walk").get("layouts", []):
        if version is not None and version_matches(layout["versions"], version):
            for name, fields in layout.items():
                if isinstance(fields, dict):
                    types.setdefault(name, {}).update(fields)
    missing = [t for t in NEEDED if t not in types]
    if missing or "ExecutionManagerCodeRangeMapAddress" not in contract.globals:
        return ("the contract descriptor does not describe the runtime's code map (missing "
                f"{', '.join(missing) or 'ExecutionManagerCodeRangeMapAddress'})")
    names = {v: k[: -len("Identifier")] for k, v in contract.globals.items()
             if k.endswith("FrameIdentifier") and isinstance(v, int)}
    memory = ImageBackedMemory(dump.memory, dump.file_mappings, open_file)
    code_map = CodeMap(memory, types, contract.globals,
                       nibble_pointers=int(contract.contracts.get("ExecutionManager", 1)) >= 2)
    return StackWalker(memory, code_map, types, contract.globals, names)


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


def precise_stacks(dump, walker: StackWalker, threads, gc_version: int) -> PreciseStacks:
    """The precise references of each of ``threads`` (the runtime's managed threads: ``os_id`` and ``frame``,
    the top of its explicit Frame chain)."""
    from ..dump.model import REGISTER_NAMES

    names = REGISTER_NAMES.get(dump.arch, ())
    registers = {t.id: (dict(zip(names, t.registers)), t.sp) for t in dump.threads}
    out = PreciseStacks()
    for t in threads:
        regs, sp = registers.get(t.os_id, ({}, None))
        walk = walker.walk(regs, t.frame)
        refs = frame_references(walker.space, walk, gc_version, walker.t, walker.gc_cache)
        entry = ThreadRefs(t.os_id, walk, refs)
        if refs.failed:
            first, why = refs.failed[0]
            entry.unwalked_from, entry.why = first.sp, f"the GC info of the frame at {first.ip:#x}: {why}"
        elif walk.error:
            last = walk.frames[-1].sp if walk.frames else regs.get("rsp", sp)
            entry.unwalked_from, entry.why = last if last is not None else 0, walk.error
        out.threads.append(entry)
    return out
