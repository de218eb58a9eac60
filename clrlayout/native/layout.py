"""glibc malloc's layouts (``formats/glibc-malloc.toml``): the chunk constants, and one layout per range of glibc
versions of ``malloc_state``, ``malloc_par``, ``heap_info`` and the tcache."""

from __future__ import annotations

import functools
from dataclasses import dataclass

from .. import formats


@dataclass(frozen=True)
class MallocLayout:
    versions: str
    arena: dict
    par: dict
    heap_info: dict
    tcache: dict
    safe_linking: bool
    chunk: dict

    @property
    def lowest(self) -> tuple[int, int]:
        return _version(self.versions.split("-")[0])

    @property
    def highest(self) -> tuple[int, int]:
        return _version(self.versions.split("-")[-1])

    def covers(self, version: tuple[int, int]) -> bool:
        return self.lowest <= version <= self.highest

    @property
    def tcache_chunk_size(self) -> int:
        """The chunk a thread's ``tcache_perthread_struct`` takes (its size rounded up as request2size does)."""
        c = self.chunk
        return (self.tcache["size"] + 8 + c["alignment"] - 1) & ~(c["alignment"] - 1)


def _version(text: str) -> tuple[int, int]:
    major, minor = text.strip().split(".")[:2]
    return int(major), int(minor)


@functools.lru_cache(maxsize=1)
def layouts() -> tuple[MallocLayout, ...]:
    """Every layout of the profile, newest first."""
    data = formats.load("glibc-malloc")
    chunk = data["chunk"]
    found = [MallocLayout(e["versions"], e["arena"], e["par"], e["heap_info"], e["tcache"],
                          bool(e.get("safe_linking")), chunk) for e in data["layouts"]]
    return tuple(sorted(found, key=lambda m: m.lowest, reverse=True))


def for_version(version: tuple[int, int] | None) -> MallocLayout | None:
    """The layout of a glibc version, None when the profile has none for it (older than 2.26: no tcache)."""
    if version is None:
        return None
    for m in layouts():
        if m.covers(version):
            return m
    if version > layouts()[0].highest:  # a newer glibc than the profile knows: its newest layout, said so by the caller
        return layouts()[0]
    return None
