"""Windows minidumps (MDMP), read on any OS: one reader, one function per stream.

The structures are construct structs with the names of minidumpapiset.h; the same structs write the
dumps that ``trim`` makes, so reading and writing share one definition of the format.  Every count and
RVA is checked against the file and :class:`~clrlayout.limits.Limits` before anything is read.  The
streams clrlayout needs (SystemInfo, ModuleList, MemoryList, Memory64List, ThreadList, MemoryInfoList,
MiscInfo) each have a function here.  Unknown and reserved stream types (Wine writes a private 0xFFF0
one) are skipped and listed by ``info`` (``other_streams``).

The ``minidump`` package was a second reader before: it is not used any more, because its enums raise on
values real dumps hold (PROCESSOR_ARCHITECTURE_ARM64 = 12, Breakpad's platform ids) or drop them (a
guard page's protection, PAGE_READWRITE | PAGE_GUARD), and it loops over counts read from the file.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from construct import Array, Bytes, Const, ConstructError, Int16ul, Int32ul, Int64ul, Struct, this

from ..errors import MalformedDump, TruncatedDump
from ..limits import Limits
from .addrspace import AddressSpace
from .model import DumpFile, MemoryInfo, Module, Thread
from .redaction import MAX_MARK, from_comment

# --- raw structures (names as in minidumpapiset.h); also used by trim to write dumps ----------------

MINIDUMP_HEADER = Struct(
    "Signature" / Const(b"MDMP"),
    "Version" / Int16ul,
    "ImplementationVersion" / Int16ul,
    "NumberOfStreams" / Int32ul,
    "StreamDirectoryRva" / Int32ul,
    "CheckSum" / Int32ul,
    "TimeDateStamp" / Int32ul,
    "Flags" / Int64ul,
)
MINIDUMP_LOCATION_DESCRIPTOR = Struct("DataSize" / Int32ul, "Rva" / Int32ul)
MINIDUMP_DIRECTORY = Struct("StreamType" / Int32ul, "Location" / MINIDUMP_LOCATION_DESCRIPTOR)
MINIDUMP_MEMORY_DESCRIPTOR = Struct("StartOfMemoryRange" / Int64ul, "Memory" / MINIDUMP_LOCATION_DESCRIPTOR)
MINIDUMP_MEMORY_DESCRIPTOR64 = Struct("StartOfMemoryRange" / Int64ul, "DataSize" / Int64ul)
MINIDUMP_MEMORY64_LIST_HEADER = Struct("NumberOfMemoryRanges" / Int64ul, "BaseRva" / Int64ul)
VS_FIXEDFILEINFO = Struct(
    "dwSignature" / Int32ul, "dwStrucVersion" / Int32ul,
    "dwFileVersionMS" / Int32ul, "dwFileVersionLS" / Int32ul,
    "dwProductVersionMS" / Int32ul, "dwProductVersionLS" / Int32ul,
    "dwFileFlagsMask" / Int32ul, "dwFileFlags" / Int32ul, "dwFileOS" / Int32ul,
    "dwFileType" / Int32ul, "dwFileSubtype" / Int32ul, "dwFileDateMS" / Int32ul, "dwFileDateLS" / Int32ul,
)
MINIDUMP_MODULE = Struct(
    "BaseOfImage" / Int64ul,
    "SizeOfImage" / Int32ul,
    "CheckSum" / Int32ul,
    "TimeDateStamp" / Int32ul,
    "ModuleNameRva" / Int32ul,
    "VersionInfo" / VS_FIXEDFILEINFO,
    "CvRecord" / MINIDUMP_LOCATION_DESCRIPTOR,
    "MiscRecord" / MINIDUMP_LOCATION_DESCRIPTOR,
    "Reserved0" / Int64ul,
    "Reserved1" / Int64ul,
)
MINIDUMP_THREAD = Struct(
    "ThreadId" / Int32ul,
    "SuspendCount" / Int32ul,
    "PriorityClass" / Int32ul,
    "Priority" / Int32ul,
    "Teb" / Int64ul,
    "Stack" / MINIDUMP_MEMORY_DESCRIPTOR,
    "ThreadContext" / MINIDUMP_LOCATION_DESCRIPTOR,
)
SYSTEM_INFO_PREFIX = Struct(
    "ProcessorArchitecture" / Int16ul,
    "ProcessorLevel" / Int16ul,
    "ProcessorRevision" / Int16ul,
    "NumberOfProcessors" / Bytes(1),
    "ProductType" / Bytes(1),
    "MajorVersion" / Int32ul,
    "MinorVersion" / Int32ul,
    "BuildNumber" / Int32ul,
    "PlatformId" / Int32ul,
    "CSDVersionRva" / Int32ul,
)
MINIDUMP_MEMORY_INFO_LIST = Struct("SizeOfHeader" / Int32ul, "SizeOfEntry" / Int32ul, "NumberOfEntries" / Int64ul)
MINIDUMP_MEMORY_INFO = Struct(
    "BaseAddress" / Int64ul,
    "AllocationBase" / Int64ul,
    "AllocationProtect" / Int32ul,
    "_alignment1" / Int32ul,
    "RegionSize" / Int64ul,
    "State" / Int32ul,
    "Protect" / Int32ul,
    "Type" / Int32ul,
    "_alignment2" / Int32ul,
)
MINIDUMP_MISC_INFO = Struct("SizeOfInfo" / Int32ul, "Flags1" / Int32ul, "ProcessId" / Int32ul)
MINIDUMP_MISC1_PROCESS_ID = 0x1
MINIDUMP_STRING_HEADER = Struct("Length" / Int32ul)
MINIDUMP_STRING = Struct("Length" / Int32ul, "Buffer" / Bytes(this.Length))

HEADER_SIZE = MINIDUMP_HEADER.sizeof()  # 32
DIRECTORY_ENTRY_SIZE = MINIDUMP_DIRECTORY.sizeof()  # 12
MODULE_SIZE = MINIDUMP_MODULE.sizeof()  # 108
THREAD_SIZE = MINIDUMP_THREAD.sizeof()  # 48
MEMORY_DESCRIPTOR_SIZE = MINIDUMP_MEMORY_DESCRIPTOR.sizeof()  # 16
MEMORY_DESCRIPTOR64_SIZE = MINIDUMP_MEMORY_DESCRIPTOR64.sizeof()  # 16
MEMORY_INFO_SIZE = MINIDUMP_MEMORY_INFO.sizeof()  # 48

# MINIDUMP_STREAM_TYPE values clrlayout reads
THREAD_LIST = 3
MODULE_LIST = 4
MEMORY_LIST = 5
EXCEPTION = 6
SYSTEM_INFO = 7
MEMORY64_LIST = 9
COMMENT_A = 10
MISC_INFO = 15
MEMORY_INFO_LIST = 16
# MINIDUMP_TYPE flags of the header
MINIDUMP_WITH_FULL_MEMORY = 0x2
KNOWN_STREAM_TYPES = set(range(26)) | {0xFFFF}

# SystemInfo.ProcessorArchitecture -> clrlayout arch
PROCESSOR_ARCHITECTURES = {0: "x86", 9: "x64", 12: "arm64", 0x8003: "arm64", 5: "arm"}
POINTER_SIZES = {"x86": 4, "x64": 8, "arm64": 8, "arm": 4}
#: where the thread context (CONTEXT, winnt.h) holds the stack pointer: Rsp, Esp, Sp
CONTEXT_SP = {"x64": (0x98, 8), "x86": (0xC4, 4), "arm64": (0x100, 8)}
# MINIDUMP_MEMORY_INFO State and Type values (winnt.h MEM_*)
MEMORY_STATES = {0x1000: "commit", 0x2000: "reserve", 0x10000: "free"}
MEMORY_TYPES = {0x1000000: "image", 0x40000: "mapped", 0x20000: "private", 0: ""}
# SystemInfo.PlatformId -> OS (Windows values, then Breakpad's)
PLATFORMS = {2: "windows", 1: "windows", 0x8000: "unix", 0x8101: "macos", 0x8102: "ios",
             0x8201: "linux", 0x8202: "solaris", 0x8203: "android", 0x8204: "ps3", 0x8205: "nacl"}


@dataclass
class MinidumpContainer:
    """The parts of the file that ``trim`` rewrites."""

    header: object
    directory: list = field(default_factory=list)  # [(StreamType, DataSize, Rva)]
    memory_list_kind: str | None = None  # "Memory64List" | "MemoryList"
    skipped_streams: list = field(default_factory=list)  # [stream type]


def _version(ms: int, ls: int) -> tuple[int, int, int, int]:
    return (ms >> 16, ms & 0xFFFF, ls >> 16, ls & 0xFFFF)


class _Reader:
    """The file and what reading it found wrong; every struct is parsed through :meth:`parse`."""

    def __init__(self, path: str, source, limits: Limits):
        self.path = path
        self.source = source
        self.limits = limits
        self.warnings: list[str] = []

    def warn(self, message: str) -> None:
        self.warnings.append(message)

    def parse(self, struct, offset: int, what: str):
        data = self.source.pread(offset, struct.sizeof())
        if len(data) < struct.sizeof():
            raise TruncatedDump(f"file ends inside the {what}", self.path, offset)
        try:
            return struct.parse(data)
        except ConstructError as e:
            raise MalformedDump(f"bad {what}: {e}", self.path, offset) from e

    def entries(self, struct, offset: int, count: int):
        """``count`` structs back to back from ``offset`` (the count already checked to fit)."""
        raw = self.source.pread(offset, count * struct.sizeof())
        return Array(len(raw) // struct.sizeof(), struct).parse(raw)

    def string(self, rva: int) -> str | None:
        """A MINIDUMP_STRING (UTF-16LE, its length in bytes first), at most ``max_name_chars`` long."""
        if not rva:
            return None
        head = self.source.pread(rva, 4)
        if len(head) < 4:
            return None
        length = min(int.from_bytes(head, "little"), 2 * self.limits.max_name_chars) & ~1
        return self.source.pread(rva + 4, length).decode("utf-16-le", errors="replace")

    def stream(self, entry, what: str, header: int) -> bool:
        """Whether a stream of at least ``header`` bytes is in the file and within the limit (else, but for an
        empty stream, a warning)."""
        size, rva = entry.Location.DataSize, entry.Location.Rva
        if size < header:  # an empty stream (some writers emit them): nothing to read
            return False
        if size > self.limits.max_stream_bytes:
            self.warn(f"{what} stream of {size:,} bytes is over the limit; skipped")
            return False
        if rva + size > self.source.size:
            self.warn(f"{what} stream at {rva:#x} runs past the end of the file; skipped")
            return False
        return True

    def fitting_count(self, entry, count: int, header: int, item: int, what: str, limit_name: str) -> int:
        """``count`` cut to what the stream can hold, with a warning when cut."""
        fits = max(0, (entry.Location.DataSize - header) // item)
        if count > fits:
            self.warn(f"{what} says {count:,} entries but its stream holds {fits:,}; reading {fits:,}")
            count = fits
        limit = getattr(self.limits, limit_name)
        if count > limit:
            self.warn(f"{what} has {count:,} entries, over the limit of {limit:,}; reading {limit:,}")
            count = limit
        return count

    def list_count(self, entry, item: int, what: str, limit_name: str) -> int:
        """The checked count of a stream that is a 32-bit count followed by ``item``-byte entries."""
        count = int.from_bytes(self.source.pread(entry.Location.Rva, 4), "little")
        return self.fitting_count(entry, count, 4, item, what, limit_name)


def read_minidump(path: str, source, limits: Limits) -> DumpFile:
    r = _Reader(path, source, limits)
    header = r.parse(MINIDUMP_HEADER, 0, "minidump header")
    container = MinidumpContainer(header=header)
    streams = _directory(r, header, container)

    arch, os_name, os_version = _system_info(r, streams.get(SYSTEM_INFO))
    pointer_size = POINTER_SIZES.get(arch, 8)
    regions = []
    for kind, read in (("Memory64List", _memory64_list), ("MemoryList", _memory_list)):
        found = read(r, streams.get(MEMORY64_LIST if kind == "Memory64List" else MEMORY_LIST))
        if found is not None:
            container.memory_list_kind = container.memory_list_kind or kind
            regions += found
    modules = _module_list(r, streams.get(MODULE_LIST))
    threads = _thread_list(r, streams.get(THREAD_LIST), arch)
    memory_info = _memory_info_list(r, streams.get(MEMORY_INFO_LIST))
    pid = _misc_info(r, streams.get(MISC_INFO))
    redaction = _comment_mark(r, streams.get(COMMENT_A))
    crash = _exception(r, streams.get(EXCEPTION))

    # streams of other types (Wine's private 0xFFF0, a tool's own) are not read: not a problem of the dump's,
    # so no warning; `info` lists them
    # a dump that is not a full-memory one leaves memory out; its MemoryInfoList, if any, says which
    # ... and memory its lists describe but the file (cut short) does not hold is missing too
    committed = [(m.base, m.end) for m in memory_info if m.state == "commit"]
    described = committed + [(start, start + size) for start, size, _ in regions]
    space = AddressSpace(source, _clip_to_file(regions, source.size), pointer_size, limits=limits,
                         described=described, partial=not committed and not header.Flags & MINIDUMP_WITH_FULL_MEMORY)
    if space.overlaps:
        r.warn(f"{space.overlaps} memory ranges overlap others; the first copy is used")
    expected = max([header.StreamDirectoryRva + len(container.directory) * DIRECTORY_ENTRY_SIZE]
                   + [rva + size for _, size, rva in container.directory if size]
                   + [offset + size for _, size, offset in regions])
    return DumpFile(path=path, format="minidump", arch=arch, pointer_size=pointer_size, os=os_name,
                memory=space, modules=modules, threads=threads, pid=pid, os_version=os_version,
                memory_info=memory_info, file_size=source.size, expected_size=expected,
                warnings=r.warnings, container=container, redaction=redaction, crash=crash)


def _directory(r: _Reader, header, container: MinidumpContainer) -> dict:
    """The stream directory: the first entry of each known stream type, by type."""
    count = header.NumberOfStreams
    if count > r.limits.max_streams:
        r.warn(f"header says {count:,} streams, over the limit of {r.limits.max_streams:,}")
        count = r.limits.max_streams
    fits = max(0, (r.source.size - header.StreamDirectoryRva) // DIRECTORY_ENTRY_SIZE)
    if count > fits:
        if fits == 0:
            raise TruncatedDump("the stream directory is not in the file", r.path, header.StreamDirectoryRva)
        r.warn(f"the stream directory is cut short: {fits} of {count} entries are in the file")
        count = fits
    streams: dict[int, object] = {}
    for entry in r.entries(MINIDUMP_DIRECTORY, header.StreamDirectoryRva, count):
        container.directory.append((entry.StreamType, entry.Location.DataSize, entry.Location.Rva))
        if entry.StreamType == 0:  # UnusedStream: padding entries (Wine rounds the count up)
            continue
        if entry.StreamType not in KNOWN_STREAM_TYPES:
            container.skipped_streams.append(entry.StreamType)
            continue
        if entry.StreamType in streams:
            r.warn(f"stream type {entry.StreamType} appears twice; the first is used")
            continue
        streams[entry.StreamType] = entry
    return streams


def _system_info(r: _Reader, entry) -> tuple[str, str, str | None]:
    """SystemInfo: the architecture, the OS and its version."""
    if entry is None or not r.stream(entry, "SystemInfo", SYSTEM_INFO_PREFIX.sizeof()):
        r.warn("no usable SystemInfo stream: architecture unknown")
        return "unknown", "windows", None
    si = r.parse(SYSTEM_INFO_PREFIX, entry.Location.Rva, "SystemInfo stream")
    arch = PROCESSOR_ARCHITECTURES.get(si.ProcessorArchitecture, "unknown")
    if arch == "unknown":
        r.warn(f"unknown processor architecture {si.ProcessorArchitecture:#x}")
    os_version = f"{si.MajorVersion}.{si.MinorVersion}.{si.BuildNumber}"
    service_pack = r.string(si.CSDVersionRva)
    if service_pack:
        os_version += f" {service_pack}"
    return arch, PLATFORMS.get(si.PlatformId, "unknown"), os_version


def _memory64_list(r: _Reader, entry) -> list | None:
    """Memory64List (full-memory dumps): ranges stored back to back from BaseRva."""
    if entry is None or not r.stream(entry, "Memory64List", MINIDUMP_MEMORY64_LIST_HEADER.sizeof()):
        return None
    head = r.parse(MINIDUMP_MEMORY64_LIST_HEADER, entry.Location.Rva, "Memory64List header")
    n = r.fitting_count(entry, head.NumberOfMemoryRanges, 16, MEMORY_DESCRIPTOR64_SIZE, "Memory64List",
                        "max_memory_ranges")
    regions, offset = [], head.BaseRva
    for d in r.entries(MINIDUMP_MEMORY_DESCRIPTOR64, entry.Location.Rva + 16, n):
        regions.append((d.StartOfMemoryRange, d.DataSize, offset))
        offset += d.DataSize
    return regions


def _memory_list(r: _Reader, entry) -> list | None:
    """MemoryList: ranges, each with its own RVA."""
    if entry is None or not r.stream(entry, "MemoryList", 4):
        return None
    n = r.list_count(entry, MEMORY_DESCRIPTOR_SIZE, "MemoryList", "max_memory_ranges")
    return [(d.StartOfMemoryRange, d.Memory.DataSize, d.Memory.Rva)
            for d in r.entries(MINIDUMP_MEMORY_DESCRIPTOR, entry.Location.Rva + 4, n)]


def _module_list(r: _Reader, entry) -> list[Module]:
    """ModuleList: every module's path, base, size, timestamp and version resource."""
    if entry is None or not r.stream(entry, "ModuleList", 4):
        r.warn("no usable ModuleList stream")
        return []
    n = r.list_count(entry, MODULE_SIZE, "ModuleList", "max_modules")
    modules = []
    for m in r.entries(MINIDUMP_MODULE, entry.Location.Rva + 4, n):
        vi = m.VersionInfo
        file_version = product_version = None
        if vi.dwSignature == 0xFEEF04BD:
            file_version = _version(vi.dwFileVersionMS, vi.dwFileVersionLS)
            product_version = _version(vi.dwProductVersionMS, vi.dwProductVersionLS)
        modules.append(Module(path=r.string(m.ModuleNameRva) or "", base=m.BaseOfImage, size=m.SizeOfImage,
                              file_version=file_version, product_version=product_version,
                              timestamp=m.TimeDateStamp))
    return modules


