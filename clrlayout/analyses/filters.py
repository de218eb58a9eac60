"""Filters on strings, composed with AND: what --min-length, --max-length, --min-size, --max-size, --gen,
--contains, --regex, --address-range and --mt select.  Shape tests come first, so values are decoded only
for strings that can still match."""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class StringFilter:
    min_length: int | None = None
    max_length: int | None = None
    contains: str | None = None
    regex: re.Pattern | None = None
    address_range: tuple[int, int] | None = None  # [start, end)
    min_size: int | None = None  # SOS size, bytes
    max_size: int | None = None
    heaps: frozenset | None = None  # heap codes (heap.segments.HEAPS)
    #: --live / --dead: the sorted addresses of the objects reachable from the roots, and which to keep
    live_addresses: object = None
    live: bool | None = None

    @property
    def needs_value(self) -> bool:
        return self.contains is not None or self.regex is not None

    @property
    def active(self) -> bool:
        return any(v is not None for v in (self.min_length, self.max_length, self.contains, self.regex,
                                           self.address_range, self.min_size, self.max_size, self.heaps, self.live))

    def apply(self, batch):
        """The strings of a batch that pass: shape tests vectorised, value tests per remaining string."""
        if not self.active:
            return batch
        import numpy as np

        mask = np.ones(len(batch), dtype=bool)
        if self.min_length is not None:
            mask &= batch.lengths >= self.min_length
        if self.max_length is not None:
            mask &= batch.lengths <= self.max_length
        if self.address_range is not None:
            lo, hi = self.address_range
            mask &= (batch.addresses >= np.uint64(lo)) & (batch.addresses < np.uint64(hi))
        if self.min_size is not None or self.max_size is not None:
            sizes = batch.sizes
            if self.min_size is not None:
                mask &= sizes >= self.min_size
            if self.max_size is not None:
                mask &= sizes <= self.max_size
        if self.heaps is not None:
            mask &= np.isin(batch.heaps, list(self.heaps))
        if self.live is not None:
            mask &= is_in(self.live_addresses, batch.addresses) == self.live
        if self.needs_value:
            for i in np.flatnonzero(mask):
                v = batch.value(int(i))
                if (self.contains is not None and self.contains not in v) or \
                        (self.regex is not None and not self.regex.search(v)):
                    mask[i] = False
        return batch.select(mask)


@dataclass(frozen=True)
class ObjectFilter:
    """What selects objects of any type (strings included): --mt, --gen, --address-range, --min-size,
    --max-size, composed with AND.  ``mask`` tests a whole window of the vectorised walk, ``accepts`` one
    object; both select the same objects."""

    address_range: tuple[int, int] | None = None  # [start, end)
    min_size: int | None = None  # SOS size, bytes
    max_size: int | None = None
    heaps: frozenset | None = None  # heap codes (heap.segments.HEAPS)
    method_table: int | None = None
    #: --live / --dead: the sorted addresses of the objects reachable from the roots (or a function that reads
    #: them, called once when a window is first tested: totals the index keeps never need them), and which to
    #: keep (free space is neither: it is left out of both)
    live_addresses: object = None
    live: bool | None = None
    free_method_tables: frozenset = frozenset()
    #: what names the live selection (its roots, live or dead, frozen objects or not): totals of it alone are
    #: kept in the dump's index under this name (None: not kept)
    live_key: str | None = None

    @property
    def active(self) -> bool:
        return any(v is not None for v in (self.address_range, self.min_size, self.max_size, self.heaps,
                                           self.method_table, self.live))

    @functools.cached_property
    def live_sorted(self) -> Any:
        """The sorted addresses of ``live_addresses``, read once."""
        found = self.live_addresses
        return found() if callable(found) else found

    @property
    def only_live(self) -> bool:
        """Whether only ``--live``/``--dead`` selects (the selection the dump's index can keep totals of)."""
        return self.live is not None and all(v is None for v in (
            self.address_range, self.min_size, self.max_size, self.heaps, self.method_table))

    def mask(self, win, sizes):
        """Which objects of a window (:class:`~clrlayout.heap.fastwalk.WindowObjects`) pass, given their SOS
        sizes; None when all do."""
        if not self.active:
            return None
        import numpy as np

        keep = np.ones(len(sizes), dtype=bool)
        if self.min_size is not None:
            keep &= sizes >= self.min_size
        if self.max_size is not None:
            keep &= sizes <= self.max_size
        if self.method_table is not None:
            keep &= win.method_tables == np.uint64(self.method_table)
        if self.live is not None:
            keep &= is_in(self.live_sorted, win.offsets.astype(np.uint64) + np.uint64(win.base)) == self.live
            keep &= ~np.isin(win.method_tables, np.array(sorted(self.free_method_tables), dtype=np.uint64))
        if self.address_range is not None or self.heaps is not None:
            addresses = win.offsets.astype(np.uint64) + np.uint64(win.base)
            if self.address_range is not None:
                lo, hi = self.address_range
                keep &= (addresses >= np.uint64(lo)) & (addresses < np.uint64(hi))
            if self.heaps is not None:
                keep &= np.isin(win.segment.heap_codes(addresses), list(self.heaps))
        return keep

    def accepts(self, obj) -> bool:
        """Whether one object (a :class:`~clrlayout.heap.walk.WalkedObject`) passes."""
        from ..heap.segments import HEAP_CODES

        return not ((self.min_size is not None and obj.size < self.min_size)
                    or (self.max_size is not None and obj.size > self.max_size)
                    or (self.method_table is not None and obj.method_table != self.method_table)
                    or (self.address_range is not None
                        and not self.address_range[0] <= obj.address < self.address_range[1])
                    or (self.heaps is not None and HEAP_CODES[obj.segment.generation(obj.address)] not in self.heaps)
                    or (self.live is not None and (obj.method_table in self.free_method_tables
                                                   or bool(is_in(self.live_sorted, [obj.address])[0]) != self.live)))


def is_in(sorted_addresses: Any, addresses: Any) -> Any:
    """Which of ``addresses`` are in ``sorted_addresses`` (uint64, sorted)."""
    import numpy as np

    values = np.asarray(addresses, dtype=np.uint64)
    at = np.searchsorted(sorted_addresses, values)
    found = at < len(sorted_addresses)
    found[found] = sorted_addresses[at[found]] == values[found]
    return found
