"""Windows minidumps (MDMP), read on any OS.

The header and stream directory are parsed here with construct, with every count and RVA checked against
the file and :class:`~clrlayout.limits.Limits`.  The streams clrlayout needs (SystemInfo, ModuleList,
MemoryList, Memory64List, ThreadList, MiscInfo) are then parsed by the ``minidump`` package, fed through
a bounded file view and guarded so that none of its exceptions escape.  Unknown and reserved stream types
(Wine writes a private 0xFFF0 stream that makes minidump 0.0.24 raise ValueError) are skipped, and
listed by ``info`` (``other_streams``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace

from construct import Array, Bytes, Const, ConstructError, Int16ul, Int32ul, Int64ul, Struct, this

from .addrspace import AddressSpace
from ..errors import ClrLayoutError, MalformedDump, TruncatedDump
from ..limits import Limits
from .model import BoundedReader, Dump, MemoryInfo, Module, Thread

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
SYSTEM_INFO = 7
MEMORY64_LIST = 9
COMMENT_A = 10
MISC_INFO = 15
MEMORY_INFO_LIST = 16
# MINIDUMP_TYPE flags of the header
MINIDUMP_WITH_FULL_MEMORY = 0x2
KNOWN_STREAM_TYPES = set(range(0, 26)) | {0xFFFF}

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
    def __init__(self, path: str, source, limits: Limits):
        self.path = path
        self.source = source
        self.limits = limits
        self.warnings: list[str] = []
        self.file = BoundedReader(source, limits.max_stream_bytes)

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

    def stream_bytes_ok(self, entry, what: str) -> bool:
        size, rva = entry.Location.DataSize, entry.Location.Rva
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

    def call_package(self, what: str, fn, *args):
        """Run one of the minidump package's parsers; its exceptions become a warning and None."""
        try:
            return fn(*args)
        except ClrLayoutError:
            raise
        except Exception as e:  # the package raises bare Exception, ValueError, KeyError, ...
            self.warn(f"{what} stream could not be parsed ({type(e).__name__}: {e}); skipped")
            return None


def _as_dir(entry, size: int | None = None):
    """A MINIDUMP_DIRECTORY look-alike for the package's parsers."""
    return SimpleNamespace(Location=SimpleNamespace(Rva=entry.Location.Rva,
                                                    DataSize=entry.Location.DataSize if size is None else size))


