"""What every dump reader produces: the dumped process as a :class:`DumpFile` (its memory, modules, threads),
and the bounded file view third-party parsers read through."""

from __future__ import annotations

import ntpath
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from .addrspace import AddressSpace


class FileMapping(NamedTuple):
    """One mapping of a file into the process (an ELF core's NT_FILE entry): [start, end) holds the file's
    bytes from ``offset`` on."""

    start: int
    end: int
    offset: int
    path: str


@dataclass(frozen=True)
class Module:
    """A module (image or shared library) mapped in the dumped process."""

    path: str
    base: int
    size: int
    #: (major, minor, build, revision) from the PE version resource, when the dump has it
    file_version: tuple[int, int, int, int] | None = None
    product_version: tuple[int, int, int, int] | None = None
    timestamp: int | None = None

    @property
    def name(self) -> str:
        return ntpath.basename(self.path.replace("/", "\\"))

    @property
    def end(self) -> int:
        return self.base + self.size

    def contains(self, address: int) -> bool:
        return self.base <= address < self.end


@dataclass(frozen=True)
class Thread:
    """A thread of the dumped process: its OS id, and its stack as far as the dump tells it."""

    id: int
    #: the stack's memory: a minidump's stack descriptor; in an ELF core, the mapping that holds the stack pointer
    stack_start: int | None = None
    stack_end: int | None = None
    #: the stack pointer when the dump was written (None: no register context)
    sp: int | None = None
    #: the general registers when the dump was written, in the order of :data:`REGISTER_NAMES` for the
    #: dump's architecture (an ELF core's ``pr_reg``); empty where the dump does not have them
    registers: tuple[int, ...] = ()

    def context(self, arch: str) -> dict[str, int]:
        """The registers the dump holds, by name (empty where it holds none)."""
        return dict(zip(REGISTER_NAMES.get(arch, ()), self.registers))

    def register(self, arch: str, name: str) -> int | None:
        """One register by its name (``rip``, ``fs_base``...), or None where the dump does not hold it."""
        names = REGISTER_NAMES.get(arch, ())
        i = names.index(name) if name in names else -1
        return self.registers[i] if 0 <= i < len(self.registers) else None


#: the general registers of an ELF core's NT_PRSTATUS (``struct user_regs_struct``, sys/user.h), per architecture
REGISTER_NAMES = {
    "x64": ("r15", "r14", "r13", "r12", "rbp", "rbx", "r11", "r10", "r9", "r8", "rax", "rcx", "rdx", "rsi", "rdi",
            "orig_rax", "rip", "cs", "eflags", "rsp", "ss", "fs_base", "gs_base", "ds", "es", "fs", "gs"),
    "x86": ("ebx", "ecx", "edx", "esi", "edi", "ebp", "eax", "xds", "xes", "xfs", "xgs", "orig_eax", "eip", "xcs",
            "eflags", "esp", "xss", "gs_base"),  # gs_base: from NT_386_TLS, where the core has it
    "arm64": tuple(f"x{i}" for i in range(31)) + ("sp", "pc", "pstate", "tpidr_el0"),  # from NT_ARM_TLS
}


@dataclass(frozen=True)
class MemoryInfo:
    """One entry of a minidump's MemoryInfoList (what VirtualQuery said of a range of address space)."""

    base: int
    size: int
    allocation_base: int
    state: str  # "commit" | "reserve" | "free"
    type: str  # "image" | "mapped" | "private" | "" (free memory has no type)
    protect: int  # PAGE_* flags
    allocation_protect: int

    @property
    def end(self) -> int:
        return self.base + self.size


