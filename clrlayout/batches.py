"""Strings in batches: numpy arrays of addresses, lengths, headers and sizes over a buffer that holds their
characters.  Scans produce batches, so that whole-heap questions (totals, histograms, duplicates) are
answered with vectorised arithmetic, and values are decoded only for the strings a command prints.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Iterator

import numpy as np

from .profiles import Profile
from .strings import StringObject
from .structs import decode_utf16

U64_MASK = (1 << 64) - 1


@dataclass
class StringBatch:
    profile: Profile
    method_table: int
    addresses: np.ndarray  # uint64
    lengths: np.ndarray  # int64, UTF-16 units
    headers: np.ndarray  # uint64 (the CLR's 32-bit sync block word, Mono's lock word)
    large: np.ndarray  # bool: on the large object heap
    data: bytes  # holds the characters
    char_offsets: np.ndarray  # int64: where each string's first character is in `data`
    header_padding: np.ndarray | None = None  # uint32, 64-bit CLR only
    terminated: np.ndarray | None = None  # bool

    def __len__(self) -> int:
        return len(self.addresses)

    @property
    def sizes(self) -> np.ndarray:
        """SOS sizes: BaseSize + 2 * length."""
        s = self.profile.string
        return s.base_size + s.component_size * self.lengths

    @property
    def aligned_sizes(self) -> np.ndarray:
        o = self.profile.object
        sizes = self.sizes
        a = np.where(self.large, o.large_object_alignment, o.alignment).astype(np.int64) - 1
        return np.maximum((sizes + a) & ~a, o.min_object_size)

    def raw(self, i: int) -> bytes:
        at = int(self.char_offsets[i])
        return self.data[at : at + 2 * int(self.lengths[i])]

    def value(self, i: int) -> str:
        return decode_utf16(self.raw(i))

    def select(self, mask: np.ndarray) -> "StringBatch":
        pick = (lambda a: None if a is None else a[mask])
        return StringBatch(self.profile, self.method_table, self.addresses[mask], self.lengths[mask],
                           self.headers[mask], self.large[mask], self.data, self.char_offsets[mask],
                           pick(self.header_padding), pick(self.terminated))

    def objects(self, decode: bool = True) -> Iterator[StringObject]:
        sizes, aligned = self.sizes, self.aligned_sizes
        pad = self.header_padding
        term = self.terminated
        mt = self.method_table
        for i in range(len(self)):
            yield StringObject(int(self.addresses[i]), mt, int(self.lengths[i]), int(sizes[i]), int(aligned[i]),
                               int(self.headers[i]), self.value(i) if decode else None, bool(self.large[i]),
                               True if term is None else bool(term[i]), 0 if pad is None else int(pad[i]))

    def hashes(self) -> np.ndarray:
        """A 64-bit polynomial hash of each string's UTF-16 units (and length), computed for the whole
        batch with prefix sums; equal strings get equal hashes.  Duplicates are confirmed byte for byte."""
        units = np.frombuffer(self.data, dtype="<u2", count=len(self.data) // 2)
        n = len(units)
        if not len(self):
            return np.zeros(0, dtype=np.uint64)
        p = np.uint64(0x100000001B3)
        inv = np.uint64(pow(0x100000001B3, -1, 1 << 64))
        with np.errstate(over="ignore"):
            powers = np.empty(n + 1, dtype=np.uint64)
            powers[0] = 1
            powers[1:] = np.cumprod(np.full(n, p, dtype=np.uint64))
            inverse = np.empty(n + 1, dtype=np.uint64)
            inverse[0] = 1
            inverse[1:] = np.cumprod(np.full(n, inv, dtype=np.uint64))
            prefix = np.zeros(n + 1, dtype=np.uint64)
            np.cumsum((units.astype(np.uint64) + np.uint64(1)) * powers[:n], out=prefix[1:])
            start = (self.char_offsets // 2).astype(np.int64)
            end = start + self.lengths.astype(np.int64)
            h = (prefix[end] - prefix[start]) * inverse[start]
            return h ^ (self.lengths.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15))


def batch_from_objects(profile: Profile, objects: Iterable[StringObject]) -> StringBatch:
    """A batch from decoded strings (the per-object path); their characters are concatenated."""
    objs = list(objects)
    raw = [o.value.encode("utf-16-le", "surrogatepass") for o in objs]
    offsets = np.zeros(len(objs), dtype=np.int64)
    if objs:
        offsets[1:] = np.cumsum([len(r) for r in raw[:-1]])
    mt = objs[0].method_table if objs else 0
    return StringBatch(
        profile, mt,
        np.array([o.address for o in objs], dtype=np.uint64),
        np.array([o.length for o in objs], dtype=np.int64),
        np.array([o.header for o in objs], dtype=np.uint64),
        np.array([o.large for o in objs], dtype=bool),
        b"".join(raw), offsets,
        np.array([o.header_padding for o in objs], dtype=np.uint64),
        np.array([o.terminated for o in objs], dtype=bool),
    )
