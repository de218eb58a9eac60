"""``trim --redact``: what a redacted dump keeps of the managed images in its memory — only what naming and field
layouts read.

Naming reads an image's PE headers and section table, its CLI header and its metadata; the analysis reads them
in pieces larger than that (the first 4 KB of the image, the metadata block whole).  In an image mapped flat (as
.NET maps IL-only assemblies on Linux) the first 4 KB hold the start of ``.text`` too: IL bodies with their
immediates, field RVA data (array initializers).  The metadata block holds the code's string literals (``#US``)
and, in ``#Blob``, const values (the Constant table), default parameter values and custom attribute arguments.
So of every image found in the memory the analysis read, the redacted dump keeps exactly:

- the PE headers and section table (``e_lfanew`` + signature + file header + optional header + section headers);
- the CLI header (72 bytes);
- the metadata root and its stream headers, the ``#~``/``#-`` tables, ``#Strings`` and ``#GUID``;
- of ``#Blob``, the entries the Field and TypeSpec tables point at (field and type signatures: what names and
  layouts decode).

Everything else of the image is written as zeros (the metadata's pages stay in the dump, so that it parses as
before); the rest of an image's first page is cut even where the image itself is not one naming read.
"""

from __future__ import annotations

import hashlib
import struct
from typing import TYPE_CHECKING

import numpy as np

from ..dump.copying import PAGE

if TYPE_CHECKING:
    from . import Session

#: a metadata root's signature (ECMA-335 II.24.2.1), the most stream headers read after it, the streams kept whole
METADATA_SIGNATURE = b"BSJB"
MAX_STREAMS = 16
KEPT_STREAMS = (b"#~", b"#-", b"#Strings", b"#GUID")
#: the blob columns of the tables whose entries naming and layouts decode (table, column)
SIGNATURE_COLUMNS = (("Field", "Signature_BlobIndex"), ("TypeSpec", "Signature_BlobIndex"))
#: the CLI header's data directory and size (ECMA-335 II.25.3.3)
CLI_HEADER_DIRECTORY = 14
CLI_HEADER_BYTES = 72
#: the largest metadata block looked at
MAX_METADATA = 64 << 20


def metadata_streams(data: bytes, root: int) -> list[tuple[bytes, int, int]] | None:
    """(name, offset from the root, size) of each stream of the metadata root at ``root`` of ``data``, and as the
    last entry (b"", end of the stream headers, 0); None when ``root`` does not start a metadata root."""
    def u32(at):
        return int.from_bytes(data[at:at + 4], "little") if at >= 0 and at + 4 <= len(data) else None

    length = u32(root + 12)
    if length is None or length > 256 or data[root + 16:root + 17] != b"v":  # "v4.0.30319"
        return None
    pos = root + 16 + ((length + 3) & ~3) + 2
    if pos + 2 > len(data):
        return None
    count = int.from_bytes(data[pos:pos + 2], "little")
    if not 0 < count <= MAX_STREAMS:
        return None
    pos += 2
    streams = []
    for _ in range(count):
        offset, size = u32(pos), u32(pos + 4)
        if size is None or offset + size > MAX_METADATA:
            return None
        end = data.find(b"\0", pos + 8, pos + 8 + 32)
        if end < 0:
            return None
        name = data[pos + 8:end]
        if not name.startswith(b"#"):
            return None
        streams.append((name, offset, size))
        pos = pos + 8 + ((end - (pos + 8) + 1 + 3) & ~3)
    return streams + [(b"", pos - root, 0)]


def _blob_entry(blob: bytes, index: int) -> int:
    """The size (length prefix included) of the #Blob entry at ``index`` (ECMA-335 II.24.2.4), 0 if out of bounds."""
    if not 0 <= index < len(blob):
        return 0
    b = blob[index]
    if b & 0x80 == 0:
        n, head = b, 1
    elif b & 0xC0 == 0x80 and index + 1 < len(blob):
        n, head = ((b & 0x3F) << 8) | blob[index + 1], 2
    elif b & 0xE0 == 0xC0 and index + 3 < len(blob):
        n, head = int.from_bytes(bytes([b & 0x1F]) + blob[index + 1:index + 4], "big"), 4
    else:
        return 0
    return min(head + n, len(blob) - index)


class _Known:
    """What is kept of the metadata of one image naming read: parts relative to the metadata root, and how to find
    the image's headers from the root."""

    def __init__(self, image):
        pe = image.metadata._pe
        data = pe.__data__
        net = pe.net
        self.metadata_rva = int(net.struct.MetaDataRva)
        self.metadata_size = int(net.struct.MetaDataSize)
        self.metadata_offset = pe.get_offset_from_rva(self.metadata_rva)
        root = bytes(data[self.metadata_offset:self.metadata_offset + self.metadata_size])
        streams = metadata_streams(root, 0) or [(b"", 0, 0)]
        self.extent = max(o + s for _, o, s in streams)
        self.digest = hashlib.sha256(root[:self.extent]).digest()
        parts = [(0, streams[-1][1])]
        for name, offset, size in streams[:-1]:
            if name in KEPT_STREAMS:
                parts.append((offset, offset + size))
            elif name == b"#Blob":
                blob = root[offset:offset + size]
                for table, column in SIGNATURE_COLUMNS:
                    rows = getattr(getattr(net.mdtables, table, None), "rows", None) or []
                    for row in rows:
                        index = getattr(row.struct, column, None)
                        n = _blob_entry(blob, index) if isinstance(index, int) else 0
                        if n:
                            parts.append((offset + index, offset + index + n))
        self.parts = parts
        headers = image.headers
        self.header_bytes = _header_length(headers.__data__)
        self.head = bytes(headers.__data__[:self.header_bytes])
        directories = headers.OPTIONAL_HEADER.DATA_DIRECTORY
        has_cli = len(directories) > CLI_HEADER_DIRECTORY
        self.cli_rva = directories[CLI_HEADER_DIRECTORY].VirtualAddress if has_cli else 0
        self.cli_offset = _offset(headers, self.cli_rva)
        self.size_of_image = int(headers.OPTIONAL_HEADER.SizeOfImage)
        self.file_size = max([headers.OPTIONAL_HEADER.SizeOfHeaders]
                             + [x.PointerToRawData + x.SizeOfRawData for x in headers.sections])

    def metadata_at(self, base: int) -> list[int]:
        """Where the metadata root of a copy of this image at ``base`` can be: as the file (flat), and with its
        sections at their RVAs (mapped)."""
        return [base + at for at in (self.metadata_offset, self.metadata_rva) if at is not None]