@dataclass
class DumpFile:
    """What every reader provides: the dump file as read (the engine's; the model's :class:`clrlayout.Dump` is the
    one users open)."""

    path: str
    format: str  # "minidump" | "elf-core"
    arch: str  # "x86" | "x64" | "arm64" | "arm" | "unknown"
    pointer_size: int
    os: str  # "windows" | "linux" | ...
    memory: AddressSpace
    modules: list[Module] = field(default_factory=list)
    threads: list[Thread] = field(default_factory=list)
    pid: int | None = None
    process_name: str | None = None
    os_version: str | None = None
    warnings: list[str] = field(default_factory=list)
    #: reader-specific description of the container, used by ``trim``
    container: Any = None
    #: a minidump's MemoryInfoList: the whole address space, committed, reserved and free (empty: none)
    memory_info: list[MemoryInfo] = field(default_factory=list)
    #: the file's size, and the size its own tables say it has (its streams, notes and memory)
    file_size: int = 0
    expected_size: int = 0
    #: an ELF core's NT_FILE mappings, one per mapping, sorted: a module's span from its lowest to its
    #: highest mapping can enclose other memory (CoreLib is mapped twice, far apart), its mappings do not
    file_mappings: list[FileMapping] = field(default_factory=list)
    #: the mark of a dump ``trim --redact`` wrote (:mod:`clrlayout.dump.redaction`): what it lacks; None: not one
    redaction: dict | None = None
    #: what the dump was written for, where it says: {"thread": OS id, and "signal" (a core's pr_cursig) or
    #: "code" and "address" (a minidump's exception stream)}; None: a dump taken of a running process
    crash: dict | None = None

    def file_backed_ranges(self) -> list[tuple[int, int]]:
        """The address ranges a file backs (module images, mapped files), sorted: memory no GC object lives in."""
        if self.file_mappings:
            ranges = [(m.start, m.end) for m in self.file_mappings]
        else:
            ranges = [(m.base, m.end) for m in self.modules]
        ranges += [(i.base, i.end) for i in self.memory_info if i.type in ("image", "mapped")]
        return sorted(ranges)

    def executable(self, address: int) -> bool | None:
        """Whether the process could execute the memory at ``address``: a minidump's memory-info list
        (PAGE_EXECUTE*), an ELF core's PT_LOAD flags (PF_X); None where the dump does not say."""
        for i in self.memory_info:
            if i.base <= address < i.end:
                return i.state == "commit" and bool(i.protect & 0xF0)
        segments = getattr(self.container, "segments", None) or []
        for h in segments:
            if h.get("p_type") == "PT_LOAD" and h["p_vaddr"] <= address < h["p_vaddr"] + h["p_memsz"]:
                return bool(h.get("p_flags", 0) & 1)
        return None

    @property
    def truncated_bytes(self) -> int:
        """Bytes the file's own tables describe past its end (0: the file is whole)."""
        return max(0, self.expected_size - self.file_size)

    def truncation(self) -> str | None:
        """One sentence on the file being cut short, or None when it is whole."""
        if not self.truncated_bytes:
            return None
        return (f"the dump file is truncated: it holds {self.file_size:,} of the {self.expected_size:,} bytes its "
                f"own tables describe ({self.truncated_bytes:,} missing)")

    def close(self) -> None:
        self.memory.close()

    def __enter__(self) -> DumpFile:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class BoundedReader:
    """A read-only file-like view of a source for third-party parsers: no single read returns more than
    ``limit`` bytes, whatever size the parser asks for (sizes come from the untrusted file).  Small reads
    are served from one read-ahead block (parsers read a field at a time: a core's file table took
    13,000 reads)."""

    AHEAD = 64 * 1024

    def __init__(self, source, limit: int):
        self._source = source
        self._limit = limit
        self._pos = 0
        self._block_at = 0
        self._block = b""

    def seek(self, offset: int, whence: int = 0) -> int:
        if whence == 1:
            offset += self._pos
        elif whence == 2:
            offset += self._source.size
        self._pos = max(0, offset)
        return self._pos

    def tell(self) -> int:
        return self._pos

    def read(self, n: int = -1) -> bytes:
        remaining = max(0, self._source.size - self._pos)
        n = min(remaining if n is None or n < 0 else min(n, remaining), self._limit)
        at = self._pos - self._block_at
        if not at >= 0 or at + n > len(self._block):
            if n > self.AHEAD // 4:  # a big read goes straight to the source
                data = self._source.pread(self._pos, n)
                self._pos += len(data)
                return data
            self._block_at, self._block, at = self._pos, self._source.pread(self._pos, self.AHEAD), 0
        data = self._block[at : at + n]
        self._pos += len(data)
        return data
