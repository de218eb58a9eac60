"""Address ranges a trimmed dump keeps: merged, clipped to what the dump holds, copied out in bounded
chunks (shared by the ELF and minidump writers)."""

from __future__ import annotations

PAGE = 4096


def merge(ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[list[int]] = []
    for lo, hi in sorted(ranges):
        if out and lo <= out[-1][1]:
            out[-1][1] = max(out[-1][1], hi)
        else:
            out.append([lo, hi])
    return [(lo, hi) for lo, hi in out]


def pages(ranges) -> list[tuple[int, int]]:
    """``ranges`` rounded out to whole pages, merged."""
    return merge([(lo - lo % PAGE, hi + (-hi) % PAGE) for lo, hi in ranges])


def clip(ranges, space) -> list[tuple[int, int, int]]:
    """(start, size, file offset) pieces of ``ranges`` that are in the dump."""
    pieces = []
    for lo, hi in ranges:
        for r in space.iter_regions():
            a, b = max(lo, r.start), min(hi, r.end)
            if a < b:
                pieces.append((a, b - a, r.offset + (a - r.start)))
    return pieces


def copy_range(dump, f, start: int, size: int, keep=None) -> None:
    """Copy target memory [start, start+size) from the dump into ``f`` in bounded chunks; with ``keep`` (a
    :class:`~clrlayout.session.redactplan.Keep`), every byte it does not keep written as zero."""
    pos = start
    end = start + size
    while pos < end:
        n = min(end - pos, 8 * 1024 * 1024)
        data = dump.memory.read(pos, n)
        f.write(data if keep is None else keep.apply(pos, data))
        pos += n
