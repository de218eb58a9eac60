"""One address space over the memory of any dump.

Readers turn their memory lists (minidump MemoryList/Memory64List, ELF PT_LOAD segments) into sorted
:class:`Region` objects that map target virtual addresses to file offsets.  Reads go through ``os.pread``
on the open file, so a dump is never loaded whole into memory.  Pointer size and byte order come from the
dump (the reader), never from the host.
"""

from __future__ import annotations

import bisect
import contextlib
import os
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from typing import NamedTuple

from ..errors import AddressError, LimitExceeded
from ..limits import DEFAULT_LIMITS, Limits


class Region(NamedTuple):
    """``size`` bytes of target memory at ``start``, stored in the dump file at ``offset``."""

    start: int
    size: int
    offset: int

    @property
    def end(self) -> int:
        return self.start + self.size


class FileSource:
    """Random access to a dump file, opened read-only."""

    def __init__(self, path: str, fd: int | None = None):
        """``fd``: an open descriptor to read instead of opening ``path`` (a spooled dump); it is closed here."""
        self.path = path
        self._fd = os.open(path, os.O_RDONLY | getattr(os, "O_BINARY", 0)) if fd is None else fd
        self.size = os.fstat(self._fd).st_size

    def pread(self, offset: int, size: int) -> bytes:
        return os.pread(self._fd, size, offset)

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


class BytesSource:
    """A dump (or synthetic memory) held in a bytes object; for tests and small buffers."""

    def __init__(self, data: bytes, path: str = "<memory>"):
        self._data = memoryview(bytes(data))
        self.size = len(self._data)
        self.path = path

    def pread(self, offset: int, size: int) -> bytes:
        return bytes(self._data[offset : offset + size])

    def close(self) -> None:
        pass


@dataclass
class ReadLog:
    """Address ranges read while recording (``clrlayout trim`` keeps exactly these)."""

    ranges: list

    def add(self, address: int, size: int) -> None:
        self.ranges.append((address, address + size))


