"""Where an object holds references: the GC's own description of it, the CGCDesc stored just before each
MethodTable that contains pointers (dotnet/runtime ``src/coreclr/gc/gcdesc.h``; ClrMD's ``GCDesc.cs`` reads it
the same way).

The pointer-sized word at ``mt - ptr`` is the series count ``n``:

- ``n > 0``: ``n`` series, series ``i`` at ``mt - ptr - 2*ptr*(i+1)`` as ``{seriessize, startoffset}``.  The
  slots of an object ``o`` run from ``o + startoffset`` up to ``o + startoffset + seriessize + size(o)`` (the
  series size is stored relative to the object's size: negative for fixed-size objects).
- ``n < 0`` (arrays of structs that hold references): ``startoffset`` at ``mt - 2*ptr``, then ``-n`` items
  ``{nptrs, skip}`` of two half-words at ``mt - 3*ptr``, ``mt - 4*ptr``, ...; the items repeat, element after
  element, up to ``o + size(o) - ptr``: ``nptrs`` references, then ``skip`` bytes.

Nothing here is trusted: a description that is out of bounds (more series than a limit, slots outside the
object) is None, and its objects are reported as having no references the walk can follow.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: more series than this is not a real description (the largest seen: a few dozen)
MAX_SERIES = 4096


@dataclass(frozen=True)
class GcDesc:
    """The reference slots of the objects of one MethodTable."""

    #: n > 0: ((seriessize, startoffset), ...), highest series first as stored
    series: tuple = ()
    #: n < 0: the start offset and the repeating (nptrs, skip) items
    start: int = 0
    items: tuple = ()

    @property
    def repeating(self) -> bool:
        return bool(self.items)

    def slot_offsets(self, size: int, pointer_size: int) -> np.ndarray:
        """The offsets from the object pointer of the reference slots of an object of SOS size ``size``."""
        out = []
        if not self.repeating:
            for series_size, start in self.series:
                end = start + series_size + size
                if end > start:
                    out.append(np.arange(start, end, pointer_size, dtype=np.int64))
        else:
            period = sum(n * pointer_size + skip for n, skip in self.items)
            end = size - pointer_size
            if period <= 0:
                return np.zeros(0, dtype=np.int64)
            one = []
            pos = 0
            for n, skip in self.items:
                one.append(np.arange(pos, pos + n * pointer_size, pointer_size, dtype=np.int64))
                pos += n * pointer_size + skip
            element = np.concatenate(one) if one else np.zeros(0, dtype=np.int64)
            count = max(0, (end - self.start + period - 1) // period)
            slots = (self.start + np.arange(count, dtype=np.int64)[:, None] * period + element[None, :]).ravel()
            out.append(slots[slots < end])
        return np.concatenate(out) if out else np.zeros(0, dtype=np.int64)


def read_gcdesc(space, method_table: int, base_size: int) -> GcDesc | None:
    """The CGCDesc of the MethodTable at ``method_table`` (None: unreadable or not plausible)."""
    ptr = space.pointer_size
    count = space.try_read_pointer(method_table - ptr)
    if count is None:
        return None
    if count >= 1 << (8 * ptr - 1):
        count -= 1 << (8 * ptr)
    if count > 0:
        if count > MAX_SERIES:
            return None
        raw = space.try_read(method_table - ptr - 2 * ptr * count, 2 * ptr * count)
        if raw is None:
            return None
        words = np.frombuffer(raw, dtype="<i8" if ptr == 8 else "<i4").astype(np.int64)
        # stored lowest address first: series count-1 ... series 0
        series = tuple((int(words[2 * k]), int(words[2 * k + 1])) for k in range(count - 1, -1, -1))
        if any(start < ptr or start % ptr for _, start in series):
            return None
        return GcDesc(series=series)
    if count < 0:
        n = -count
        if n > MAX_SERIES:
            return None
        start = space.try_read_pointer(method_table - 2 * ptr)
        raw = space.try_read(method_table - 2 * ptr - ptr * n, ptr * n)
        if start is None or raw is None or start < ptr or start % ptr:
            return None
        half = np.frombuffer(raw, dtype="<u4" if ptr == 8 else "<u2").astype(np.int64)
        # item k at mt - 3*ptr - k*ptr: the lowest address holds the last item
        items = tuple((int(half[2 * k]), int(half[2 * k + 1])) for k in range(n - 1, -1, -1))
        if any(nptrs < 0 or skip < 0 or skip % ptr for nptrs, skip in items) or all(nptrs == 0 for nptrs, _ in items):
            return None
        return GcDesc(start=start, items=items)
    return None
