"""The mark a redacted dump carries in itself (``trim --redact``): what was removed, so that every command that
would read a removed part can say so instead of answering from zeros.  A minidump carries it as its comment
stream (CommentStreamA), an ELF core as a note of its own (name ``CLRLAYOUT``); both hold the same JSON object:
``{"redacted_by": "clrlayout X.Y", "stacks": "removed" | "kept", "removed": [what, ...]}``."""

from __future__ import annotations

import json

#: a minidump comment that starts with this is the mark; an ELF note of this name and type is
COMMENT_PREFIX = "clrlayout-redacted "
NOTE_NAME = b"CLRLAYOUT"
NOTE_TYPE = 0x52454441  # "REDA"
#: the longest mark read
MAX_MARK = 64 * 1024


def encode(mark: dict) -> bytes:
    return json.dumps(mark, sort_keys=True).encode("ascii")


def decode(data: bytes) -> dict | None:
    """The mark in ``data`` (JSON), or None when it is not one."""
    if len(data) > MAX_MARK:
        return None
    try:
        mark = json.loads(data.rstrip(b"\0").decode("ascii"))
    except (UnicodeDecodeError, ValueError):
        return None
    return mark if isinstance(mark, dict) and isinstance(mark.get("redacted_by"), str) else None


def from_comment(text: bytes) -> dict | None:
    prefix = COMMENT_PREFIX.encode("ascii")
    return decode(text[len(prefix):]) if text.startswith(prefix) else None


def elf_note(mark: dict, little: bool = True) -> bytes:
    """The note (namesz, descsz, type, name, desc, each padded to 4 bytes) that marks an ELF core."""
    order = "little" if little else "big"
    name, desc = NOTE_NAME + b"\0", encode(mark)
    pad = lambda b: b + bytes(-len(b) % 4)
    return (len(name).to_bytes(4, order) + len(desc).to_bytes(4, order) + NOTE_TYPE.to_bytes(4, order)
            + pad(name) + pad(desc))


def describe(mark: dict) -> str:
    """One line: who redacted the dump and what it lacks."""
    stacks = "its thread stacks kept" if mark.get("stacks") == "kept" else "its thread stacks removed"
    return (f"redacted by {mark['redacted_by']} (trim with redact=True): string characters, primitive values, native "
            f"memory and the code's literals zeroed, {stacks}")