class AddressSpace:
    """Target memory: sorted, non-overlapping regions backed by a source."""

    def __init__(self, source, regions, pointer_size: int, little_endian: bool = True,
                 limits: Limits = DEFAULT_LIMITS, described=None, partial: bool = False):
        """``described``: (start, end) ranges the dump describes as the process's memory, whether or not it
        holds their bytes; ``partial``: the dump leaves memory out without saying which (both tell memory
        the dump lacks from addresses that were never the process's: :meth:`is_absent`)."""
        if pointer_size not in (4, 8):
            raise ValueError(f"pointer size {pointer_size}")
        self.source = source
        self.pointer_size = pointer_size
        self.little_endian = little_endian
        self.limits = limits
        self.overlaps = 0
        kept: list[Region] = []
        for r in sorted((Region(*r) for r in regions if r[1] > 0), key=lambda r: (r.start, -r.size)):
            if kept and r.start < kept[-1].end:
                # Overlapping memory descriptors: keep the first, clip the later one.
                self.overlaps += 1
                cut = kept[-1].end - r.start
                if cut >= r.size:
                    continue
                r = Region(r.start + cut, r.size - cut, r.offset + cut)
            kept.append(r)
        self._regions = kept
        self._starts = [r.start for r in kept]
        # reads go by spans: regions that follow each other both in memory and in the file, merged
        # (createdump writes a core as thousands of adjacent 4 KB-aligned segments)
        spans: list[Region] = []
        for r in kept:
            last = spans[-1] if spans else None
            if last is not None and r.start == last.end and r.offset == last.offset + last.size:
                spans[-1] = Region(last.start, last.size + r.size, last.offset)
            else:
                spans.append(r)
        self._spans = spans
        self._span_starts = [r.start for r in spans]
        self.partial = partial
        self._described: list[tuple[int, int]] = []
        for lo, hi in sorted(described or ()):
            if self._described and lo <= self._described[-1][1]:
                self._described[-1] = (self._described[-1][0], max(self._described[-1][1], hi))
            elif lo < hi:
                self._described.append((lo, hi))
        self._described_starts = [lo for lo, _ in self._described]
        e = "<" if little_endian else ">"
        self._ptr = struct.Struct(e + ("Q" if pointer_size == 8 else "I"))
        self._u32 = struct.Struct(e + "I")
        self._u16 = struct.Struct(e + "H")
        self.log: ReadLog | None = None

    # --- regions ---------------------------------------------------------------------------------

    @property
    def regions(self) -> list[Region]:
        return self._regions

    def iter_regions(self) -> Iterator[Region]:
        return iter(self._regions)

    @property
    def total_bytes(self) -> int:
        return sum(r.size for r in self._regions)

    def region_at(self, address: int) -> Region | None:
        i = bisect.bisect_right(self._starts, address) - 1
        if i >= 0 and address < self._regions[i].end:
            return self._regions[i]
        return None

    def next_region(self, address: int) -> Region | None:
        """The region holding ``address`` or, if none does, the first one above it."""
        i = bisect.bisect_right(self._starts, address) - 1
        if i >= 0 and address < self._regions[i].end:
            return self._regions[i]
        i += 1
        return self._regions[i] if i < len(self._regions) else None

    def mapped_end(self, address: int) -> int:
        """End of the contiguous mapped memory that starts at ``address`` (``address`` if unmapped)."""
        end = address
        i = bisect.bisect_right(self._starts, address) - 1
        if i < 0 or address >= self._regions[i].end:
            return address
        while i < len(self._regions) and self._regions[i].start <= end:
            end = max(end, self._regions[i].end)
            i += 1
        return end

    def mapped_start(self, address: int) -> int:
        """Start of the contiguous mapped memory that holds ``address`` (``address`` if unmapped)."""
        i = bisect.bisect_right(self._starts, address) - 1
        if i < 0 or address >= self._regions[i].end:
            return address
        start = self._regions[i].start
        while i > 0 and self._regions[i - 1].end >= start:
            i -= 1
            start = min(start, self._regions[i].start)
        return start

    def is_absent(self, address: int) -> bool:
        """Whether ``address`` is memory of the process that the dump does not hold (a trimmed or cut dump,
        pages a core left out), as opposed to an address that was never the process's memory."""
        if self.region_at(address) is not None:
            return False
        return self.partial or self._listed(address)

    def is_described(self, address: int) -> bool:
        """Whether ``address`` is memory of the process as the dump describes it: held, or listed without its
        bytes (a core's PT_LOAD past its file size, a minidump's memory-info list)."""
        return self.region_at(address) is not None or self._listed(address)

    def _listed(self, address: int) -> bool:
        i = bisect.bisect_right(self._described_starts, address) - 1
        return i >= 0 and address < self._described[i][1]

    def is_mapped(self, address: int, size: int = 1) -> bool:
        return self.mapped_end(address) >= address + size

    def iter_runs(self) -> Iterator[tuple[int, int]]:
        """Maximal contiguous ranges ``(start, end)`` of mapped memory."""
        start = end = None
        for r in self._regions:
            if start is not None and r.start == end:
                end = r.end
                continue
            if start is not None:
                yield start, end
            start, end = r.start, r.end
        if start is not None:
            yield start, end

    # --- reads -----------------------------------------------------------------------------------

    def _read(self, address: int, size: int) -> tuple[bytes, int | None]:
        """The bytes at ``address``; stops at the first missing byte, whose address is returned."""
        if size <= 0:
            return b"", None
        if size > self.limits.max_read:
            raise LimitExceeded("read size", size, self.limits.max_read)
        i = bisect.bisect_right(self._span_starts, address) - 1
        if i < 0 or address >= self._spans[i].end:
            return b"", address
        parts = []
        pos = address
        end = address + size
        while pos < end:
            if i >= len(self._spans) or self._spans[i].start > pos:
                return b"".join(parts), pos
            r = self._spans[i]
            n = min(end, r.end) - pos
            data = self.source.pread(r.offset + (pos - r.start), n)
            parts.append(data)
            if len(data) < n:  # the file is shorter than its own memory list says
                return b"".join(parts), pos + len(data)
            pos += n
            i += 1
        return (parts[0] if len(parts) == 1 else b"".join(parts)), None

    def read(self, address: int, size: int) -> bytes:
        """Exactly ``size`` bytes at ``address`` or :class:`AddressError` naming the first missing byte."""
        data, missing = self._read(address, size)
        if missing is not None:
            raise AddressError(address, size, missing)
        if self.log is not None:
            self.log.add(address, size)
        return data

    def try_read(self, address: int, size: int) -> bytes | None:
        """Like :meth:`read`, but None when any byte is missing."""
        data, missing = self._read(address, size)
        if missing is not None:
            return None
        if self.log is not None:
            self.log.add(address, size)
        return data

    def read_available(self, address: int, size: int) -> bytes:
        """The readable prefix of the ``size`` bytes at ``address`` (possibly empty)."""
        data, _ = self._read(address, size)
        if self.log is not None and data:
            self.log.add(address, len(data))
        return data

    def gather(self, addresses, size: int, gap: int = 4096, run_limit: int = 64 << 20):
        """The ``size``-byte (1, 2, 4 or 8) little-endian unsigned values at each of ``addresses`` (a numpy array),
        as uint64; 0 where a byte is missing.  Nearby addresses are read in one run (at most ``run_limit``
        bytes; a run the dump does not wholly hold is read value by value)."""
        import numpy as np

        at = np.asarray(addresses, dtype=np.uint64).astype(np.int64)
        out = np.zeros(len(at), dtype=np.uint64)
        if not len(at):
            return out
        order = np.argsort(at, kind="stable")
        sorted_at = at[order]
        breaks = np.flatnonzero(np.diff(sorted_at) > gap) + 1
        spread = np.arange(size, dtype=np.int64)
        weights = (np.uint64(1) << (np.arange(size, dtype=np.uint64) * np.uint64(8)))
        for run in np.split(np.arange(len(at)), breaks):
            lo, hi = int(sorted_at[run[0]]), int(sorted_at[run[-1]]) + size
            data = self.try_read(lo, hi - lo) if hi - lo <= run_limit else None
            which = order[run]
            if data is not None:
                offsets = sorted_at[run] - lo
                if not (offsets % size).any():  # aligned to the first: one view of the run's words
                    words = np.frombuffer(data, dtype=f"<u{size}", count=len(data) // size)
                    out[which] = words[offsets // size]
                else:
                    raw = np.frombuffer(data, dtype=np.uint8)[offsets[:, None] + spread]
                    out[which] = (raw.astype(np.uint64) * weights).sum(axis=1, dtype=np.uint64)
                continue
            for j in which.tolist():  # a run the dump does not wholly hold: value by value
                value = self.try_read(int(at[j]), size)
                out[j] = int.from_bytes(value, "little") if value else 0
        return out

    def read_pointer(self, address: int) -> int:
        return self._ptr.unpack(self.read(address, self.pointer_size))[0]

    def try_read_pointer(self, address: int) -> int | None:
        data = self.try_read(address, self.pointer_size)
        return None if data is None else self._ptr.unpack(data)[0]

    def read_u32(self, address: int) -> int:
        return self._u32.unpack(self.read(address, 4))[0]

    def try_read_u32(self, address: int) -> int | None:
        data = self.try_read(address, 4)
        return None if data is None else self._u32.unpack(data)[0]

    def unpack_pointer(self, data: bytes, offset: int = 0) -> int:
        return self._ptr.unpack_from(data, offset)[0]

    def iter_windows(self, start: int, end: int, window: int | None = None,
                     record: bool = False) -> Iterator[tuple[int, bytes]]:
        """Contiguous readable blocks of at most ``window`` bytes covering the mapped part of [start, end).

        Scans use this; with ``record`` False their reads are not logged for ``trim``.
        """
        window = window or self.limits.window
        i = max(bisect.bisect_right(self._starts, start) - 1, 0)
        while i < len(self._regions):
            r = self._regions[i]
            if r.start >= end:
                break
            lo, hi = max(r.start, start), min(r.end, end)
            pos = lo
            while pos < hi:
                n = min(window, hi - pos)
                data = self.source.pread(r.offset + (pos - r.start), n)
                if not data:
                    break
                if record and self.log is not None:
                    self.log.add(pos, len(data))
                yield pos, data
                if len(data) < n:
                    break
                pos += n
            i += 1

    # --- recording (for trim) --------------------------------------------------------------------

    def start_recording(self) -> ReadLog:
        self.log = ReadLog([])
        return self.log

    def stop_recording(self) -> ReadLog | None:
        log, self.log = self.log, None
        return log

    def note(self, address: int, size: int) -> None:
        """Record a range as read (for reads made while recording was paused)."""
        if self.log is not None:
            self.log.add(address, size)

    @contextlib.contextmanager
    def paused_recording(self):
        """Reads inside are not recorded (probes whose failures do not matter to the result)."""
        log, self.log = self.log, None
        try:
            yield
        finally:
            self.log = log

    def close(self) -> None:
        self.source.close()
