"""The model's door for ``clrlayout trim``: what a smaller (or redacted) copy of a dump keeps, the copy written in
the dump's own format, and what a written copy holds when read back.  The reading is the engine's
(session/copies.py, session/redactplan.py), the writing the readers' own formats' (dump/elfwrite.py,
dump/miniwrite.py)."""

from __future__ import annotations

from typing import IO, Any

from ..limits import Limits


def truncation(path: str, limits: Limits) -> str | None:
    """Why the dump at ``path`` is cut short (None: it is whole)."""
    from ..dump import open_dump

    with open_dump(path, limits) as dump:
        why: str | None = dump.truncation()
        return why


def kept_memory(path: str, method_table: int | None, profile: str | None, limits: Limits, max_strings: int | None,
                types: bool, redaction: dict[str, Any] | None) -> tuple[list[tuple[int, int]], int, Any, Any]:
    """What a copy keeps: page-rounded ``(start, end)`` ranges of memory, the strings found, and with
    ``redaction`` (``keep_type_names``, ``keep_stacks``) the intervals kept as they are and the report of what is
    zeroed (:class:`~clrlayout.session.redactplan.RedactReport`); see :func:`clrlayout.session.copies.needed_ranges`.
    """
    from ..session.copies import needed_ranges

    ranges, count, keep, report = needed_ranges(path, method_table, profile, limits, max_strings, types, redaction)
    return list(ranges), count, keep, report


def whole_pages(ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """``ranges`` rounded out to whole pages, merged."""
    from ..dump.copying import pages

    return pages(ranges)


def write_copy(path: str, limits: Limits, ranges: list[tuple[int, int]], f: IO[bytes], comment: str, keep: Any,
               keep_stacks: bool, mark: dict[str, Any] | None) -> tuple[int, int]:
    """Write to ``f`` a copy of the dump at ``path`` in its format, holding ``ranges`` of its memory (with ``keep``,
    every byte it does not keep zeroed) and every stream or note that describes the process.

    Returns:
        The bytes of memory kept, and the bytes of memory the original holds.
    """
    from ..dump import open_dump

    with open_dump(path, limits) as dump:
        if dump.format == "minidump":
            from ..dump.miniwrite import write_minidump as writer
        else:
            from ..dump.elfwrite import write_elf_core as writer
        kept: int = writer(dump, ranges, f, comment=comment, keep=keep, keep_stacks=keep_stacks, mark=mark)
        total: int = dump.memory.total_bytes
        return kept, total


def what_it_holds(path: str, method_table: int | None, profile: str | None, limits: Limits) -> tuple[int, int, int]:
    """(memory ranges, strings, places with missing memory) of a written copy, as ``info`` and ``dump`` see it."""
    from ..session.copies import what_it_holds as held

    return held(path, method_table, profile, limits)