def _thread_list(r: _Reader, entry, arch: str) -> list[Thread]:
    """ThreadList: each thread's id, stack and stack pointer."""
    if entry is None or not r.stream(entry, "ThreadList", 4):
        return []
    n = r.list_count(entry, THREAD_SIZE, "ThreadList", "max_threads")
    return [_thread(r.source, t, arch) for t in r.entries(MINIDUMP_THREAD, entry.Location.Rva + 4, n)]


def _comment_mark(r: _Reader, entry) -> dict | None:
    """The mark of a dump trim --redact wrote, from its CommentStreamA (None: no comment, or not the mark)."""
    if entry is None or not 0 < entry.Location.DataSize <= MAX_MARK:
        return None
    return from_comment(r.source.pread(entry.Location.Rva, entry.Location.DataSize))


#: MINIDUMP_EXCEPTION_STREAM's start: ThreadId, alignment, then MINIDUMP_EXCEPTION's ExceptionCode,
#: ExceptionFlags, ExceptionRecord (a pointer) and ExceptionAddress
MINIDUMP_EXCEPTION_HEAD = Struct("ThreadId" / Int32ul, "Alignment" / Int32ul, "ExceptionCode" / Int32ul,
                                 "ExceptionFlags" / Int32ul, "ExceptionRecord" / Int64ul,
                                 "ExceptionAddress" / Int64ul)