def read_minidump(path: str, source, limits: Limits) -> Dump:
    from minidump.streams.MemoryListStream import MinidumpMemoryList
    from minidump.streams.Memory64ListStream import MinidumpMemory64List
    from minidump.streams.MiscInfoStream import MinidumpMiscInfo
    from minidump.streams.ModuleListStream import MinidumpModuleList
    from minidump.streams.SystemInfoStream import MinidumpSystemInfo

    r = _Reader(path, source, limits)
    header = r.parse(MINIDUMP_HEADER, 0, "minidump header")
    count = header.NumberOfStreams
    if count > limits.max_streams:
        r.warn(f"header says {count:,} streams, over the limit of {limits.max_streams:,}")
        count = limits.max_streams
    fits = max(0, (source.size - header.StreamDirectoryRva) // DIRECTORY_ENTRY_SIZE)
    if count > fits:
        if fits == 0:
            raise TruncatedDump("the stream directory is not in the file", path, header.StreamDirectoryRva)
        r.warn(f"the stream directory is cut short: {fits} of {count} entries are in the file")
        count = fits
    raw = source.pread(header.StreamDirectoryRva, count * DIRECTORY_ENTRY_SIZE)
    directory = Array(count, MINIDUMP_DIRECTORY).parse(raw)
    container = MinidumpContainer(header=header)

    streams: dict[int, object] = {}
    for entry in directory:
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

    # SystemInfo: arch and OS
    arch, os_name, os_version = "unknown", "windows", None
    entry = streams.get(SYSTEM_INFO)
    if entry is not None and entry.Location.DataSize >= SYSTEM_INFO_PREFIX.sizeof() and r.stream_bytes_ok(entry, "SystemInfo"):
        si = r.parse(SYSTEM_INFO_PREFIX, entry.Location.Rva, "SystemInfo stream")
        arch = PROCESSOR_ARCHITECTURES.get(si.ProcessorArchitecture, "unknown")
        if arch == "unknown":
            r.warn(f"unknown processor architecture {si.ProcessorArchitecture:#x}")
        os_name = PLATFORMS.get(si.PlatformId, "unknown")
        os_version = f"{si.MajorVersion}.{si.MinorVersion}.{si.BuildNumber}"
        info = r.call_package("SystemInfo", MinidumpSystemInfo.parse, _as_dir(entry), r.file)
        if info is not None and getattr(info, "CSDVersion", None) and info.CSDVersion != "<STRING_DECODE_FAILED>":
            os_version += f" {info.CSDVersion}"
    else:
        r.warn("no usable SystemInfo stream: architecture unknown")
    pointer_size = POINTER_SIZES.get(arch, 8)

    # Memory: Memory64List (full-memory dumps) and/or MemoryList
    regions = []
    entry = streams.get(MEMORY64_LIST)
    if entry is not None and entry.Location.DataSize >= MINIDUMP_MEMORY64_LIST_HEADER.sizeof() and r.stream_bytes_ok(entry, "Memory64List"):
        head = r.parse(MINIDUMP_MEMORY64_LIST_HEADER, entry.Location.Rva, "Memory64List header")
        n = r.fitting_count(entry, head.NumberOfMemoryRanges, 16, MEMORY_DESCRIPTOR64_SIZE, "Memory64List", "max_memory_ranges")
        mem = r.call_package("Memory64List", MinidumpMemory64List.parse, _as_dir(entry, 16 + 16 * n), r.file)
        if mem is not None:
            container.memory_list_kind = "Memory64List"
            for seg in mem.memory_segments[:n]:
                regions.append((seg.start_virtual_address, seg.size, seg.start_file_address))
    entry = streams.get(MEMORY_LIST)
    if entry is not None and entry.Location.DataSize >= 4 and r.stream_bytes_ok(entry, "MemoryList"):
        n = r.fitting_count(entry, int.from_bytes(source.pread(entry.Location.Rva, 4), "little"), 4,
                            MEMORY_DESCRIPTOR_SIZE, "MemoryList", "max_memory_ranges")
        mem = r.call_package("MemoryList", MinidumpMemoryList.parse, _as_dir(entry, 4 + 16 * n),
                             _PatchedCount(source, 4 + 16 * n, entry.Location.Rva, n))
        if mem is not None:
            container.memory_list_kind = container.memory_list_kind or "MemoryList"
            for seg in mem.memory_segments[:n]:
                regions.append((seg.start_virtual_address, seg.size, seg.start_file_address))
    raw_regions = list(regions)
    regions = _clip_to_file(r, regions, source.size)

    # ModuleList
    modules = []
    entry = streams.get(MODULE_LIST)
    if entry is not None and entry.Location.DataSize >= 4 and r.stream_bytes_ok(entry, "ModuleList"):
        n = r.fitting_count(entry, int.from_bytes(source.pread(entry.Location.Rva, 4), "little"), 4,
                            MODULE_SIZE, "ModuleList", "max_modules")
        # One view serves the list and the names the package reads by RVA: no read may exceed either.
        view = _PatchedCount(source, max(4 + MODULE_SIZE * n, 4 + 2 * limits.max_name_chars), entry.Location.Rva, n)
        mods = r.call_package("ModuleList", MinidumpModuleList.parse, _as_dir(entry, 4 + MODULE_SIZE * n), view)
        for m in (mods.modules if mods is not None else [])[:n]:
            vi = m.versioninfo
            file_version = product_version = None
            if vi is not None and vi.dwSignature == 0xFEEF04BD:
                file_version = _version(vi.dwFileVersionMS, vi.dwFileVersionLS)
                product_version = _version(vi.dwProductVersionMS, vi.dwProductVersionLS)
            name = m.name if isinstance(m.name, str) else ""
            modules.append(Module(path=name, base=m.baseaddress, size=m.size, file_version=file_version,
                                  product_version=product_version, timestamp=m.timestamp))
    else:
        r.warn("no usable ModuleList stream")

    threads = []
    entry = streams.get(THREAD_LIST)
    if entry is not None and entry.Location.DataSize >= 4 and r.stream_bytes_ok(entry, "ThreadList"):
        n = r.fitting_count(entry, int.from_bytes(source.pread(entry.Location.Rva, 4), "little"), 4,
                            THREAD_SIZE, "ThreadList", "max_threads")
        raw = source.pread(entry.Location.Rva + 4, n * THREAD_SIZE)
        threads = [_thread(source, t, arch) for t in Array(len(raw) // THREAD_SIZE, MINIDUMP_THREAD).parse(raw)]

    memory_info = []
    entry = streams.get(MEMORY_INFO_LIST)
    if entry is not None and entry.Location.DataSize >= MINIDUMP_MEMORY_INFO_LIST.sizeof() \
            and r.stream_bytes_ok(entry, "MemoryInfoList"):
        memory_info = _memory_info(r, source, entry)

    pid = None
    entry = streams.get(MISC_INFO)
    if entry is not None and entry.Location.DataSize >= 24 and r.stream_bytes_ok(entry, "MiscInfo"):
        misc = r.call_package("MiscInfo", MinidumpMiscInfo.parse, _as_dir(entry), r.file)
        pid = getattr(misc, "ProcessId", None) if misc is not None else None

    # streams of other types (Wine's private 0xFFF0, a tool's own) are not read: not a problem of the dump's,
    # so no warning; `info` lists them
    # a dump that is not a full-memory one leaves memory out; its MemoryInfoList, if any, says which
    # ... and memory its lists describe but the file (cut short) does not hold is missing too
    committed = [(m.base, m.end) for m in memory_info if m.state == "commit"]
    described = committed + [(start, start + size) for start, size, _ in raw_regions]
    space = AddressSpace(source, regions, pointer_size, limits=limits, described=described,
                         partial=not committed and not header.Flags & MINIDUMP_WITH_FULL_MEMORY)
    if space.overlaps:
        r.warn(f"{space.overlaps} memory ranges overlap others; the first copy is used")
    expected = max([header.StreamDirectoryRva + count * DIRECTORY_ENTRY_SIZE]
                   + [rva + size for _, size, rva in container.directory if size]
                   + [offset + size for _, size, offset in raw_regions])
    return Dump(path=path, format="minidump", arch=arch, pointer_size=pointer_size, os=os_name,
                memory=space, modules=modules, threads=threads, pid=pid, os_version=os_version,
                memory_info=memory_info, file_size=source.size, expected_size=expected,
                warnings=r.warnings, container=container)


class _PatchedCount(BoundedReader):
    """A file view in which the 32-bit count at ``rva`` reads as ``count`` (already checked to fit).

    The package loops over the count it reads; giving it the checked count keeps a crafted count from
    making it loop.
    """

    def __init__(self, source, limit: int, rva: int, count: int):
        super().__init__(source, limit)
        self._rva = rva
        self._count = count.to_bytes(4, "little")

    def read(self, n: int = -1) -> bytes:
        start = self._pos
        data = super().read(n)
        if start <= self._rva < start + len(data):
            i = self._rva - start
            patched = bytearray(data)
            patched[i : i + 4] = self._count[: max(0, min(4, len(data) - i))]
            data = bytes(patched)
        return data


def _clip_to_file(r: _Reader, regions, file_size: int):
    kept, missing = [], 0
    for start, size, offset in regions:
        if offset >= file_size:
            missing += size
            continue
        if offset + size > file_size:
            missing += offset + size - file_size
            size = file_size - offset
        kept.append((start, size, offset))
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


def _memory_info(r: _Reader, source, entry) -> list[MemoryInfo]:
    """The MemoryInfoList stream: every range of the address space and what VirtualQuery said of it."""
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
