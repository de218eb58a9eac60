"""The dump's memory, and where it lacks the pages of a mapped file, the file's bytes: what a debugger reads when a
dump leaves out the code and read-only data of the modules (createdump's default heap dump keeps only writable
memory).  The stack walker needs a module's unwind data, RUNTIME_FUNCTION table and GC info, which are in the
image's read-only sections; the file is found at the path the dump names, or by its name under --assemblies.
Pages a dump holds always win: a file's bytes are used only where the dump has none."""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterable
from typing import Any

PAGE = 4096
#: pages kept at the most (64 MB)
MAX_PAGES = 1 << 14


class ImageBackedMemory:
    """``try_read``/``try_read_pointer``/``try_read_u32`` over the dump's memory, then the mapped files'."""

    def __init__(self, space: Any, mappings: Iterable[Any], open_file: Callable[[str], Any]) -> None:
        self.space = space
        self.pointer_size = space.pointer_size
        self._mappings = sorted(m for m in mappings if not m.path.startswith(("/dev/", "[")))
        self._starts = [m.start for m in self._mappings]
        self._open = open_file
        #: bytes read from files (the walk's reads outside the dump), for the caller to say so
        self.file_bytes = 0
        #: pages read so far: the readable prefix of each (the dump's bytes, else the file's)
        self._pages: dict[int, bytes] = {}

    def _page(self, start: int) -> bytes:
        page = self.space.read_available(start, PAGE)
        if len(page) < PAGE and not page:
            page = self._from_file(start, PAGE)
        if len(self._pages) < MAX_PAGES:
            self._pages[start] = page
        return page

    def try_read(self, address: int, size: int) -> bytes | None:
        offset = address & (PAGE - 1)
        # within one page: from the pages read so far (the walk reads the same ones); not while the dump's reads
        # are recorded (trim keeps what was read, and a redacted copy keeps it as it was: exactly the bytes used)
        if offset + size <= PAGE and getattr(self.space, "log", None) is None:
            page = self._pages.get(address - offset)
            if page is None:
                page = self._page(address - offset)
            if offset + size <= len(page):
                return page[offset : offset + size]
        data = self.space.try_read(address, size)
        if data is not None:
            return data
        out = b""
        while len(out) < size:
            at = address + len(out)
            part = self.space.read_available(at, size - len(out))
            if not part:  # a page at a time: the dump's own bytes win again where it has them
                part = self._from_file(at, size - len(out))
            if not part:
                return None
            out += part
        return out

    def _from_file(self, address: int, size: int) -> bytes:
        i = bisect.bisect_right(self._starts, address) - 1
        if i < 0 or address >= self._mappings[i].end:
            return b""
        m = self._mappings[i]
        f = self._open(m.path)
        if f is None:
            return b""
        n = min(size, m.end - address, PAGE - address % PAGE)
        data = f.read(m.offset + address - m.start, n)
        self.file_bytes += len(data)
        return data

    def try_read_pointer(self, address: int) -> int | None:
        data = self.try_read(address, self.pointer_size)
        return None if data is None or len(data) < self.pointer_size else int.from_bytes(data, "little")

    def try_read_u32(self, address: int) -> int | None:
        data = self.try_read(address, 4)
        return None if data is None or len(data) < 4 else int.from_bytes(data, "little")
