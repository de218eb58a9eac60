"""String statistics over batches: totals, where the bytes go, lengths, heaps, and exact duplicates.

The space breakdown follows the profile's layout (JOL's "space losses" for a whole heap) and always adds
up to the total aligned size: object headers, MethodTable pointers, lock words (Mono), length fields, field
gaps, characters, terminators, the extra bytes BaseSize counts (.NET Framework x64), alignment padding.

Duplicates are grouped by a 64-bit hash of the full value and confirmed by comparing the bytes, so the
counts are exact; waste is ``(count - 1) * aligned_size`` (Visual Studio's and dotMemory's measure).
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field

import numpy as np

from ..heap.segments import HEAPS, LARGE_HEAPS
from ..objects.batches import StringBatch, aligned_sizes
from ..runtime.profiles import Profile
from ..util.arrays import lookup

BREAKDOWN_KEYS = ["object_headers", "method_table_pointers", "lock_words", "length_fields", "field_gaps",
                  "characters", "terminators", "extra_bytes", "alignment_padding"]


def per_object_bytes(profile: Profile) -> dict[str, int]:
    """Bytes of each fixed part of one string object (the characters and padding vary)."""
    o, s, ptr = profile.object, profile.string, profile.pointer_size
    lock = ptr if o.sync_pointer_offset is not None else 0
    fixed_fields = ptr + lock + 4  # MethodTable/vtable, lock word, length
    gaps = s.chars_offset - fixed_fields
    return {"object_headers": o.header_size, "method_table_pointers": ptr, "lock_words": lock,
            "length_fields": 4, "field_gaps": gaps, "terminators": s.terminator_size,
            "extra_bytes": profile.string_extra_bytes}


@dataclass
class StringStats:
    count: int = 0
    total_size: int = 0
    total_aligned_size: int = 0
    total_length: int = 0
    breakdown: dict = field(default_factory=dict)
    histogram: list = field(default_factory=list)
    largest: list = field(default_factory=list)
    #: by heap: gen0, gen1, gen2, loh, poh, frozen (soh where the generation is not known)
    heaps: dict = field(default_factory=dict)
    #: by GC heap, under server GC: [{"heap": index, "count", "aligned_bytes"}]
    gc_heaps: list = field(default_factory=list)

    def as_dict(self) -> dict:
        return {"count": self.count, "total_size": self.total_size, "total_aligned_size": self.total_aligned_size,
                "total_length": self.total_length, "breakdown": self.breakdown, "histogram": self.histogram,
                "largest": self.largest, "heaps": self.heaps, "gc_heaps": self.gc_heaps}


SHORT = 1024  # strings shorter than this are counted by length: their aligned size follows from it


class StatsCollector:
    """Totals of batches of strings.  Strings shorter than SHORT characters (nearly all) are only counted
    by length and heap, one ``bincount`` a batch; their sizes, bytes and histogram buckets come from those
    counts at the end.  Longer ones are summed as they come."""

    def __init__(self, profile: Profile, top: int = 10, gc_heaps: int = 0):
        """``gc_heaps``: how many GC heaps there are (server GC): each gets a total, empty ones too."""
        self.profile = profile
        self.top = top
        self.gc_heap_count = gc_heaps
        self.count = 0
        self.size = 0
        self.length = 0
        #: short strings counted by length: (GC heap, heap code) -> counts by length
        self.by_length: dict = {}
        # the long strings' aligned bytes, histogram, and (GC heap, heap code) -> [count, aligned bytes]
        self.aligned = 0
        self.hist_count = np.zeros(64, dtype=np.int64)
        self.hist_bytes = np.zeros(64, dtype=np.int64)
        self.places: dict = {}
        self._largest: list = []  # heap of (size, address, length, preview)

    def add(self, batch: StringBatch) -> None:
        n = len(batch)
        if not n:
            return
        s = self.profile.string
        lengths = batch.lengths.astype(np.int64, copy=False)
        length = int(lengths.sum())
        self.count += n
        self.length += length
        self.size += s.base_size * n + s.component_size * length  # the sum of the SOS sizes
        short = lengths < SHORT
        if short.all():
            self._count_short(lengths, batch.heaps, batch.gc_heap)
        else:
            self._count_short(lengths[short], batch.heaps[short], batch.gc_heap)
            self._add_long(lengths[~short], batch.heaps[~short], batch.gc_heap)
        sizes = s.base_size + s.component_size * lengths
        addresses = batch.addresses
        if len(self._largest) == self.top:  # only a string above the smallest kept can enter
            size, address = self._largest[0][0], -self._largest[0][1]
            pick = np.flatnonzero((sizes > size) | ((sizes == size) & (addresses < address)))
        else:
            pick = np.arange(n)
        if len(pick) > self.top:
            pick = self._top(pick, sizes[pick], addresses[pick])
        for i, size, address, length in zip(pick.tolist(), sizes[pick].tolist(), addresses[pick].tolist(),
                                            lengths[pick].tolist()):
            self._offer((size, -address, length, batch.value(i)[:80]))

    def _count_short(self, lengths: np.ndarray, heaps: np.ndarray, gc_heap: int | None) -> None:
        if not len(lengths):
            return
        first = int(heaps[0])
        if (heaps == first).all():  # a window's strings nearly always share one heap
            self._bump((gc_heap, first), np.bincount(lengths))
            return
        for code in np.flatnonzero(np.bincount(heaps)).tolist():  # not np.unique: it imports numpy.ma
            self._bump((gc_heap, code), np.bincount(lengths[heaps == code]))

    def _bump(self, place: tuple, counts: np.ndarray) -> None:
        have = self.by_length.get(place)
        if have is None:
            self.by_length[place] = counts.astype(np.int64, copy=True)
            return
        if len(counts) > len(have):
            have = self.by_length[place] = np.concatenate((have, np.zeros(len(counts) - len(have), have.dtype)))
        have[: len(counts)] += counts

    def _add_long(self, lengths: np.ndarray, heaps: np.ndarray, gc_heap: int | None) -> None:
        large = np.isin(heaps, LARGE_HEAPS)
        aligned = aligned_sizes(self.profile, lengths, large)
        self._add_buckets(np.frexp(lengths)[1], np.ones(len(lengths), dtype=np.int64), aligned)
        self.aligned += int(aligned.sum())
        for code in np.flatnonzero(np.bincount(heaps)).tolist():  # not np.unique: it imports numpy.ma
            on = heaps == code
            self._place(gc_heap, code, int(np.count_nonzero(on)), int(aligned[on].sum()))

    def _place(self, gc_heap: int | None, code: int, count: int, aligned: int) -> None:
        have = self.places.setdefault((gc_heap, code), [0, 0])
        have[0] += count
        have[1] += aligned

    def _add_buckets(self, buckets: np.ndarray, counts: np.ndarray, aligned_bytes: np.ndarray) -> None:
        """Histogram buckets by bit length: 0 | 1 | 2-3 | 4-7 | ... (``frexp``: exact below 2**53)."""
        self.hist_count += np.bincount(buckets, weights=counts, minlength=64)[:64].astype(np.int64)
        self.hist_bytes += np.bincount(buckets, weights=aligned_bytes, minlength=64)[:64].astype(np.int64)

    def _top(self, pick: np.ndarray, sizes: np.ndarray, addresses: np.ndarray) -> np.ndarray:
        """The ``top`` of ``pick`` by size, then by lowest address (the order ``_offer`` keeps)."""
        blocks = 4 * self.top
        if len(sizes) >= 64 * blocks:
            # first a floor, from the maxima of ``blocks`` parts: the top-th largest of them is at most the
            # top-th largest size (they are that many sizes at least as large), and few sizes reach it
            maxima = sizes[: len(sizes) - len(sizes) % blocks].reshape(blocks, -1).max(axis=1)
            keep = np.flatnonzero(sizes >= np.partition(maxima, blocks - self.top)[blocks - self.top])
            pick, sizes, addresses = pick[keep], sizes[keep], addresses[keep]
        kth = np.partition(sizes, len(sizes) - self.top)[len(sizes) - self.top]  # the top-th largest size
        above = np.flatnonzero(sizes > kth)
        tied = np.flatnonzero(sizes == kth)
        need = self.top - len(above)
        if len(tied) > need:
            tied = tied[np.argpartition(addresses[tied], need - 1)[:need]]
        return pick[np.concatenate((above, tied))]

    def _offer(self, item: tuple) -> None:
        """Keep ``item`` (size, -address, length, preview) if it is among the ``top`` largest so far."""
        if len(self._largest) < self.top:
            heapq.heappush(self._largest, item)
        elif item > self._largest[0]:
            heapq.heapreplace(self._largest, item)

    def __getstate__(self) -> dict:  # to another process: the totals, not the profile (merge needs none)
        return {**self.__dict__, "profile": None}

    def merge(self, other: StatsCollector) -> None:
        """Add what another collector saw (another part of the heap)."""
        self.count += other.count
        self.size += other.size
        self.length += other.length
        for place, counts in other.by_length.items():
            self._bump(place, counts)
        self.aligned += other.aligned
        self.hist_count += other.hist_count
        self.hist_bytes += other.hist_bytes
        for (gc_heap, code), (count, size) in other.places.items():
            self._place(gc_heap, code, count, size)
        for item in other._largest:
            self._offer(item)

    def finish(self) -> StringStats:
        """The totals; the short strings' sizes and buckets come from their counts by length here."""
        for (gc_heap, code), counts in sorted(self.by_length.items(), key=lambda kv: (kv[0][0] or 0, kv[0][1])):
            lengths = np.arange(len(counts))
            aligned = aligned_sizes(self.profile, lengths, code in LARGE_HEAPS) * counts
            self._add_buckets(np.frexp(lengths)[1], counts, aligned)
            self.aligned += int(aligned.sum())
            self._place(gc_heap, code, int(counts.sum()), int(aligned.sum()))
        self.by_length = {}  # counted in now
        fixed = per_object_bytes(self.profile)
        breakdown = dict.fromkeys(BREAKDOWN_KEYS, 0)
        for k, v in fixed.items():
            breakdown[k] = v * self.count
        breakdown["characters"] = 2 * self.length
        breakdown["alignment_padding"] = self.aligned - self.size
        assert sum(breakdown.values()) == self.aligned, "the breakdown must add up to the aligned total"
        histogram = []
        for b in range(64):
            if self.hist_count[b]:
                lo = 0 if b == 0 else 1 << (b - 1)
                hi = 0 if b == 0 else (1 << b) - 1
                histogram.append({"min_length": lo, "max_length": hi, "count": int(self.hist_count[b]),
                                  "aligned_bytes": int(self.hist_bytes[b])})
        largest = [{"address": f"{-a:#x}", "length": n, "size": s, "value": v}
                   for s, a, n, v in sorted(self._largest, reverse=True)]
        heaps: dict = {}
        gc_heaps: dict = {}
        for (gc_heap, code), (count, size) in sorted(self.places.items(), key=lambda kv: (kv[0][0] or 0, kv[0][1])):
            for table, key in ((heaps, HEAPS[code]), (gc_heaps, gc_heap)):
                entry = table.setdefault(key, {"count": 0, "aligned_bytes": 0})
                entry["count"] += count
                entry["aligned_bytes"] += size
        heaps = {name: heaps[name] for name in HEAPS if name in heaps}
        gc_heaps = [{"heap": k, **gc_heaps.get(k, {"count": 0, "aligned_bytes": 0})}
                    for k in range(self.gc_heap_count)] if self.gc_heap_count > 1 else []
        return StringStats(self.count, self.size, self.aligned, self.length, breakdown, histogram, largest, heaps,
                           gc_heaps)


