"""From a reference's value to its object's node: a search by page (the pages that hold objects, small
enough to stay in the cache, then that page's objects), compiled, in two threads for millions of values."""

from __future__ import annotations

import os

import numpy as np

from .compiled import jit

#: the granule of the index (a page: an object starts in the page its address is in, so only that page's
#: objects are searched)
_PAGE_SHIFT = 12
#: values looked up by this many threads (the compiled loop lets go of the GIL), from this many on
_THREADS = max(1, min(2, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1))
_THREADED = 1 << 20


class PageIndex:
    """The pages of ``addresses`` (sorted object starts) that hold objects, with each one's first object: made
    once for a graph, without an array as long as the nodes besides its own."""

    def __init__(self, addresses: np.ndarray):
        self.addresses = addresses
        shift = np.uint64(_PAGE_SHIFT)
        count = jit(_count_pages, len(addresses))(addresses, shift) if len(addresses) else 0
        self.pages = np.empty(count, dtype=np.uint64)
        self.bounds = np.empty(count + 1, dtype=np.int64)
        if count:
            jit(_fill_pages, len(addresses))(addresses, shift, self.pages, self.bounds)

    def nodes(self, values: np.ndarray, itype=np.int64, out: np.ndarray | None = None) -> np.ndarray:
        """The node of the object that starts at each of ``values`` (-1: none does), of type ``itype``
        (into ``out`` when given); in threads when they are many."""
        out = np.empty(len(values), dtype=itype) if out is None else out
        if not len(self.pages):
            out[:] = -1
            return out
        kernel, shift = jit(_nodes_of, len(self.addresses) + len(values)), np.uint64(_PAGE_SHIFT)
        parts = _THREADS if len(values) >= _THREADED else 1
        if parts == 1:
            kernel(self.addresses, self.pages, self.bounds, values, shift, out)
            return out
        from concurrent.futures import ThreadPoolExecutor

        cut = np.linspace(0, len(values), parts + 1).astype(np.int64)
        with ThreadPoolExecutor(parts) as pool:  # the compiled loop lets go of the GIL: the parts run at once
            list(pool.map(lambda k: kernel(self.addresses, self.pages, self.bounds, values[cut[k] : cut[k + 1]],
                                           shift, out[cut[k] : cut[k + 1]]), range(parts)))
        return out


def nodes_of(addresses: np.ndarray, values: np.ndarray, itype=np.int64) -> np.ndarray:
    """The node of the object that starts at each of ``values`` (-1: none does): :class:`PageIndex` made once."""
    return PageIndex(addresses).nodes(values, itype)


def _count_pages(addresses, shift):  # pragma: no cover - also compiled
    count = 1
    for i in range(1, len(addresses)):
        if (addresses[i] >> shift) != (addresses[i - 1] >> shift):
            count += 1
    return count


def _fill_pages(addresses, shift, pages, bounds):  # pragma: no cover - also compiled
    k = 0
    pages[0] = addresses[0] >> shift
    bounds[0] = 0
    for i in range(1, len(addresses)):
        page = addresses[i] >> shift
        if page != pages[k]:
            k += 1
            pages[k] = page
            bounds[k] = i
    bounds[k + 1] = len(addresses)


def _nodes_of(addresses, pages, bounds, values, shift, out):  # pragma: no cover - also compiled
    for i in range(len(values)):
        v = values[i]
        page = v >> shift
        lo, hi = 0, len(pages)
        while lo < hi:  # the first page at or after v's
            mid = (lo + hi) >> 1
            if pages[mid] < page:
                lo = mid + 1
            else:
                hi = mid
        out[i] = -1
        if lo == len(pages) or pages[lo] != page:
            continue
        a, b = bounds[lo], bounds[lo + 1]
        while a < b:  # the first of the page's objects at or after v
            mid = (a + b) >> 1
            if addresses[mid] < v:
                a = mid + 1
            else:
                b = mid
        if a < bounds[lo + 1] and addresses[a] == v:
            out[i] = a
