"""What clrlayout reads of a managed image's PE file: its headers and section table (pefile), its size, an RVA's
file offset, and the flat bytes that naming needs (headers, CLI header, metadata) rebuilt from wherever they
are; the bounds on what an image makes it read."""

from __future__ import annotations

from dataclasses import dataclass

from .metadata import Metadata

#: bytes of a runtime Module searched for the pointer to its simple name (.NET 8 Linux x64 has it at 0x108)
MODULE_SEARCH_BYTES = 0x200
#: bytes read for an image's headers and section table
HEADER_BYTES = 4096
#: the largest assembly read (CoreLib is about 10-15 MB)
MAX_IMAGE_BYTES = 64 << 20
#: mappings looked back at for the header mapping of an image whose sections are in anonymous memory
MAX_MAPPINGS_BACK = 8
#: the data directory of the CLI header (IMAGE_DIRECTORY_ENTRY_COM_DESCRIPTOR), and its size (ECMA-335 II.25.3.3:
#: MetaData RVA and size at +8)
CLI_HEADER_DIRECTORY = 14
CLI_HEADER_BYTES = 72
#: files looked at under --assemblies directories
MAX_ASSEMBLY_FILES = 100_000


@dataclass
class Image:
    """One managed image: where its file is and its metadata."""

    path: str  # the path the dump names
    source: str  # where the bytes were read: a file path, or "dump memory"
    headers: object  # pefile.PE of the headers and section table
    metadata: Metadata


def _essential(read_head, read_section, whole: bool = False):
    """read(offset, size) over the flat file bytes of an image rebuilt from what names need: the headers
    (``read_head(offset, size)``), the CLI header and the metadata, each read where it is
    (``read_section(rva, file offset, size)``) and put at its file offset; the code, resources and
    precompiled code of the sections are not needed for names and stay zero, so that a dump that keeps only
    what was read (trim) still names its types.  ``whole``: None unless each of those is there in full."""
    head = read_head(0, HEADER_BYTES)
    pe = _headers(head)
    if pe is None:
        return None if whole else lambda offset, size: head[offset : offset + size]
    flat = bytearray(min(_extent(pe), MAX_IMAGE_BYTES))
    flat[: len(head)] = head[: len(flat)]

    def copy(rva: int, size: int) -> bytes:
        at = _file_offset(pe, rva)
        if at is None or not 0 <= at < len(flat):
            return b""
        data = read_section(rva, at, min(size, len(flat) - at))
        flat[at : at + len(data)] = data
        return data

    directories = pe.OPTIONAL_HEADER.DATA_DIRECTORY
    complete = False
    if len(directories) > CLI_HEADER_DIRECTORY and directories[CLI_HEADER_DIRECTORY].VirtualAddress:
        cli = copy(directories[CLI_HEADER_DIRECTORY].VirtualAddress, CLI_HEADER_BYTES)
        if len(cli) >= 16:
            metadata_rva, metadata_size = int.from_bytes(cli[8:12], "little"), int.from_bytes(cli[12:16], "little")
            complete = 0 < metadata_size == len(copy(metadata_rva, metadata_size))
    if whole and not complete:
        return None
    return lambda offset, size: bytes(flat[offset : offset + size])


def _headers(head: bytes):
    """The PE headers and section table of an image's first bytes (pefile), or None."""
    import pefile

    if head[:2] != b"MZ":
        return None
    try:
        return pefile.PE(data=head, fast_load=True)
    except Exception:  # pefile raises PEFormatError and others on bad input
        return None


def _extent(pe) -> int:
    """The size of a PE file: its headers and the raw data of its sections."""
    return max([pe.OPTIONAL_HEADER.SizeOfHeaders] + [x.PointerToRawData + x.SizeOfRawData for x in pe.sections])


def _file_offset(pe, rva: int) -> int | None:
    try:
        return pe.get_offset_from_rva(rva)
    except Exception:
        return None