def _exception(r: _Reader, entry) -> dict | None:
    """The exception stream: the thread the dump was written for, the exception's code and address."""
    if entry is None or not r.stream(entry, "ExceptionStream", MINIDUMP_EXCEPTION_HEAD.sizeof()):
        return None
    e = r.parse(MINIDUMP_EXCEPTION_HEAD, entry.Location.Rva, "ExceptionStream")
    return {"thread": e.ThreadId, "code": e.ExceptionCode, "address": e.ExceptionAddress}


def _misc_info(r: _Reader, entry) -> int | None:
    """MiscInfo: the process id, when its flag says it is there."""
    if entry is None or not r.stream(entry, "MiscInfo", MINIDUMP_MISC_INFO.sizeof()):
        return None
    misc = r.parse(MINIDUMP_MISC_INFO, entry.Location.Rva, "MiscInfo stream")
    return misc.ProcessId if misc.Flags1 & MINIDUMP_MISC1_PROCESS_ID else None


def _clip_to_file(regions, file_size: int):
    """The regions cut to the bytes the file holds (a dump cut short keeps what it has)."""
    kept = []
    for start, size, offset in regions:
        if offset < file_size:
            kept.append((start, min(size, file_size - offset), offset))
    return kept


def _thread(source, t, arch: str) -> Thread:
    """A MINIDUMP_THREAD: its id, its stack descriptor, and the stack pointer of its context."""
    sp = None
    at, size = CONTEXT_SP.get(arch, (None, None))
    ctx = t.ThreadContext
    if at is not None and ctx.DataSize >= at + size:
        data = source.pread(ctx.Rva + at, size)
        if len(data) == size:
            sp = int.from_bytes(data, "little")
    start, length = t.Stack.StartOfMemoryRange, t.Stack.Memory.DataSize
    return Thread(t.ThreadId, start if length else None, start + length if length else None, sp)


