"""Keep freed memory for reuse instead of giving it back to the kernel at once.

A heap walk makes and drops big buffers at every window: numpy temporaries of megabytes and a window's
output of tens of megabytes.  By default glibc maps each buffer of over 128 KB on its own and unmaps it when
it is freed, so the next window's buffers are fresh pages that the kernel must fault in and zero: on the
benchmark dump that was a third of the time of `stats`.  With these settings glibc serves them from its
heap and reuses them.  Peak memory does not grow: what is kept is what the walk had in use at its peak.
"""

from __future__ import annotations

import ctypes
import sys

_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 32 << 20  # glibc's upper limit for this setting on 64-bit systems
TRIM_THRESHOLD = 256 << 20  # freed memory at the top of the heap beyond this goes back to the kernel


def reuse_freed_memory() -> bool:
    """Tune glibc's malloc (Linux only; elsewhere nothing happens).  Returns whether it took."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):  # not glibc (musl has no mallopt)
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    return bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD))


_trim = None


def release_freed() -> None:
    """Return every free page of the C heap to the kernel (glibc's ``malloc_trim(0)``; elsewhere nothing), at
    the end of a phase that freed much and before one that allocates more: what :func:`reuse_freed_memory`
    keeps for the next window is not wanted by the object graph's next phase (measured on the 10.6 M-object
    graph dump of bench/README.md: `retained`'s peak 2.36 GB -> 1.90 GB)."""
    global _trim
    if _trim is None:
        _trim = False
        if sys.platform.startswith("linux"):
            try:
                _trim = ctypes.CDLL(None).malloc_trim
                _trim.argtypes, _trim.restype = [ctypes.c_size_t], ctypes.c_int
            except (OSError, AttributeError):  # not glibc (musl has no malloc_trim)
                _trim = False
    if _trim:
        _trim(0)
