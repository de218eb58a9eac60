"""Strings in batches: numpy arrays of addresses, lengths, headers and sizes over a buffer that holds their
characters.  Scans produce batches, so that whole-heap questions (totals, histograms, duplicates) are
answered with vectorised arithmetic, and values are decoded only for the strings a command prints.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import numpy as np

from ..heap.segments import HEAP_CODES, HEAPS
from ..runtime.profiles import Profile
from ..runtime.structs import decode_utf16
from .strings import StringObject

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
    heaps: np.ndarray | None = None  # uint8 heap codes (heap.segments.HEAPS); None: soh / loh by ``large``
    gc_heap: int | None = None  # the GC heap all of them are on (server GC), when known

    def __post_init__(self):
        if self.heaps is None:
            self.heaps = np.where(self.large, HEAP_CODES["loh"], HEAP_CODES["soh"]).astype(np.uint8)

    def __len__(self) -> int:
        return len(self.addresses)

    @property
    def sizes(self) -> np.ndarray:
        """SOS sizes: BaseSize + 2 * length."""
        s = self.profile.string
        return s.base_size + s.component_size * self.lengths

    @property
    def aligned_sizes(self) -> np.ndarray:
        return aligned_sizes(self.profile, self.lengths, self.large)

    def raw(self, i: int) -> bytes:
        at = int(self.char_offsets[i])
        return self.data[at : at + 2 * int(self.lengths[i])]

    def value(self, i: int) -> str:
        return decode_utf16(self.raw(i))

    def select(self, mask: np.ndarray) -> StringBatch:
        pick = (lambda a: None if a is None else a[mask])
        return StringBatch(self.profile, self.method_table, self.addresses[mask], self.lengths[mask],
                           self.headers[mask], self.large[mask], self.data, self.char_offsets[mask],
                           pick(self.header_padding), pick(self.terminated), self.heaps[mask], self.gc_heap)

    def object(self, i: int, decode: bool = True) -> StringObject:
        size = int(self.profile.string.base_size + self.profile.string.component_size * int(self.lengths[i]))
        o = self.profile.object
        large = bool(self.large[i])
        a = (o.large_object_alignment if large else o.alignment) - 1
        return StringObject(int(self.addresses[i]), self.method_table, int(self.lengths[i]), size,
                            max((size + a) & ~a, o.min_object_size), int(self.headers[i]),
                            self.value(i) if decode else None, large,
                            True if self.terminated is None else bool(self.terminated[i]),
                            0 if self.header_padding is None else int(self.header_padding[i]),
                            HEAPS[int(self.heaps[i])])

    def objects(self, decode: bool = True) -> Iterator[StringObject]:
        for i in range(len(self)):
            yield self.object(i, decode)

    def hashes(self) -> np.ndarray:
        """A 64-bit polynomial hash of each string's UTF-16 units (and length), computed with prefix sums
        over a chunk of strings at a time (each over its own part of the buffer); equal strings get equal
        hashes.  Duplicates are confirmed byte for byte."""
        out = np.empty(len(self), dtype=np.uint64)
        for first in range(0, len(self), CHUNK):
            last = min(len(self), first + CHUNK)
            out[first:last] = self._chunk_hashes(first, last)
        return out

    def chunk_units(self, first: int, last: int) -> tuple[np.ndarray, np.ndarray]:
        """The UTF-16 units of strings ``first`` to ``last - 1``, as one array over their part of the buffer
        (characters at even offsets), and where each string's characters start in it."""
        offsets = self.char_offsets[first:last]
        lo = int(offsets.min())
        n = (int((offsets + 2 * self.lengths[first:last]).max()) - lo) // 2
        return np.frombuffer(self.data, dtype="<u2", count=n, offset=lo), (offsets - lo) // 2

    def _chunk_hashes(self, first: int, last: int) -> np.ndarray:
        lengths = self.lengths[first:last].astype(np.int64)
        units, start = self.chunk_units(first, last)
        n = len(units)
        with np.errstate(over="ignore"):
            powers = _powers(_HASH_BASE, n + 1)
            inverse = _powers(_HASH_INVERSE, n + 1)
            prefix = np.zeros(n + 1, dtype=np.uint64)
            np.cumsum((units.astype(np.uint64) + np.uint64(1)) * powers[:n], out=prefix[1:])
            end = start + lengths
            h = (prefix[end] - prefix[start]) * inverse[start]
            return h ^ (lengths.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15))


CHUNK = 2048  # strings hashed at once: their temporaries stay in the CPU cache
_HASH_BASE = 0x100000001B3  # FNV's 64-bit prime
_HASH_INVERSE = pow(_HASH_BASE, -1, 1 << 64)
_BLOCK = 4096