def _memory_info_list(r: _Reader, entry) -> list[MemoryInfo]:
    """MemoryInfoList: every range of the address space and what VirtualQuery said of it."""
    if entry is None or not r.stream(entry, "MemoryInfoList", MINIDUMP_MEMORY_INFO_LIST.sizeof()):
        return []
    source = r.source
    head = r.parse(MINIDUMP_MEMORY_INFO_LIST, entry.Location.Rva, "MemoryInfoList header")
    if head.SizeOfHeader < MINIDUMP_MEMORY_INFO_LIST.sizeof() or head.SizeOfEntry < MEMORY_INFO_SIZE:
        r.warn(f"MemoryInfoList header ({head.SizeOfHeader}, {head.SizeOfEntry}) is not the format's; skipped")
        return []
    n = r.fitting_count(entry, head.NumberOfEntries, head.SizeOfHeader, head.SizeOfEntry, "MemoryInfoList",
                        "max_memory_ranges")
    raw = source.pread(entry.Location.Rva + head.SizeOfHeader, n * head.SizeOfEntry)
    out = []
    for i in range(len(raw) // head.SizeOfEntry):
        m = MINIDUMP_MEMORY_INFO.parse(raw[i * head.SizeOfEntry : i * head.SizeOfEntry + MEMORY_INFO_SIZE])
        out.append(MemoryInfo(m.BaseAddress, m.RegionSize, m.AllocationBase,
                              MEMORY_STATES.get(m.State, f"{m.State:#x}"), MEMORY_TYPES.get(m.Type, f"{m.Type:#x}"),
                              m.Protect, m.AllocationProtect))
    return out
