"""The dumps a fleet run reads: files, directories (walked recursively) and globs, each turned into one
:class:`Input` — a file to analyse, or an input that is an error by itself (a path that does not exist, a
directory or glob without a dump), so that every input given has its row in the ``dumps`` table."""

from __future__ import annotations

import glob
import os
import stat
from dataclasses import dataclass

#: a directory's files taken as dumps whatever their first bytes: a truncated or damaged dump among them is
#: an error row, not a file left out
DUMP_SUFFIXES = (".dmp", ".mdmp", ".core")
DUMP_PREFIXES = ("core.", "coredump.")
ELF_CORE = 4  # e_type


@dataclass(frozen=True)
class Input:
    path: str  # absolute
    error_code: str | None = None  # the input is an error by itself: no such file, no dump in a directory
    error: str | None = None


def looks_like_dump(path: str) -> bool:
    """A directory's file is read when it starts as a minidump (``MDMP``) or an ELF core does, or is named
    as dumps are (``*.dmp``, ``*.mdmp``, ``*.core``, ``core.*``, ``coredump.*``).  Only regular files are
    opened (a FIFO or device among them would block the walk)."""
    name = os.path.basename(path).lower()
    if name.endswith(DUMP_SUFFIXES) or name.startswith(DUMP_PREFIXES):
        return True
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return False
        with open(path, "rb") as f:
            head = f.read(18)
    except OSError:
        return False
    if head[:4] == b"MDMP":
        return True
    return head[:4] == b"\x7fELF" and len(head) == 18 and \
        int.from_bytes(head[16:18], "little" if head[5] == 1 else "big") == ELF_CORE


def _walk(directory: str) -> list[str]:
    found = []
    for root, dirs, files in os.walk(directory, onerror=None, followlinks=False):
        dirs.sort()
        found += [os.path.join(root, f) for f in sorted(files) if looks_like_dump(os.path.join(root, f))]
    return found


def expand(items) -> list[Input]:
    """The inputs of ``items`` (paths, directories, globs), each file once, in the order given (a
    directory's and a glob's files sorted).  A file named is read whatever it holds (it gets a row, an error
    row if it is not a dump); a directory's files only if they look like dumps (:func:`looks_like_dump`)."""
    seen: set = set()
    out: list[Input] = []

    def add(entry: Input) -> None:
        if entry.path not in seen:
            seen.add(entry.path)
            out.append(entry)

    for item in items:
        item = os.fspath(item)
        absolute = os.path.abspath(item)
        if os.path.isdir(item):
            files = _walk(item)
            if not files:
                add(Input(absolute, "no-dumps", f"{item}: a directory without dumps (no file in it starts as a "
                                                "minidump or an ELF core, or is named as one)"))
            for f in files:
                add(Input(os.path.abspath(f)))
        elif os.path.lexists(item):
            add(Input(absolute))
        elif glob.has_magic(item):
            matches = sorted(glob.glob(item, recursive=True))
            if not matches:
                add(Input(absolute, "no-dumps", f"{item}: no file matches this pattern"))
            for m in matches:
                for f in (_walk(m) if os.path.isdir(m) else [m]):
                    add(Input(os.path.abspath(f)))
        else:
            add(Input(absolute, "no-such-file", f"{item}: no such file or directory"))
    return out
