"""Linux ELF core files (createdump, dotnet-dump, gcore, the kernel), through pyelftools.

Memory comes from PT_LOAD segments: ``p_filesz`` bytes at ``p_offset`` are the dumped part of the mapping
(a core leaves out pages it did not save, so ``p_memsz - p_filesz`` bytes are missing, not zero).  Module
paths and bases come from the NT_FILE note, the architecture from ``e_machine``.  pyelftools' exceptions
are converted here, and nothing it reads is larger than the limits allow.
"""

from __future__ import annotations

import io
from dataclasses import dataclass, field

from ..errors import ClrLayoutError, MalformedDump, TruncatedDump
from ..limits import Limits
from .addrspace import AddressSpace
from .model import REGISTER_NAMES, BoundedReader, DumpFile, FileMapping, Module, Thread
from .redaction import NOTE_NAME, NOTE_TYPE, decode

MACHINES = {"EM_X86_64": "x64", "EM_386": "x86", "EM_AARCH64": "arm64", "EM_ARM": "arm"}

#: where NT_PRSTATUS (struct elf_prstatus, linux/elfcore.h) holds the thread id (pr_pid) and the stack
#: pointer inside pr_reg (user_regs_struct: x86-64 rsp is word 19, i386 esp word 15, arm64 sp follows x0-x30,
#: arm r13), and the size of a register, per architecture
PRSTATUS = {"x64": (32, 112 + 19 * 8, 8), "x86": (24, 72 + 15 * 4, 4), "arm64": (32, 112 + 31 * 8, 8),
            "arm": (24, 72 + 13 * 4, 4)}
#: where pr_reg starts in NT_PRSTATUS
PR_REG = {"x64": 112, "x86": 72, "arm64": 112, "arm": 72}
#: registers in pr_reg where the names go on with one from a note of its own (the thread pointer)
PR_REG_COUNT = {"x86": 17, "arm64": 34}
#: the thread's TLS notes (linux/elf.h): NT_386_TLS, i386's GDT TLS entries (struct user_desc: entry_number,
#: base_addr, limit, flags), the one ``gs`` selects being the thread's; NT_ARM_TLS, arm64's TPIDR_EL0 first
NT_386_TLS, NT_ARM_TLS = 0x200, 0x401


@dataclass
class ElfContainer:
    """What ``trim`` needs to rewrite the core."""

    elfclass: int
    little_endian: bool
    header: dict
    #: every program header as a dict (p_type as a string, as pyelftools gives it)
    segments: list = field(default_factory=list)


class _Reader:
    def __init__(self, path: str, limits: Limits):
        self.path = path
        self.limits = limits
        self.warnings: list[str] = []

    def warn(self, message: str) -> None:
        self.warnings.append(message)


def read_elf_core(path: str, source, limits: Limits) -> DumpFile:
    try:
        return _read(path, source, limits)
    except ClrLayoutError:
        raise
    except Exception as e:  # pyelftools (ELFError, its vendored construct, struct.error, ...)
        raise MalformedDump(f"unreadable ELF file: {type(e).__name__}: {e}", path) from e


