"""The data files of ``formats/``: where they are, and each one read once and checked against its schema.

Every module that needs a layout, a GC interface, the type system's records, the contract descriptor or the
loader heaps' records asks :func:`load`; nothing else parses TOML.  A file says what it is in its
``[profile]`` table: ``kind`` (``gc-interface``, ``type-system``, ``contract-descriptor``,
``runtime-bookkeeping``), or none for a layout profile (a flavor and an architecture, or ``abstract``).
Each kind has a schema below: the sections a file of that kind may hold, the type of each, and the keys
every entry of an array of tables must have.  A file that does not match is an :class:`InvalidProfile`
naming the file and the key, before any value of it is used.  The profiles' own values (offsets, sizes,
masks) are then checked key by key by :mod:`clrlayout.runtime.profiles`.
"""

from __future__ import annotations

import copy
import functools
import os
import re
from pathlib import Path

try:  # Python 3.11+
    import tomllib
except ModuleNotFoundError:  # pragma: no cover - Python 3.10
    import tomli as tomllib

from .errors import InvalidProfile

TABLE, TABLES, TEXT, TEXTS, INT, ANY = "table", "array of tables", "string", "array of strings", "integer", "any"

#: the ``[profile]`` table of every file
PROFILE = {"name": TEXT, "sources": TEXTS, "kind": TEXT, "abstract": bool, "flavor": TEXT, "arch": TEXT,
           "baseline": TEXTS, "pointer_size": INT, "versions": TEXT, "endian": TEXT, "verified": TEXT}
REQUIRED_PROFILE = ("name", "sources")

#: kind -> {section: its type, or (TABLES, the keys each entry must have)}
SCHEMAS: dict[str, dict] = {
    "profile": {"object": TABLE, "header": TABLE, "string": TABLE, "method_table": TABLE, "type_desc": TABLE,
                "sources": TABLE, "overrides": (TABLES, ("versions",))},
    "gc-interface": {"layouts": (TABLES, ("major", "fields", "generations")), "heap_segment": TABLE,
                     "generation": TABLE, "gc_heap": TABLE, "card_table_info": TABLE, "handle_tables": TABLE},
    "type-system": {"eeclass": (TABLES, ("versions", "arch", "os")), "field_desc": (TABLES, ("pointer_size", "size")),
                    "element_types": TABLE, "field_bits": TABLE, "lookup_map": TABLE,
                    "method_desc": (TABLES, ("versions", "pointer_size", "chunk_size", "remainder_bits"))},
    "contract-descriptor": {"descriptor": TABLE, "method_tables": TABLE, "checks": (TABLES, ("descriptor",))},
    "runtime-bookkeeping": {"block": TABLE, "allocator": TABLE},
    "allocator": {"arch": TABLE, "layouts": (TABLES, ("versions", "malloc_state", "malloc_par", "heap_info",
                                                       "tcache_counts"))},
    "thread-state": {"flags": TABLE, "layouts": (TABLES, ("versions", "Thread", "ThreadStore"))},
    "stack-walk": {"layouts": (TABLES, ("versions", "source"))},
}


def formats_dir() -> Path:
    """``$CLRLAYOUT_FORMATS``, else the copy packaged in the wheel, else the repository's ``formats/``."""
    env = os.environ.get("CLRLAYOUT_FORMATS")
    if env:
        return Path(env)
    here = Path(__file__).resolve().parent  # the clrlayout package
    packaged = here / "_formats"
    if packaged.is_dir():
        return packaged
    return here.parent / "formats"


def path_of(name: str, directory: str | Path | None = None) -> Path:
    """The file of ``name`` (``gc-dac-vars``, ``coreclr-x64``, ...) in ``directory`` or :func:`formats_dir`."""
    return Path(directory or formats_dir()) / f"{name}.toml"


def load(name: str | Path, directory: str | Path | None = None) -> dict:
    """A formats file (by name, or a path ending in ``.toml``), parsed and checked once per process while it
    stays the same file; a copy, which the caller may change."""
    path = Path(name) if str(name).endswith(".toml") else path_of(str(name), directory)
    try:
        st = os.stat(path)
    except OSError:
        raise InvalidProfile(str(path), "-", "file not found") from None
    return copy.deepcopy(_checked(os.fspath(path), st.st_mtime_ns, st.st_size))


def profile_table(path: Path) -> dict:
    """The ``[profile]`` table of a file, parsed alone when it stands first (listing the profiles does not need
    the whole of type-system.toml), else from the whole file."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return load(path).get("profile", {})
    m = re.match(r"(?:\s*#[^\n]*\n|\s*\n)*\[profile\][ \t]*\n(.*?)(?=^\[|\Z)", text, flags=re.S | re.M)
    if m is not None:
        try:
            table = tomllib.loads(m.group(1))
            _check_profile(str(path), table)
            return table
        except tomllib.TOMLDecodeError:
            pass
    return load(path).get("profile", {})


def kind_of(profile: dict) -> str:
    """What a file is, from its ``[profile]`` table."""
    return profile.get("kind", "profile")


@functools.lru_cache(maxsize=64)
def _checked(path: str, mtime_ns: int, size: int) -> dict:
    try:
        with open(path, "rb") as f:
            data = tomllib.load(f)
    except OSError as e:
        raise InvalidProfile(path, "-", f"cannot be read ({e.strerror})") from None
    except tomllib.TOMLDecodeError as e:
        raise InvalidProfile(path, "-", f"not valid TOML: {e}") from None
    check(path, data)
    return data


def check(path: str, data: dict) -> None:
    """``data`` (a parsed file) against its kind's schema; :class:`InvalidProfile` on the first mismatch."""
    profile = data.get("profile")
    if not isinstance(profile, dict):
        raise InvalidProfile(path, "profile", "every formats file starts with a [profile] table")
    _check_profile(path, profile)
    kind = kind_of(profile)
    schema = SCHEMAS.get(kind)
    if schema is None:
        raise InvalidProfile(path, "profile.kind", f"unknown kind {kind!r} (kinds: {', '.join(SCHEMAS)})")
    for key, value in data.items():
        if key == "profile":
            continue
        if key not in schema:
            raise InvalidProfile(path, key, f"unknown section for a file of kind {kind}")
        expected = schema[key]
        required: tuple = ()
        if isinstance(expected, tuple):
            expected, required = expected
        if not _is(value, expected):
            raise InvalidProfile(path, key, f"must be a {expected}")
        for i, entry in enumerate(value if expected == TABLES else ()):
            for need in required:
                if need not in entry:
                    raise InvalidProfile(path, f"{key}[{i}]", f"an entry needs `{need}`")


def _check_profile(path: str, profile: dict) -> None:
    for key, value in profile.items():
        if key not in PROFILE:
            raise InvalidProfile(path, f"profile.{key}", "unknown key")
        if not _is(value, PROFILE[key]):
            raise InvalidProfile(path, f"profile.{key}",
                                 f"must be a {PROFILE[key] if isinstance(PROFILE[key], str) else 'boolean'}")
    for key in REQUIRED_PROFILE:
        if key not in profile:
            raise InvalidProfile(path, f"profile.{key}", "missing")


def _is(value, expected) -> bool:
    if expected is bool:
        return isinstance(value, bool)
    if expected == TABLE:
        return isinstance(value, dict)
    if expected == TABLES:
        return isinstance(value, list) and all(isinstance(v, dict) for v in value)
    if expected == TEXT:
        return isinstance(value, str)
    if expected == TEXTS:
        return isinstance(value, list) and all(isinstance(v, str) for v in value)
    if expected == INT:
        return isinstance(value, int) and not isinstance(value, bool)
    return True
