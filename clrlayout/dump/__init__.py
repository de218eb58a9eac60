"""DumpFile readers: one model (:class:`DumpFile`) over Windows minidumps and ELF cores.

``open_dump`` recognises the format by its magic, never by the file name.  Each reader is the single place
where third-party exceptions are converted into :mod:`clrlayout.errors` types.
"""

from __future__ import annotations

from ..errors import DumpError, TruncatedDump, UnsupportedDump
from ..limits import DEFAULT_LIMITS, Limits
from .addrspace import FileSource
from .model import BoundedReader, DumpFile, Module

__all__ = ["BoundedReader", "DumpFile", "Module", "open_dump", "open_source", "sniff"]

MDMP_MAGIC = b"MDMP"
ELF_MAGIC = b"\x7fELF"


def sniff(path: str) -> str:
    """``"minidump"`` or ``"elf-core"`` from the first bytes of the file."""
    try:
        with open(path, "rb") as f:
            magic = f.read(4)
    except IsADirectoryError:
        raise UnsupportedDump("is a directory", path) from None
    except OSError as e:
        raise DumpError(f"cannot open: {e.strerror or e}", path) from None
    if magic == MDMP_MAGIC:
        return "minidump"
    if magic == ELF_MAGIC:
        return "elf-core"
    return _not_a_dump(magic, path)


def _not_a_dump(magic: bytes, path: str):
    if len(magic) < 4:
        raise TruncatedDump(f"file of {len(magic)} bytes is too short for any dump format", path)
    raise UnsupportedDump(f"not a minidump or ELF core (magic {magic.hex(' ')})", path)


def open_dump(path: str, limits: Limits = DEFAULT_LIMITS) -> DumpFile:
    """Open a dump read-only, whatever its name: a file, or ``-`` for standard input, a pipe, or an xz, gzip
    or bzip2 file (copied, decompressed, to a temporary file first: :mod:`.spool`).  Raises only
    :class:`ClrLayoutError` subclasses."""
    from .spool import needs_spool, spool

    if needs_spool(path):
        source = FileSource(path, fd=spool(path, limits))
    else:
        sniff(path)
        try:
            source = FileSource(path)
        except OSError as e:
            raise DumpError(f"cannot open: {e.strerror or e}", path) from None
    try:
        return open_source(source, path, limits)
    except BaseException:
        source.close()
        raise


def open_source(source, path: str = "<memory>", limits: Limits = DEFAULT_LIMITS) -> DumpFile:
    """A dump from any source with ``pread`` and ``size`` (a file, or bytes for fuzzing and tests).  A file
    cut short is said first among its warnings: it explains much of what may follow."""
    magic = source.pread(0, 4)
    if magic == MDMP_MAGIC:
        from .minidump import read_minidump

        dump = read_minidump(path, source, limits)
    elif magic == ELF_MAGIC:
        from .elfcore import read_elf_core

        dump = read_elf_core(path, source, limits)
    else:
        return _not_a_dump(magic, path)
    if dump.truncated_bytes:
        dump.warnings.insert(0, dump.truncation())
    return dump