def _read(path: str, source, limits: Limits) -> DumpFile:
    from elftools.elf.elffile import ELFFile

    r = _Reader(path, limits)
    if source.size < 52:
        raise TruncatedDump("file ends inside the ELF header", path)
    elf = ELFFile(BoundedReader(source, limits.max_stream_bytes))
    if elf["e_type"] != "ET_CORE":
        raise MalformedDump(f"an ELF file of type {elf['e_type']}, not a core dump", path)
    arch = MACHINES.get(elf["e_machine"], "unknown")
    if arch == "unknown":
        r.warn(f"unknown ELF machine {elf['e_machine']}")
    pointer_size = 8 if elf.elfclass == 64 else 4

    phnum, phoff, phentsize = elf["e_phnum"], elf["e_phoff"], elf["e_phentsize"]
    if phnum == PN_XNUM:  # extended numbering: a process with 65,535 mappings or more
        phnum = _extended_count(elf, source, path)
    if phnum and phentsize < elf.structs.Elf_Phdr.sizeof():
        raise MalformedDump(f"program header entry size {phentsize} is too small", path)
    fits = max(0, (source.size - phoff) // phentsize) if phentsize else 0
    if phnum > fits:
        if fits == 0:
            raise TruncatedDump("the program headers are not in the file", path, phoff)
        r.warn(f"the program header table is cut short: {fits:,} of {phnum:,} entries are in the file")
        phnum = fits
    phnum = limits.check("ELF program header count", phnum, "max_program_headers", path)

    # pyelftools reads a field at a time (a file name a byte at a time): from a copy of the file's start
    # in memory, when the program headers and then the notes lie in its first IN_MEMORY bytes, each read
    # is a C call instead of a Python one
    on_disk = elf.stream  # the bounded view of the file
    elf.stream = _stream_for(elf.stream, on_disk, source, phoff + phnum * phentsize)
    segments = [elf.get_segment(i) for i in range(phnum)]
    notes_end = max([s["p_offset"] + s["p_filesz"] for s in segments if s["p_type"] == "PT_NOTE"
                     and s["p_filesz"] <= limits.max_stream_bytes], default=0)
    elf.stream = _stream_for(elf.stream, on_disk, source, notes_end)
    container = ElfContainer(elfclass=elf.elfclass, little_endian=elf.little_endian, header=dict(elf.header))
    regions, missing = [], 0
    described = []  # every mapping, saved or not
    modules: list[Module] = []
    mappings: list[tuple[int, int]] = []
    threads: list[tuple[int, int | None, tuple]] = []  # (thread id, stack pointer, registers)
    pid, process_name, redaction, crash = None, None, None, None
    expected = phoff + phnum * phentsize
    for seg in segments:
        h = dict(seg.header)
        container.segments.append(h)
        if h["p_type"] in ("PT_LOAD", "PT_NOTE") and h["p_filesz"]:
            expected = max(expected, h["p_offset"] + h["p_filesz"])
        if h["p_type"] == "PT_LOAD":
            described.append((h["p_vaddr"], h["p_vaddr"] + h["p_memsz"]))
            size, offset = h["p_filesz"], h["p_offset"]
            if size and offset + size > source.size:
                missing += offset + size - max(offset, source.size)
                size = max(0, source.size - offset)
            if size:
                regions.append((h["p_vaddr"], size, offset))
        elif h["p_type"] == "PT_NOTE":
            if h["p_filesz"] > limits.max_stream_bytes:
                r.warn(f"note segment of {h['p_filesz']:,} bytes is over the limit; skipped")
                continue
            if h["p_offset"] + h["p_filesz"] > source.size:
                r.warn("a note segment runs past the end of the file; skipped")
                continue
            notes = []
            try:
                for note in seg.iter_notes():
                    notes.append(note)
                    if len(notes) >= limits.max_notes:
                        r.warn(f"more than {limits.max_notes:,} notes in one segment; the rest are skipped")
                        break
            except Exception as e:
                r.warn(f"a note could not be parsed ({type(e).__name__}: {e}); the rest of its segment is skipped")
            for note in notes:
                kind = note["n_type"]
                if kind == "NT_PRSTATUS":
                    threads.append(_prstatus(note["n_desc"], arch, elf.little_endian))
                    signal = _cursig(note["n_desc"])
                    if signal and crash is None:
                        crash = {"thread": threads[-1][0], "signal": signal}
                elif kind == "NT_PRPSINFO":
                    d = note["n_desc"]
                    pid = d.get("pr_pid")
                    name = d.get("pr_fname", b"")
                    process_name = name.split(b"\0")[0].decode("utf-8", "replace") if isinstance(name, bytes) else None
                elif kind == "NT_FILE":
                    modules, mappings = _modules_from_nt_file(r, note["n_desc"])
                elif kind in (NT_386_TLS, NT_ARM_TLS) and threads and isinstance(note["n_desc"], bytes):
                    threads[-1] = _with_thread_pointer(threads[-1], arch, kind, note["n_desc"])
                elif note["n_name"] == NOTE_NAME.decode() and kind == NOTE_TYPE and isinstance(note["n_desc"], bytes):
                    redaction = decode(note["n_desc"])
    if not modules:
        r.warn("no NT_FILE note: module paths and bases are unknown")
    limits.check("memory range count", len(regions), "max_memory_ranges", path)
    space = AddressSpace(source, regions, pointer_size, little_endian=elf.little_endian, limits=limits,
                         described=described)
    if space.overlaps:
        r.warn(f"{space.overlaps} PT_LOAD segments overlap others; the first copy is used")
    return DumpFile(path=path, format="elf-core", arch=arch, pointer_size=pointer_size, os="linux", memory=space,
                modules=modules, threads=[_thread(space, *t) for t in threads], pid=pid, crash=crash,
                process_name=process_name, warnings=r.warnings, container=container, file_size=source.size,
                expected_size=expected, file_mappings=mappings, redaction=redaction)


#: e_phnum's value that says the count of program headers is section header 0's sh_info (elf(5): the kernel writes
#: it for a process with that many mappings or more)
PN_XNUM = 0xFFFF


def _extended_count(elf, source, path: str) -> int:
    """The number of program headers of a core with extended numbering: section header 0's ``sh_info``."""
    shoff, size = elf["e_shoff"], elf.structs.Elf_Shdr.sizeof()
    if not shoff or elf["e_shentsize"] < size:
        raise MalformedDump("e_phnum is PN_XNUM (extended numbering), but there is no section header 0 with the "
                            "real count", path)
    data = source.pread(shoff, size)
    if len(data) < size:
        raise TruncatedDump("the section header that holds the program header count is not in the file", path, shoff)
    return elf.structs.Elf_Shdr.parse(data)["sh_info"]


def _cursig(desc) -> int:
    """pr_cursig of an NT_PRSTATUS note's description: the signal the thread got (the crash's), else 0."""
    return int.from_bytes(desc[12:14], "little") if isinstance(desc, bytes) and len(desc) >= 14 else 0


def _prstatus(desc, arch: str, little: bool) -> tuple[int, int | None, tuple[int, ...]]:
    """(thread id, stack pointer, general registers) of an NT_PRSTATUS note's description (raw bytes to
    pyelftools)."""
    if not isinstance(desc, bytes) or arch not in PRSTATUS:
        return 0, None, ()
    pid_at, sp_at, size = PRSTATUS[arch]
    order = "little" if little else "big"
    tid = int.from_bytes(desc[pid_at : pid_at + 4], order) if len(desc) >= pid_at + 4 else 0
    sp = int.from_bytes(desc[sp_at : sp_at + size], order) if len(desc) >= sp_at + size else None
    regs_at, count = PR_REG[arch], PR_REG_COUNT.get(arch, len(REGISTER_NAMES.get(arch, ())))
    registers: tuple[int, ...] = ()
    if count and len(desc) >= regs_at + count * size:
        registers = tuple(int.from_bytes(desc[regs_at + i * size : regs_at + (i + 1) * size], order)
                          for i in range(count))
    return tid, sp, registers


def _thread(space: AddressSpace, tid: int, sp: int | None, registers: tuple[int, ...] = ()) -> Thread:
    """A thread whose stack is the memory segment that holds its stack pointer (a core has no stack list)."""
    region = space.region_at(sp) if sp else None
    if region is None:
        return Thread(tid, sp=sp, registers=registers)
    return Thread(tid, region.start, region.end, sp, registers)


IN_MEMORY = 1 << 20


def _stream_for(current, on_disk, source, end: int):
    """Where pyelftools reads the file's first ``end`` bytes: a copy in memory when they are at most
    IN_MEMORY bytes (``current`` if it holds them already), else the file itself."""
    if end > IN_MEMORY:
        return on_disk
    if isinstance(current, io.BytesIO) and current.getbuffer().nbytes >= min(end, source.size):
        return current
    return io.BytesIO(source.pread(0, min(end, source.size)))


def _modules_from_nt_file(r: _Reader, desc) -> tuple[list[Module], list[FileMapping]]:
    """One module per mapped file (its lowest mapping is the base, the highest end bounds its size), and
    every mapping as it is."""
    entries = desc.get("Elf_Nt_File_Entry", [])
    names = desc.get("filename", [])
    page = desc.get("page_size", 4096) or 4096
    if len(entries) > r.limits.max_modules:
        r.warn(f"NT_FILE lists {len(entries):,} mappings; reading {r.limits.max_modules:,}")
        entries = entries[: r.limits.max_modules]
    offsets = [e.get("page_offset", 0) for e in entries]
    if any(offsets) and all(o % page == 0 for o in offsets):
        # createdump before .NET Core 3.0 wrote byte offsets under a page size of 4096 (2.2.5: libcoreclr.so's
        # data at 0x5e9000, CoreLib's sections up to 0xb08000 of an 11.7 MB file); the kernel and later
        # createdumps write page numbers, which are not all multiples of the page size
        page = 1
    mappings = []
    for entry, name in zip(entries, names):
        path = name.decode("utf-8", "replace") if isinstance(name, bytes) else str(name)
        lo, hi = entry["vm_start"], entry["vm_end"]
        if hi <= lo:
            continue
        mappings.append(FileMapping(lo, hi, entry.get("page_offset", 0) * page, path))
    mappings.sort()
    return _modules(mappings), mappings


#: how far a module's segment may lie from its file offset (ELF segments are aligned to at most 2 MB on x64 and
#: arm64; a PE section's RVA exceeds its file offset by its alignments)
MAX_SEGMENT_SLIDE = 16 << 20


def _modules(mappings: list[FileMapping]) -> list[Module]:
    """One module a file: from its lowest mapping at file offset 0 (else its lowest), through the mappings of the
    same file that follow it with no other file's between and at about their file offset from its base (its
    segments: an ELF segment's address less the base is its file offset plus less than its alignment, a PE
    section's its RVA).  A file's other mappings elsewhere (a single-file app's bundled assemblies, mapped from
    inside its executable far above it) are not the module's: a span over them would be terabytes."""
    first: dict[str, int] = {}
    for i, m in enumerate(mappings):
        if m.path not in first or (m.offset == 0 and mappings[first[m.path]].offset != 0):
            first[m.path] = i
    modules = []
    for path, i in first.items():
        lo, hi, j = mappings[i].start, mappings[i].end, i + 1
        while j < len(mappings) and mappings[j].path == path and \
                abs(mappings[j].start - lo - mappings[j].offset) <= MAX_SEGMENT_SLIDE:
            hi, j = mappings[j].end, j + 1
        modules.append(Module(path=path, base=lo, size=hi - lo))
    return sorted(modules, key=lambda m: m.base)


def _with_thread_pointer(thread: tuple, arch: str, kind: int, desc: bytes) -> tuple:
    """The thread (as :func:`_prstatus` gives it) with its TLS pointer after its NT_PRSTATUS registers, from the
    TLS note that follows them: i386's ``gs_base`` (the base of the GDT entry its ``gs`` selects), arm64's
    ``tpidr_el0``."""
    tid, sp, registers = thread
    if len(registers) != PR_REG_COUNT.get(arch):
        return thread
    if arch == "arm64" and kind == NT_ARM_TLS and len(desc) >= 8:
        return tid, sp, registers + (int.from_bytes(desc[:8], "little"),)
    if arch == "x86" and kind == NT_386_TLS:
        entry = registers[REGISTER_NAMES["x86"].index("xgs")] >> 3
        for at in range(0, len(desc) - 15, 16):
            number, base = int.from_bytes(desc[at:at + 4], "little"), int.from_bytes(desc[at + 4:at + 8], "little")
            if number == entry:
                return tid, sp, registers + (base,)
    return thread
