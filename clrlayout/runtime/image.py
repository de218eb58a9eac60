"""What a module's own bytes say: the runtime's version string, and the signature a single-file app's runtime
carries.

CoreCLR binaries carry ``@(#)Version 8.0.424.16909 @Commit: 2d7eea25...``: the file version (its build number is
the patch times 100 plus the year: 8.0.4) and the commit it was built from.  .NET Core 2.x's carry
``@(#)Version 4.6.27617.05 @BuiltBy: root-95ed16d294e4 @Branch: release/2.2 @SrcCode: https://github.com/dotnet/coreclr/tree/921f25a0...``:
its file version does not tell 2.0, 2.1 and 2.2 apart (they were built side by side), its branch does.  A
self-contained single-file app
links the runtime into its executable, which then exports ``DotNetRuntimeInfo`` (a structure that starts with
that name): no libcoreclr module is loaded, so the module that holds those bytes is the runtime.

The bytes are looked for in the dump's copy of the module first; a dump that left the module's read-only
pages out is read from the file at the path it names, when that file is the same one (its first page equals
the dump's, where the dump has it).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from ..dump import DumpFile, Module

SCCSID = re.compile(rb"@\(#\)Version (\d+)\.(\d+)\.(\d+)\.(\d+)(?: @Commit: ([0-9a-f]{7,40}))?"
                    rb"(?: @BuiltBy: [^ \0]{1,80})?(?: @Branch: release/(\d+\.\d+)[^ \0]{0,40})?"
                    rb"(?: @SrcCode: [^ \0]{0,120}/([0-9a-f]{40}))?")
RUNTIME_INFO = b"DotNetRuntimeInfo\0"
#: the most of a module file read from disk when the dump lacks its bytes
MAX_IMAGE_FILE = 512 << 20
CHUNK = 4 << 20


@dataclass(frozen=True)
class ImageVersion:
    file_version: tuple[int, int, int, int]
    commit: str | None
    where: str  # "the dump" | "<path> on this machine"
    branch: str | None = None  # "2.2" from "@Branch: release/2.2" (.NET Core 2.x)

    @property
    def product_version(self) -> str | None:
        """The product version the string stands for: 8.0.424 -> 8.0.4 (.NET 5+), release/2.2 -> 2.2 (.NET Core
        2.x, no patch); None for .NET Core 3.x, whose file version (4.700.x) and string do not carry it."""
        major, minor, build, _ = self.file_version
        if major >= 5:
            return f"{major}.{minor}.{build // 100}"
        return self.branch

    def describe(self) -> str:
        text = ".".join(map(str, self.file_version))
        return (f"file version {text}" + (f", branch release/{self.branch}" if self.branch else "")
                + (f", commit {self.commit[:12]}" if self.commit else ""))


def _chunks_in_dump(dump: DumpFile, module: Module):
    """The module's bytes the dump holds, in windows that overlap by a little (a match may straddle two)."""
    overlap = 128
    for address, data in dump.memory.iter_windows(module.base, module.end, window=CHUNK):
        yield address, data
        # the next window starts where this one ends; keep a tail so that straddling matches are found
        if len(data) > overlap:
            tail_at = address + len(data) - overlap
            nxt = dump.memory.read_available(tail_at, 2 * overlap)
            yield tail_at, nxt


def _headers_size(first: bytes) -> int:
    """How much of a module's first page is the file's own bytes: all of it for an ELF file (mapped page by
    page); a PE image's headers (``SizeOfHeaders``: the loader zero-fills the rest of the page)."""
    if first[:2] != b"MZ" or len(first) < 0x40:
        return len(first)
    at = int.from_bytes(first[0x3C:0x40], "little") + 4 + 20 + 60  # PE signature, COFF header, optional header
    size = int.from_bytes(first[at : at + 4], "little") if at + 4 <= len(first) else 0
    return size if 0 < size <= len(first) else len(first)


def same_file(dump: DumpFile, module: Module, path: str) -> bool:
    """Whether the file at ``path`` is the module the dump mapped: its headers equal the dump's copy of the
    module's (when the dump has none, the name is all there is to go by)."""
    if not os.path.isfile(path):
        return False
    first = dump.memory.try_read(module.base, 4096)
    if first is None:
        return True
    size = _headers_size(first)
    try:
        with open(path, "rb") as f:
            return f.read(size) == first[:size]
    except OSError:
        return False


def _chunks_on_disk(path: str):
    try:
        with open(path, "rb") as f:
            at, tail = 0, b""
            while at < MAX_IMAGE_FILE:
                data = f.read(CHUNK)
                if not data:
                    return
                yield at - len(tail), tail + data
                tail = data[-128:]
                at += len(data)
    except OSError:
        return


def find_in_module(dump: DumpFile, module: Module, pattern) -> tuple[re.Match | int, str] | None:
    """The first match of ``pattern`` (a compiled regex, or bytes) in the module's bytes: in the dump, else in
    the file on this machine at the module's path; with where it was found."""
    def search(chunks, where):
        for at, data in chunks:
            if isinstance(pattern, bytes):
                i = data.find(pattern)
                if i >= 0:
                    if where == "the dump":
                        dump.memory.note(at + i, len(pattern))  # trim keeps what a result rests on
                    return i, where
            else:
                m = pattern.search(data)
                if m:
                    if where == "the dump":
                        dump.memory.note(at + m.start(), m.end() - m.start())
                    return m, where
        return None

    found = search(_chunks_in_dump(dump, module), "the dump")
    if found is None and same_file(dump, module, module.path):
        found = search(_chunks_on_disk(module.path), f"{module.path} on this machine")
    return found


def image_version(dump: DumpFile, module: Module) -> ImageVersion | None:
    """The version string of a CoreCLR binary (libcoreclr.so, coreclr.dll, or a single-file executable)."""
    found = find_in_module(dump, module, SCCSID)
    if found is None:
        return None
    m, where = found
    commit = m.group(5) or m.group(7)
    branch = m.group(6)
    return ImageVersion(tuple(int(g) for g in m.groups()[:4]), commit.decode() if commit else None, where,
                        branch.decode() if branch else None)


def holds_runtime(dump: DumpFile, module: Module) -> bool:
    """Whether the module carries a runtime (a single-file app's executable does)."""
    return find_in_module(dump, module, RUNTIME_INFO) is not None
