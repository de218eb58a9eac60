"""A minidump of this process, written from /proc/self/maps and /proc/self/mem (Linux).

Used by ``live --runtime mono --capture``: Mono has no createdump.  The dump holds SystemInfo (Breakpad's
Linux platform id), a ModuleList of the mapped files, MiscInfo (pid) and a Memory64List of the writable
mappings (heaps, stacks, module data) -- what the dump path reads.  Built with the reader's own structs.
"""

from __future__ import annotations

import os
import struct
import tempfile

from ..dump.minidump import (
    MEMORY64_LIST,
    MINIDUMP_DIRECTORY,
    MINIDUMP_HEADER,
    MINIDUMP_MEMORY64_LIST_HEADER,
    MINIDUMP_MEMORY_DESCRIPTOR64,
    MINIDUMP_MODULE,
    MISC_INFO,
    MODULE_LIST,
    SYSTEM_INFO,
)

PLATFORM_LINUX = 0x8201  # Breakpad's MD_OS_LINUX
ARCH_AMD64 = 9
SKIP = ("[vvar]", "[vsyscall]", "[vdso]")


def _maps():
    with open("/proc/self/maps") as f:
        for line in f:
            parts = line.split(None, 5)
            lo, hi = (int(x, 16) for x in parts[0].split("-"))
            yield lo, hi, parts[1], parts[5].strip() if len(parts) > 5 else ""


def write_process_minidump(path: str) -> None:
    maps = list(_maps())
    modules: dict[str, list[int]] = {}
    for lo, hi, _perms, name in maps:
        if name.startswith("/"):
            span = modules.setdefault(name, [lo, hi])
            span[0], span[1] = min(span[0], lo), max(span[1], hi)
    ranges = [(lo, hi) for lo, hi, perms, name in maps if "r" in perms and "w" in perms and name not in SKIP]

    sysinfo = struct.pack("<HHHBBIIII", ARCH_AMD64, 6, 0, os.cpu_count() or 1, 1, 0, 0, 0, PLATFORM_LINUX) + b"\0" * 32
    misc = struct.pack("<III", 24, 1, os.getpid()) + b"\0" * 12
    n_streams = 4
    blob = bytearray()
    base = MINIDUMP_HEADER.sizeof() + n_streams * MINIDUMP_DIRECTORY.sizeof()

    def add(data: bytes, align: int = 8) -> int:
        blob.extend(b"\0" * (-(base + len(blob)) % align))
        rva = base + len(blob)
        blob.extend(data)
        return rva

    directory = [(SYSTEM_INFO, len(sysinfo), add(sysinfo)), (MISC_INFO, len(misc), add(misc))]
    names = {p: add(struct.pack("<I", 2 * len(p)) + p.encode("utf-16-le") + b"\0\0", 4) for p in modules}
    mod_list = struct.pack("<I", len(modules))
    for p, (lo, hi) in modules.items():
        zero = {"dwSignature": 0, "dwStrucVersion": 0, "dwFileVersionMS": 0, "dwFileVersionLS": 0,
                "dwProductVersionMS": 0, "dwProductVersionLS": 0, "dwFileFlagsMask": 0, "dwFileFlags": 0,
                "dwFileOS": 0, "dwFileType": 0, "dwFileSubtype": 0, "dwFileDateMS": 0, "dwFileDateLS": 0}
        mod_list += MINIDUMP_MODULE.build(dict(BaseOfImage=lo, SizeOfImage=min(hi - lo, 0xFFFFFFFF), CheckSum=0,
                                               TimeDateStamp=0, ModuleNameRva=names[p], VersionInfo=zero,
                                               CvRecord=dict(DataSize=0, Rva=0), MiscRecord=dict(DataSize=0, Rva=0),
                                               Reserved0=0, Reserved1=0))
    directory.append((MODULE_LIST, len(mod_list), add(mod_list)))

    # read the memory first: a range that cannot be read (guard pages) is left out
    fd = os.open("/proc/self/mem", os.O_RDONLY)
    tmp = tempfile.TemporaryFile()
    kept = []
    try:
        for lo, hi in ranges:
            pos = lo
            while pos < hi:
                n = min(hi - pos, 1 << 22)
                try:
                    data = os.pread(fd, n, pos)
                except OSError:
                    data = b""
                if not data:
                    pos += 4096
                    continue
                kept.append((pos, len(data)))
                tmp.write(data)
                pos += len(data)
    finally:
        os.close(fd)
    mem_size = MINIDUMP_MEMORY64_LIST_HEADER.sizeof() + len(kept) * MINIDUMP_MEMORY_DESCRIPTOR64.sizeof()
    mem_rva = add(b"\0" * mem_size)
    data_rva = base + len(blob) + (-(base + len(blob)) % 16)
    mem = MINIDUMP_MEMORY64_LIST_HEADER.build(dict(NumberOfMemoryRanges=len(kept), BaseRva=data_rva))
    for lo, size in kept:
        mem += MINIDUMP_MEMORY_DESCRIPTOR64.build(dict(StartOfMemoryRange=lo, DataSize=size))
    blob[mem_rva - base : mem_rva - base + mem_size] = mem
    directory.append((MEMORY64_LIST, mem_size, mem_rva))

    with open(path, "wb") as f:
        f.write(MINIDUMP_HEADER.build(dict(Version=0xA793, ImplementationVersion=0, NumberOfStreams=n_streams,
                                           StreamDirectoryRva=MINIDUMP_HEADER.sizeof(), CheckSum=0,
                                           TimeDateStamp=0, Flags=2)))
        for kind, size, rva in directory:
            f.write(MINIDUMP_DIRECTORY.build(dict(StreamType=kind, Location=dict(DataSize=size, Rva=rva))))
        f.write(blob)
        f.write(b"\0" * (data_rva - base - len(blob)))
        tmp.seek(0)
        while True:
            chunk = tmp.read(1 << 22)
            if not chunk:
                break
            f.write(chunk)
    tmp.close()