def _offset(pe, rva: int) -> int | None:
    try:
        return pe.get_offset_from_rva(rva)
    except Exception:
        return None


def _header_length(head: bytes) -> int:
    """The bytes of a PE file's headers that are parsed: DOS header through the section table (0 if not a PE)."""
    if len(head) < 64 or head[:2] != b"MZ":
        return 0
    lfanew = int.from_bytes(head[60:64], "little")
    if not 64 <= lfanew <= len(head) - 24 or head[lfanew:lfanew + 4] != b"PE\0\0":
        return 0
    sections, optional = struct.unpack_from("<HxxxxxxxxxxxxH", head, lfanew + 6)
    return min(len(head), lfanew + 24 + optional + 40 * sections)


def image_parts(session: Session, starts: np.ndarray, ends: np.ndarray):
    """(cut, keep, held) for the managed images in the recorded memory [starts, ends): ``cut`` the image bytes no
    answer needs (each image's first page past its headers; of an image naming read, all of it; every metadata
    block), ``keep`` what naming reads of them, ``held`` the ranges whose pages stay in the dump (as zeros where not
    kept) — each a list of (start, end).  An image can be in memory more than once (.NET on Linux maps a framework
    assembly as its file and with its sections at their RVAs): every copy is treated alike, since naming reads the
    file's bytes from whichever mapping holds them."""
    space = session.dump.memory
    known, by_head = {}, {}
    for image in session.names.images.loaded():
        try:
            k = _Known(image)
        except Exception:  # an image pefile or dnfile reads differently: nothing of it is kept
            continue
        known[k.digest] = k
        by_head[k.head] = k
    cut, keep, held, bases = [], [], [], {}
    for lo, hi in zip(starts.tolist(), ends.tolist()):
        if hi - lo < 64:
            continue
        data = space.read_available(lo, hi - lo)
        at = data.find(METADATA_SIGNATURE)
        while at >= 0:  # a metadata block: cut whole; of an image naming read, its copies are found from it
            k = _metadata(space, lo + at, known, cut)
            if k is not None:
                for root in (lo + at - k.metadata_offset, lo + at - k.metadata_rva):
                    if root >= 0 and space.read_available(root, k.header_bytes) == k.head:
                        bases[root] = k
            at = data.find(METADATA_SIGNATURE, at + 4)
        for page in range(lo - lo % PAGE, hi, PAGE):  # an image's first page: its headers, then (flat) its code
            if page >= lo and data[page - lo:page - lo + 2] == b"MZ":
                n = _header_length(data[page - lo:page - lo + PAGE])
                if n:
                    cut.append((page + n, page + PAGE))
                    k = by_head.get(bytes(data[page - lo:page - lo + n]))
                    if k is not None:
                        bases[page] = k
    for base, k in bases.items():
        _copy(space, base, k, cut, keep, held)
    return cut, keep, held


def _metadata(space, root: int, known: dict, cut: list):
    """Cuts the metadata block at ``root``; the image it is of, when naming read it (else None)."""
    head = space.read_available(root, 1024)
    streams = metadata_streams(head, 0)
    if streams is None:
        return None
    extent = max(o + s for _, o, s in streams)
    cut.append((root, root + extent))
    data = space.read_available(root, extent)
    return known.get(hashlib.sha256(data).digest()) if len(data) == extent else None


def _copy(space, base: int, k: _Known, cut: list, keep: list, held: list) -> None:
    """What is kept of a copy of image ``k`` at ``base``: its headers, its CLI header and the metadata's parts,
    where the copy holds them as its file (flat) or with its sections at their RVAs; the rest of it is cut.  The
    first page of a mapped copy holds the file's first bytes (its headers page is mapped from the file whole)."""
    keep.append((base, base + k.header_bytes))
    held.append((base, base + k.header_bytes))
    places = []  # (offset of the CLI header, offset of the metadata root, span) of each layout the copy has
    if k.cli_offset is not None and k.metadata_offset is not None:
        places.append((k.cli_offset, k.metadata_offset, k.file_size))
    places.append((k.cli_rva, k.metadata_rva, k.size_of_image))
    for cli, root, span in places:
        if space.read_available(base + root, 4) != METADATA_SIGNATURE and root + k.extent > PAGE:
            continue
        cut.append((base, base + span))
        keep.append((base + cli, base + cli + CLI_HEADER_BYTES))
        held.append((base + cli, base + cli + CLI_HEADER_BYTES))
        keep.extend((base + root + a, base + root + b) for a, b in k.parts)
        held.append((base + root, base + root + max(k.extent, k.metadata_size)))
    if k.cli_offset is not None and k.cli_offset + CLI_HEADER_BYTES <= PAGE:
        keep.append((base + k.cli_offset, base + k.cli_offset + CLI_HEADER_BYTES))
        held.append((base + k.cli_offset, base + k.cli_offset + CLI_HEADER_BYTES))
