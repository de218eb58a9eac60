"""The assemblies of a single-file app, read from its bundle: the host executable carries them after its own
code, listed by a manifest (dotnet/runtime ``src/native/corehost/bundle``: header.cpp, file_entry.cpp;
Microsoft.NET.HostModel's Bundle/Manifest.cs writes it).

The host holds a 32-byte marker (the SHA-256 of ".net core bundle") preceded by the file offset of the bundle
header.  The header is ``uint32 major, uint32 minor, int32 file count, string bundle id`` (a string is a
7-bit-encoded length and UTF-8 bytes), from version 2 five 64-bit values (deps.json and runtimeconfig.json
offset and size, flags), then one entry per file: ``int64 offset, int64 size``, from version 6 ``int64
compressed size`` (0: stored; else raw deflate), ``uint8 type`` (1: assembly) and ``string relative path``.

A bundled assembly is not mapped from the file: the runtime copies (and inflates) it into anonymous memory,
so the dump's file mappings do not name it.  A runtime Module's pointer to its assembly's simple name is
matched to the bundled assembly of that name, and taken only when the pointer's place in that image is
page-aligned with the image's own offset of the name (the runtime loads an image at a page boundary).
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass

#: the bundle marker: SHA-256 of ".net core bundle" (bundle_marker.cpp), after the header's file offset
MARKER = bytes.fromhex("8b1202b96a612038727b930214d7a03213f5b9e6efae3318ee3b2dce24b36aae")
ASSEMBLY = 1
PAGE = 4096
#: bounds on what a host file controls
MAX_FILES = 100_000
MAX_PATH_BYTES = 4096
#: the bytes of the host searched for the marker (it is in the host's data, before the bundled files)
MAX_HOST_CODE = 256 << 20


class BundleError(Exception):
    """The bytes are not a readable bundle."""


@dataclass(frozen=True)
class BundleFile:
    path: str  # relative to the app's folder
    offset: int
    size: int
    compressed_size: int  # 0: stored as it is
    type: int


class Bundle:
    """A single-file host's bundle: its files, and the bytes of each (``read``: the host's ``(offset, size)``
    reader, ``size`` the host's size)."""

    def __init__(self, read, size: int, files: list[BundleFile], version: tuple[int, int]):
        self._read = read
        self.size = size
        self.files = files
        self.version = version

    def assemblies(self) -> dict[str, BundleFile]:
        """The bundled assemblies by their file name's stem, in lower case (as the loader compares names)."""
        out = {}
        for f in self.files:
            if f.type == ASSEMBLY:
                stem = f.path.replace("\\", "/").rsplit("/", 1)[-1]
                out.setdefault(stem.rsplit(".", 1)[0].lower(), f)
        return out

    def contents(self, f: BundleFile, limit: int) -> bytes | None:
        """The file's bytes (inflated), or None when they are not there whole or would exceed ``limit``."""
        stored = f.compressed_size or f.size
        if f.offset < 0 or stored < 0 or f.offset + stored > self.size or f.size > limit:
            return None
        raw = self._read(f.offset, stored)
        if len(raw) < stored:
            return None
        if not f.compressed_size:
            return raw
        try:
            inflater = zlib.decompressobj(-15)
            data = inflater.decompress(raw, f.size + 1)
        except zlib.error:
            return None
        return data if len(data) == f.size else None


def find_bundle(read, size: int) -> Bundle | None:
    """The bundle of a host file (None: it is not a single-file app's host)."""
    head = read(0, min(size, MAX_HOST_CODE))
    at = head.find(MARKER)
    if at < 8:
        return None
    header = int.from_bytes(head[at - 8 : at], "little", signed=True)
    if not 0 < header < size:
        return None
    try:
        return _parse(read, size, header)
    except BundleError:
        return None


def _parse(read, size: int, header: int) -> Bundle:
    reader = _Reader(read, header, size)
    major, minor, count = reader.u32(), reader.u32(), reader.i32()
    if not 0 <= count <= MAX_FILES or not 1 <= major <= 100:
        raise BundleError(f"bundle header version {major}.{minor} with {count} files")
    reader.string()  # the bundle id
    if major >= 2:
        reader.skip(5 * 8)
    files = []
    for _ in range(count):
        offset, length = reader.i64(), reader.i64()
        compressed = reader.i64() if major >= 6 else 0
        kind = reader.byte()
        files.append(BundleFile(reader.string(), offset, length, compressed, kind))
    return Bundle(read, size, files, (major, minor))


class _Reader:
    """Little-endian fields of the manifest, read in bounded chunks of the host file."""

    CHUNK = 1 << 16

    def __init__(self, read, pos: int, size: int):
        self._read, self.pos, self.size = read, pos, size
        self._buf, self._base = b"", pos

    def take(self, n: int) -> bytes:
        end = self.pos + n
        if end > self.size:
            raise BundleError("manifest runs past the end of the file")
        if end > self._base + len(self._buf) or self.pos < self._base:
            self._base = self.pos
            self._buf = self._read(self.pos, max(n, self.CHUNK))
        data = self._buf[self.pos - self._base : end - self._base]
        if len(data) < n:
            raise BundleError("manifest not readable")
        self.pos = end
        return data

    def skip(self, n: int) -> None:
        self.take(n)

    def byte(self) -> int:
        return self.take(1)[0]

    def u32(self) -> int:
        return int.from_bytes(self.take(4), "little")

    def i32(self) -> int:
        return int.from_bytes(self.take(4), "little", signed=True)

    def i64(self) -> int:
        return int.from_bytes(self.take(8), "little", signed=True)

    def string(self) -> str:
        length, shift = 0, 0
        while True:
            b = self.byte()
            length |= (b & 0x7F) << shift
            shift += 7
            if not b & 0x80:
                break
            if shift > 28:
                raise BundleError("bad string length")
        if length > MAX_PATH_BYTES:
            raise BundleError("path too long")
        return self.take(length).decode("utf-8", "replace")


def name_offsets(data: bytes, name: str) -> list[int]:
    """The offsets in an image's bytes where its assembly's simple name stands, NUL-terminated (a #Strings
    entry, or the end of a longer one: compilers share common suffixes)."""
    want = name.encode("utf-8") + b"\0"
    out, at = [], data.find(want)
    while at >= 0 and len(out) < 64:
        out.append(at)
        at = data.find(want, at + 1)
    return out
