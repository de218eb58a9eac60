"""glibc malloc's layouts (``formats/glibc-malloc.toml``): the constants of each architecture, and one layout per
range of glibc versions of ``malloc_state``, ``malloc_par``, ``heap_info`` and the tcache, laid out from their
members as the C compiler does for the architecture's word."""

from __future__ import annotations

import functools
from dataclasses import dataclass

from .. import formats

#: bytes of the profile's C types that are not the word
_FIXED = {"int": 4, "u16": 2, "char": 1}


@dataclass(frozen=True)
class MallocLayout:
    versions: str
    arch: str
    #: member -> offset, and "size" (malloc_state), "size" (malloc_par), "sizeof" (heap_info)
    arena: dict
    par: dict
    heap_info: dict
    tcache: dict
    safe_linking: bool
    chunk: dict

    @property
    def word(self) -> int:
        """SIZE_SZ: the bytes of a size and of a pointer."""
        return int(self.chunk["word"])

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
        return (self.tcache["size"] + self.word + c["alignment"] - 1) & ~(c["alignment"] - 1)


def _version(text: str) -> tuple[int, int]:
    major, minor = text.strip().split(".")[:2]
    return int(major), int(minor)


def lay_out(members: list[str], word: int, counts: dict[str, int]) -> tuple[dict[str, int], int]:
    """(member -> offset, size) of a C struct of ``members`` (``name:type`` or ``name:type*N``, N a number or a
    name in ``counts``): each member at a multiple of its type's size, the whole a multiple of the largest."""
    out, at, largest = {}, 0, 1
    for member in members:
        name, kind = member.split(":")
        kind, _, n = kind.partition("*")
        width = _FIXED.get(kind, word)
        count = (counts[n] if n in counts else int(n)) if n else 1
        at = (at + width - 1) // width * width
        out[name] = at
        at += width * count
        largest = max(largest, width)
    return out, (at + largest - 1) // largest * largest


def _arch_constants(data: dict, arch: str) -> dict:
    entry = data["arch"][arch]
    return _arch_constants(data, entry["same_as"]) if "same_as" in entry else entry


@functools.lru_cache(maxsize=8)
def layouts(arch: str = "x64") -> tuple[MallocLayout, ...]:
    """Every layout of the profile for an architecture (``x64``, ``arm64``, ``x86``), newest first."""
    data = formats.load("glibc-malloc")
    chunk = _arch_constants(data, arch)
    word, align = chunk["word"], chunk["alignment"]
    found = []
    for e in data["layouts"]:
        arena, size = lay_out(e["malloc_state"], word, {"NFASTBINS": chunk["nfastbins"]})
        arena["size"] = size
        par, size = lay_out(e["malloc_par"], word, {})
        par["size"] = size
        heap_info, size = lay_out(e["heap_info"], word, {})
        heap_info["sizeof"] = (size + 2 * word + align - 1) // align * align - 2 * word  # its pad
        counts = "u16" if e["tcache_counts"] == "u16" else "char"
        tc, size = lay_out([f"counts:{counts}*TCACHE_MAX_BINS", "entries:ptr*TCACHE_MAX_BINS"], word,
                           {"TCACHE_MAX_BINS": chunk["tcache_bins"]})
        tcache = {**tc, "count_size": _FIXED[counts], "size": size}
        found.append(MallocLayout(e["versions"], arch, arena, par, heap_info, tcache, bool(e.get("safe_linking")),
                                  chunk))
    return tuple(sorted(found, key=lambda m: m.lowest, reverse=True))


def for_version(version: tuple[int, int] | None, arch: str = "x64") -> MallocLayout | None:
    """The layout of a glibc version, None when the profile has none for it (older than 2.26: no tcache)."""
    if version is None:
        return None
    for m in layouts(arch):
        if m.covers(version):
            return m
    if version > layouts(arch)[0].highest:  # a newer glibc than the profile knows: its newest, said so by the caller
        return layouts(arch)[0]
    return None
