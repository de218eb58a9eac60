"""Address ranges ``(start, end)``: merging them, and what is left of some after taking others out."""

from __future__ import annotations

from collections.abc import Iterable, Iterator


def merged(ranges: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    """``ranges`` sorted, with the ones that overlap or touch made one (empty ones dropped)."""
    out: list[tuple[int, int]] = []
    for lo, hi in sorted(r for r in ranges if r[0] < r[1]):
        if out and lo <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], hi))
        else:
            out.append((lo, hi))
    return out


def without(runs: Iterable[tuple[int, int]], excluded: Iterable[tuple[int, int]]) -> Iterator[tuple[int, int]]:
    """The pieces of ``runs`` (sorted, not overlapping) that none of ``excluded`` covers, in order."""
    cut = merged(excluded)
    k = 0
    for start, end in runs:
        while k < len(cut) and cut[k][1] <= start:
            k += 1
        pos, j = start, k
        while pos < end:
            if j < len(cut) and cut[j][0] <= pos:
                pos = max(pos, cut[j][1])
                j += 1
                continue
            stop = min(end, cut[j][0]) if j < len(cut) else end
            yield pos, stop
            pos = stop