# --- duplicates -------------------------------------------------------------------------------------


@dataclass
class Duplicate:
    value: str
    count: int
    aligned_size: int
    wasted_bytes: int
    length: int
    first_address: int = 0  #: the lowest address holding the value (to follow with !do or !gcroot)

    def as_dict(self) -> dict:
        return {"value": self.value, "count": self.count, "aligned_size": self.aligned_size,
                "wasted_bytes": self.wasted_bytes, "length": self.length,
                "first_address": f"{self.first_address:#x}"}


ENTRY = np.dtype([("hash", "<u8"), ("address", "<u8"), ("length", "<u4")])  # one string, 20 bytes
PART_BITS = 8  # entries that do not fit in memory go to 2**PART_BITS files, by these top bits of their hash
PARTS = 1 << PART_BITS
GAP = 4096  # strings read for confirmation further apart than this are read on their own


class DuplicateCollector:
    """Keeps (hash, length, address) per string, then groups equal values exactly.

    Beyond ``Limits.duplicate_memory`` bytes of entries, the entries go to temporary files, one for each
    256th of the hash range; at the end each file is grouped on its own (equal values have equal hashes, so
    they are in the same file).  So memory does not grow with the number of strings, only with what the
    result holds: one copy of each duplicated value."""

    def __init__(self, profile: Profile, space, budget: int | None = None):
        self.profile = profile
        self.space = space
        self._hashes: list = []
        self._lengths: list = []
        self._addresses: list = []
        self._kept = 0  # entries in memory
        if budget is None and space is not None:
            budget = space.limits.duplicate_memory
        self._budget = budget  # None: never to files (a step's part, merged into the main collector)
        self._files: str | None = None  # the directory of the entries written out

    def add(self, batch: StringBatch) -> None:
        if len(batch):
            self._hashes.append(batch.hashes())
            self._lengths.append(batch.lengths.astype(np.uint32))
            self._addresses.append(batch.addresses.astype(np.uint64))
            self._grown(len(batch))

    def merge(self, other: DuplicateCollector) -> None:
        """Add what another collector saw (another part of the heap)."""
        self._hashes += other._hashes
        self._lengths += other._lengths
        self._addresses += other._addresses
        self._grown(other._kept)

    def __getstate__(self) -> dict:  # to another process: the arrays, not the dump
        return {**self.__dict__, "space": None}

    def _grown(self, n: int) -> None:
        self._kept += n
        if self._budget is not None and self._kept * ENTRY.itemsize > self._budget:
            self._write_out()

    def _write_out(self) -> None:
        """The entries in memory, appended to their hash range's file."""
        import tempfile

        if not self._kept:
            return
        try:
            self._write_parts()
        except OSError as e:
            from ..errors import OutputError

            raise OutputError(f"cannot write the temporary files of the duplicates count in {tempfile.gettempdir()}: "
                              f"{e.strerror or e} (set TMPDIR, or keep more in memory with "
                              f"CLRLAYOUT_LIMITS=duplicate_memory=...)") from None

    def _write_parts(self) -> None:
        import os
        import tempfile

        if self._files is None:
            self._files = tempfile.mkdtemp(prefix="clrlayout-duplicates-")
        h = np.concatenate(self._hashes)
        part = (h >> np.uint64(64 - PART_BITS)).astype(np.intp)
        order = np.argsort(part, kind="stable")
        entries = np.empty(len(h), dtype=ENTRY)
        entries["hash"] = h[order]
        del h
        entries["address"] = np.concatenate(self._addresses)[order]
        entries["length"] = np.concatenate(self._lengths)[order]
        self._hashes, self._lengths, self._addresses, self._kept = [], [], [], 0
        bounds = np.searchsorted(part[order], np.arange(PARTS + 1))
        for p in np.flatnonzero(np.diff(bounds)).tolist():
            with open(os.path.join(self._files, str(p)), "ab") as f:
                entries[bounds[p] : bounds[p + 1]].tofile(f)

    def close(self) -> None:
        """Remove the files of entries written out, if any."""
        import shutil

        if self._files is not None:
            shutil.rmtree(self._files, ignore_errors=True)
            self._files = None

    def finish(self) -> tuple[list[Duplicate], int]:
        """All duplicated values sorted by waste (largest first), and the total waste."""
        import os

        found: list[Duplicate] = []
        if self._files is None:
            if self._hashes:
                found = self._groups(*self._members(self._hashes, self._lengths, self._addresses))
            self._hashes, self._lengths, self._addresses, self._kept = [], [], [], 0
        else:
            self._write_out()
            try:
                # each file's strings that share a hash, gathered over files (in hash order) until they
                # fill the memory budget, then grouped: their values are read in address order, at once
                # where they are close together
                members: list = []
                kept = 0
                for p in range(PARTS):
                    path = os.path.join(self._files, str(p))
                    if os.path.exists(path):
                        e = np.fromfile(path, dtype=ENTRY)
                        os.unlink(path)
                        members.append(self._members([e["hash"]], [e["length"]], [e["address"]]))
                        kept += len(members[-1][1])
                    if members and (kept * ENTRY.itemsize > self._budget or p == PARTS - 1):
                        found += self._groups(*(np.concatenate(m) for m in zip(*members)))
                        members, kept = [], 0
            finally:
                self.close()
        found.sort(key=lambda d: (-d.wasted_bytes, -d.count, d.value))
        return found, sum(d.wasted_bytes for d in found)

    @staticmethod
    def _members(hashes: list, lengths: list, addresses: list) -> tuple[np.ndarray, np.ndarray]:
        """The lengths and addresses of the strings whose hash another string shares.  The shared hashes
        come from one sorted copy of all the hashes; the members are then picked a part at a time, so
        that memory peaks at about 3 words a string."""
        sorted_h = np.concatenate(hashes)
        sorted_h.sort()  # in place: one copy of the hashes, not two
        shared = np.unique(sorted_h[1:][sorted_h[1:] == sorted_h[:-1]])
        del sorted_h
        member = np.concatenate([lookup(shared, p)[1] for p in hashes])
        return DuplicateCollector._picked(lengths, member), DuplicateCollector._picked(addresses, member)

    @staticmethod
    def _picked(parts: list, member: np.ndarray) -> np.ndarray:
        """The members' entries of arrays kept in parts (in the order of the hashes)."""
        picked, at = [], 0
        for part in parts:
            picked.append(part[member[at : at + len(part)]])
            at += len(part)
        return np.concatenate(picked) if picked else np.zeros(0, dtype=np.uint64)

    def _groups(self, n: np.ndarray, a: np.ndarray) -> list[Duplicate]:
        """The duplicated values among strings that share a hash with another, confirmed byte for byte:
        the strings are counted by value (equal values have equal hashes; a collision gives two values),
        holding one copy of each value."""
        counts: dict[bytes, list] = {}  # value -> [count, lowest address]
        for value, address in self._values(n, a):
            seen = counts.get(value)
            if seen is None:
                counts[value] = [1, address]
            else:
                seen[0] += 1
                seen[1] = min(seen[1], address)
        p = self.profile
        out = []
        for value, (count, first) in counts.items():
            if count > 1:
                length = len(value) // 2
                aligned = p.string_aligned_size(length, p.string_size(length) >= p.object.large_object_threshold)
                out.append(Duplicate(value.decode("utf-16-le", "surrogatepass"), count, aligned,
                                     (count - 1) * aligned, length, first))
        return out

    def _values(self, lengths: np.ndarray, addresses: np.ndarray):
        """(raw characters, address) of each of these strings, in address order: strings close together
        (less than GAP apart, within a window) are read at once, others on their own."""
        chars = self.profile.string.chars_offset
        window = self.space.limits.window
        by_address = np.argsort(addresses, kind="stable").tolist()
        starts = (addresses.astype(np.int64) + chars).tolist()
        sizes = (2 * lengths.astype(np.int64)).tolist()
        i = 0
        while i < len(by_address):
            first = starts[by_address[i]]
            end = first + sizes[by_address[i]]
            j = i + 1
            while j < len(by_address):
                k = by_address[j]
                if starts[k] > end + GAP or starts[k] + sizes[k] - first > window:
                    break
                end = max(end, starts[k] + sizes[k])
                j += 1
            data = self.space.read_available(first, end - first)  # stops at a hole (a trimmed dump)
            for k in by_address[i:j]:
                at, size = starts[k] - first, sizes[k]
                value = data[at : at + size] if at + size <= len(data) else self.space.read(first + at, size)
                yield value, starts[k] - chars
            i = j