def _powers(base: int, count: int) -> np.ndarray:
    """base**0 .. base**(count - 1) modulo 2**64: a block of powers times the powers of base**_BLOCK (two
    short cumulative products and one outer product, instead of one long sequential product)."""
    with np.errstate(over="ignore"):
        small = np.full(_BLOCK, base, dtype=np.uint64)
        small[0] = 1
        np.cumprod(small, out=small)
        big = np.full(-(-count // _BLOCK), pow(base, _BLOCK, 1 << 64), dtype=np.uint64)
        big[0] = 1
        np.cumprod(big, out=big)
        return (big[:, None] * small[None, :]).ravel()[:count]


def aligned_sizes(profile: Profile, lengths: np.ndarray, large) -> np.ndarray:
    """The aligned sizes of strings of these lengths (``large``: one flag for all of them, or one each)."""
    o, s = profile.object, profile.string
    sizes = s.base_size + s.component_size * lengths.astype(np.int64, copy=False)
    a = np.where(large, o.large_object_alignment, o.alignment).astype(np.int64) - 1
    return np.maximum((sizes + a) & ~a, o.min_object_size)


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
        np.array([HEAP_CODES[o.heap] for o in objs], dtype=np.uint8),
    )


def batch_from_window(win, string_mt: int, profile: Profile, space, findings=None) -> list[StringBatch]:
    """The strings of a fast-walk window: one batch over the window's own buffer, plus one for the strings
    whose characters run past the buffer (read on their own)."""
    sel = win.method_tables == np.uint64(string_mt)
    count = int(np.count_nonzero(sel))
    if not count:
        return []
    offs, lengths = (win.offsets, win.counts) if count == len(sel) else (win.offsets[sel], win.counts[sel])
    data = win.data
    o = profile.object
    s = profile.string
    chars = offs + s.chars_offset
    # objects do not overlap, so the strings' ends are in order: those inside the buffer come first (nearly
    # always all of them: the buffer runs past the window)
    inside = len(offs)
    if int(chars[-1]) + 2 * int(lengths[-1]) + s.terminator_size > len(data):
        inside = int(np.searchsorted(chars + 2 * lengths + s.terminator_size, len(data), side="right"))
    out = []
    if inside:
        io, ic, il = offs[:inside], chars[:inside], lengths[:inside]
        if o.header_size == 8 and o.sync_block_offset == -4:  # 64-bit CLR: padding, then the sync block word
            below = np.frombuffer(data, dtype="<u8", count=len(data) // 8).take((io - 8) >> 3)  # both at once
            headers, pad = below >> np.uint64(32), below & np.uint64(0xFFFFFFFF)
        else:
            u32 = np.frombuffer(data, dtype="<u4", count=len(data) // 4)
            headers = u32.take((io + o.sync_block_offset) >> 2).astype(np.uint64) if o.header_size \
                else np.zeros(len(io), np.uint64)
            pad = u32.take((io - o.header_size) >> 2).astype(np.uint64) if o.header_size == 8 else None
        u16 = np.frombuffer(data, dtype="<u2", count=len(data) // 2)
        terminated = u16.take((ic + 2 * il) >> 1) == 0
        addresses = np.uint64(win.base) + io.astype(np.uint64)
        out.append(StringBatch(profile, string_mt, addresses, il.astype(np.int64, copy=False), headers,
                               np.full(len(io), win.segment.large), data, ic, pad, terminated,
                               win.segment.heap_codes(addresses), win.segment.heap))
    if inside < len(offs):
        from .strings import read_strings

        objs = read_strings(space, profile, (win.base + int(x) for x in offs[inside:]), win.segment.large, findings)
        if objs:
            batch = batch_from_objects(profile, objs)
            batch.heaps = win.segment.heap_codes(batch.addresses)
            batch.gc_heap = win.segment.heap
            out.append(batch)
    return out


def batch_from_addresses(space, profile: Profile, method_table: int, addresses, large,
                         findings=None) -> StringBatch | None:
    """A batch of the strings at ``addresses`` (the object scan's results): one read per string, then the
    fields for the whole batch with numpy.  A string that cannot be read is a finding, as in read_strings."""
    from ..errors import AddressError, LimitExceeded
    from ..findings import FindingKind

    o, s = profile.object, profile.string
    parts, offsets, kept, lengths, flags = [], [], [], [], []
    pos = 0
    for address in addresses:
        length = space.try_read_u32(address + s.length_offset)
        if length is None:
            continue
        is_large = large(address) if callable(large) else large
        start = address - o.header_size
        span = profile.string_aligned_size(length, is_large)
        try:
            space.limits.check("string length", length, "max_string_length")
            data = space.read(start, span)
        except (AddressError, LimitExceeded) as e:
            if findings is not None:
                kind = FindingKind.MEMORY_MISSING if isinstance(e, AddressError) else FindingKind.STRING_TOO_LONG
                findings.add(kind, address, str(e))
            continue
        parts.append(data)
        offsets.append(pos + o.header_size)  # the object pointer's offset in the buffer
        pos += len(data)
        kept.append(address)
        lengths.append(length)
        flags.append(is_large)
    if not kept:
        return None
    data = b"".join(parts)
    objs = np.array(offsets, dtype=np.int64)
    lens = np.array(lengths, dtype=np.int64)
    u8 = np.frombuffer(data, dtype=np.uint8)

    def u32(at):
        return (u8[at].astype(np.uint64) | (u8[at + 1].astype(np.uint64) << 8) | (u8[at + 2].astype(np.uint64) << 16)
                | (u8[at + 3].astype(np.uint64) << 24))

    if o.header_size:
        headers = u32(objs + o.sync_block_offset)
    else:  # Mono: the lock word after the vtable
        at = objs + o.sync_pointer_offset
        headers = sum(u8[at + k].astype(np.uint64) << np.uint64(8 * k) for k in range(profile.pointer_size))
    pad = u32(objs - o.header_size) if o.header_size == 8 else None
    chars = objs + s.chars_offset
    term = chars + 2 * lens
    terminated = (u8[term] == 0) & (u8[term + 1] == 0)
    return StringBatch(profile, method_table, np.array(kept, dtype=np.uint64), lens, headers,
                       np.array(flags, dtype=bool), data, chars, pad, terminated)
