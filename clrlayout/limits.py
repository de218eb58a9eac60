"""Limits on everything a dump controls, checked before any allocation or loop that depends on it.

A dump is untrusted input: counts, sizes and lengths read from it are compared with these values first
(rust-minidump's lesson: a 33-byte file once asked for 45 GB).  ``Limits`` is frozen; a user with a reason
can pass another instance (``dataclasses.replace(DEFAULT_LIMITS, ...)``).
"""

from __future__ import annotations

from dataclasses import dataclass

from .errors import LimitExceeded

KiB = 1024
MiB = 1024 * KiB
GiB = 1024 * MiB


@dataclass(frozen=True)
class Limits:
    #: minidump directory entries
    max_streams: int = 10_000
    #: memory ranges in MemoryList / Memory64List, PT_LOAD segments in an ELF core
    max_memory_ranges: int = 2_000_000
    #: ELF program headers
    max_program_headers: int = 2_000_000
    #: modules in a ModuleList or files in an NT_FILE note
    max_modules: int = 100_000
    #: threads in a ThreadList
    max_threads: int = 100_000
    #: bytes of one non-memory stream or note segment that is parsed
    max_stream_bytes: int = 64 * MiB
    #: characters of a module name
    max_name_chars: int = 32 * KiB
    #: one read from the address space (a string longer than this is a finding, not read)
    max_read: int = 256 * MiB
    #: System.String length (the CLR caps strings at 0x3FFFFFDF characters)
    max_string_length: int = 0x3FFFFFDF
    #: GC heap segments followed through their `next` links
    max_segments: int = 1_000_000
    #: window of target memory scanned at once (bounds memory use of the scanners; small enough that a
    #: window and its temporaries stay in the CPU cache while it is worked on, with two processes)
    scan_window: int = 4 * MiB
    #: findings kept in a report (more are counted, not stored)
    max_findings: int = 1_000
    #: distinct MethodTables validated during one heap walk
    max_method_tables: int = 1_000_000
    #: words of native memory that look like a loader heap's block record, kept while `memory` looks for them
    max_loader_heap_records: int = 1_000_000
    #: notes parsed in one ELF note segment
    max_notes: int = 100_000
    #: bytes of per-string entries (hash, length, address: 20 bytes a string) `stats --duplicates` keeps in
    #: memory; beyond this they go to temporary files, so memory does not grow with the number of strings
    duplicate_memory: int = 32 * MiB
    #: bytes of a dump read from a pipe, standard input or a compressed file, copied to a temporary file
    max_spool: int = 64 * GiB

    @property
    def window(self) -> int:
        """The bytes a scan reads at once: scan_window, within max_read, in whole pages (the heap walk's
        windows have fixed bounds at multiples of it)."""
        w = min(self.scan_window, self.max_read - 4096)
        return max(4096, w - w % 4096)

    def check(self, what: str, value: int, limit_name: str, path: str | None = None) -> int:
        limit = getattr(self, limit_name)
        if value < 0 or value > limit:
            raise LimitExceeded(what, value, limit, path)
        return value


DEFAULT_LIMITS = Limits()

#: characters of a referenced string shown in a reference's value
REFERENCED_CHARS = 40


def limits_from_env(text: str | None = None) -> Limits:
    """DEFAULT_LIMITS with overrides from ``CLRLAYOUT_LIMITS`` (``name=value,name=value``; values may
    end in K, M or G), for users with a reason (a dump with more ranges, a machine with less memory)."""
    import os
    from dataclasses import fields, replace

    from .errors import ConfigError

    text = os.environ.get("CLRLAYOUT_LIMITS", "") if text is None else text
    if not text.strip():
        return DEFAULT_LIMITS
    known = {f.name for f in fields(Limits)}
    changes = {}
    for item in text.split(","):
        name, _, value = item.strip().partition("=")
        if name not in known:
            raise ConfigError(f"CLRLAYOUT_LIMITS: unknown limit {name!r} (known: {', '.join(sorted(known))})")
        mult = {"K": KiB, "M": MiB, "G": GiB}.get(value[-1:].upper(), 1)
        try:
            number = int(value[:-1] if mult > 1 else value) * mult
        except ValueError:
            raise ConfigError(f"CLRLAYOUT_LIMITS: {name}={value!r} is not a number") from None
        if number <= 0:
            raise ConfigError(f"CLRLAYOUT_LIMITS: {name} must be positive")
        changes[name] = number
    return replace(DEFAULT_LIMITS, **changes)
