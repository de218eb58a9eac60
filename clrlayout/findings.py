"""Heap anomalies are recorded as findings, not raised: a scan reports them and resynchronises.

Kinds follow ClrMD's ObjectCorruptionKind ranges: 0-99 placement and object shape, 200+ unreadable.
"""

from __future__ import annotations

import enum
from collections import Counter
from dataclasses import dataclass, field


class FindingKind(enum.IntEnum):
    OBJECT_PAST_SEGMENT_END = 2
    BAD_METHOD_TABLE = 10
    OBJECT_TOO_SMALL = 11
    STRING_NOT_TERMINATED = 20
    STRING_BAD_HEADER_PADDING = 21
    STRING_TOO_LONG = 22
    #: glibc's malloc (clrlayout.native): a chunk header that cannot be, a free list that breaks or loops, a
    #: safe-linked pointer that does not decode, figures of the allocator that its chunks do not add up to
    NATIVE_BAD_CHUNK = 30
    NATIVE_BAD_LIST = 31
    NATIVE_MISMATCH = 32
    MEMORY_MISSING = 200
    SEGMENT_UNREADABLE = 201
    METHOD_TABLE_MISSING = 202

    @property
    def slug(self) -> str:
        return self.name.lower().replace("_", "-")

    @property
    def missing_memory(self) -> bool:
        """Memory the dump does not hold (200+), as opposed to an anomaly of the heap itself."""
        return self >= 200


@dataclass(frozen=True)
class Finding:
    kind: FindingKind
    address: int
    detail: str

    def __str__(self) -> str:
        return f"{self.kind.slug} at {self.address:#x}: {self.detail}"

    def as_dict(self) -> dict:
        return {"kind": self.kind.slug, "address": f"{self.address:#x}", "detail": self.detail}


@dataclass
class Findings:
    """Findings of one scan; at most ``limit`` are kept, all are counted."""

    limit: int = 1000
    items: list = field(default_factory=list)
    count: int = 0
    #: every finding counted by kind, the ones not kept too
    kinds: Counter = field(default_factory=Counter)

    def add(self, kind: FindingKind, address: int, detail: str) -> None:
        self.count += 1
        self.kinds[kind] += 1
        if len(self.items) < self.limit:
            self.items.append(Finding(kind, address, detail))

    @property
    def anomalies(self) -> int:
        """Findings of the heap itself (not of memory the dump lacks)."""
        return sum(n for k, n in self.kinds.items() if not k.missing_memory)

    @property
    def missing(self) -> int:
        """Findings of memory the dump does not hold."""
        return self.count - self.anomalies

    def __len__(self) -> int:
        """The findings kept (what iterating gives); :attr:`count` is how many there were."""
        return len(self.items)

    def __iter__(self):
        return iter(self.items)
