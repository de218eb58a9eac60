"""Dumps that are not seekable files: standard input (``-``), pipes (``<(xz -dc x.core.xz)``) and compressed
files (xz, gzip, bzip2).  A dump is read at random, so such input is copied -- decompressed on the way --
into an unlinked temporary file (``$TMPDIR``), at most ``Limits.max_spool`` bytes of it.  Compressions that
Python cannot read without another package (zstd, lz4, zip) are named, with the command that undoes them.
"""

from __future__ import annotations

import os
import stat
import sys

from ..errors import DumpError, LimitExceeded, OutputError, UnsupportedDump
from ..limits import Limits

#: compressions read while spooling, by magic: (name, module whose ``open`` reads a binary stream; imported
#: only when a dump needs it)
READABLE = {b"\xfd7zXZ\x00": ("xz", "lzma"), b"\x1f\x8b": ("gzip", "gzip"), b"BZh": ("bzip2", "bz2")}
#: compressions recognised but not read: (name, how to undo them)
NAMED = {b"\x28\xb5\x2f\xfd": ("zstd", "zstd -d"), b"\x04\x22\x4d\x18": ("lz4", "lz4 -d"),
         b"PK\x03\x04": ("zip", "unzip"), b"7z\xbc\xaf\x27\x1c": ("7-Zip", "7z x")}
CHUNK = 4 << 20


def compression(magic: bytes) -> str | None:
    """The name of the compression ``magic`` (a file's first bytes) starts, or None."""
    for table in (READABLE, NAMED):
        for prefix, entry in table.items():
            if magic.startswith(prefix):
                return entry[0]
    return None


def needs_spool(path: str) -> bool:
    """Whether ``path`` must be copied to a temporary file before it can be read as a dump: standard input,
    a pipe or a device, or a compressed file."""
    if path == "-":
        return True
    try:
        st = os.stat(path)
    except OSError:
        return False  # the caller reports it
    if not stat.S_ISREG(st.st_mode):
        return not stat.S_ISDIR(st.st_mode)
    with open(path, "rb") as f:
        return compression(f.read(8)) is not None


def spool(path: str, limits: Limits) -> int:
    """A file descriptor of an unlinked temporary file that holds the dump ``path`` stands for (standard input
    for ``-``), decompressed.  :class:`DumpError` for what cannot be read, :class:`LimitExceeded` past
    ``limits.max_spool``, :class:`OutputError` when the temporary file cannot be written."""
    name = "standard input" if path == "-" else path
    try:
        raw = sys.stdin.buffer if path == "-" else open(path, "rb")
    except OSError as e:
        raise DumpError(f"cannot open: {e.strerror or e}", name) from None
    try:
        head = _peek(raw)
        kind = compression(head.data)
        for prefix, (what, how) in NAMED.items():
            if head.data.startswith(prefix):
                raise UnsupportedDump(f"the dump is compressed with {what}: decompress it first ({how})", name)
        stream = head
        if kind is not None:
            import importlib

            module = next(entry[1] for prefix, entry in READABLE.items() if head.data.startswith(prefix))
            stream = importlib.import_module(module).open(head)
        return _copy(stream, name, kind, limits)
    finally:
        if path != "-":
            raw.close()


def _copy(stream, name: str, kind: str | None, limits: Limits) -> int:
    import lzma
    import tempfile

    try:
        out = tempfile.TemporaryFile(prefix="clrlayout-spool-")
    except OSError as e:
        raise OutputError(f"cannot make a temporary file for {name} in {tempfile.gettempdir()}: "
                          f"{e.strerror or e} (set TMPDIR)") from None
    total = 0
    try:
        while True:
            try:
                chunk = stream.read(CHUNK)
            except (OSError, EOFError, lzma.LZMAError, ValueError) as e:
                raise DumpError(f"cannot read {'the ' + kind + ' data' if kind else 'the input'}: {e}", name) from None
            if not chunk:
                break
            total += len(chunk)
            if total > limits.max_spool:
                raise LimitExceeded("the dump read from a stream", total, limits.max_spool, name)
            try:
                out.write(chunk)
            except OSError as e:
                raise OutputError(f"cannot copy {name} to a temporary file in {tempfile.gettempdir()}: "
                                  f"{e.strerror or e} (set TMPDIR)") from None
        out.flush()
        return os.dup(out.fileno())
    finally:
        out.close()


class _peek:
    """A binary stream whose first bytes were read to see its magic, read again from the start."""

    def __init__(self, raw):
        self.raw = raw
        self.data = raw.read(8)
        self._head = self.data

    def read(self, n: int = -1) -> bytes:
        head, self._head = self._head, b""
        if n is None or n < 0:
            return head + self.raw.read()
        if len(head) >= n:
            self._head = head[n:]
            return head[:n]
        return head + self.raw.read(n - len(head))

    def readable(self) -> bool:
        return True
