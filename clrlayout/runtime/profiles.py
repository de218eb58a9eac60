"""Runtime layout profiles: the data files in ``formats/`` turned into frozen, validated values.

A profile file names a flavor and an architecture, lists ``baseline`` files merged under it, and carries
``[[overrides]]`` for ranges of runtime versions where the layout changed.  ``load_profile`` merges the
baselines, applies the overrides that match a runtime version, checks every key and value, and returns a
:class:`Profile`.  Nothing here knows a layout: it is all in the data.
"""

from __future__ import annotations

import copy
import functools
import re
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import InvalidProfile, NoMatchingProfile, UsageError
from ..formats import formats_dir, profile_table
from ..formats import load as load_format

# --- versions ---------------------------------------------------------------------------------------

_VERSION = re.compile(r"^\s*v?(\d+)(?:\.(\d+))?(?:\.(\d+))?(?:\.(\d+))?")
_CLAUSE = re.compile(r"^\s*(>=|<=|==|>|<)\s*([\d.]+)\s*$")


def parse_version(text: str | None) -> tuple[int, ...] | None:
    """``"3.1.23"`` -> (3, 1, 23); ``"2.0.0-preview3-25510-01"`` -> (2, 0, 0); None when not a version."""
    if not text:
        return None
    m = _VERSION.match(text)
    if not m:
        return None
    return tuple(int(g) for g in m.groups() if g is not None)


def _pad(v: tuple[int, ...], n: int = 4) -> tuple[int, ...]:
    return tuple(v) + (0,) * (n - len(v))


def version_matches(spec: str, version: tuple[int, ...]) -> bool:
    """``spec`` is a comma-separated list of comparisons, e.g. ``">=3.0,<5"``."""
    v = _pad(version)
    for clause in spec.split(","):
        m = _CLAUSE.match(clause)
        if not m:
            raise ValueError(f"bad version clause {clause!r}")
        op, bound = m.group(1), _pad(parse_version(m.group(2)))
        ok = {">=": v >= bound, "<=": v <= bound, "==": v == bound, ">": v > bound, "<": v < bound}[op]
        if not ok:
            return False
    return True


# --- the profile value ------------------------------------------------------------------------------

#: a field's type -> its size (None: the pointer size).  "relative_pointer" is a self-relative pointer
#: (``RelativePointer<T>`` of runtimes built with FEATURE_PREJIT): the target is the field's own address plus
#: the stored value, 0 is null.
FIELD_TYPES = {"uint8": 1, "uint16": 2, "uint32": 4, "uint64": 8, "int32": 4, "pointer": None,
               "relative_pointer": None}

# every key a profile may hold, per section, with its type
SCHEMA = {
    "object": {"header_size": int, "sync_block_offset": int, "method_table_offset": int, "alignment": int,
               "large_object_alignment": int, "min_object_size": int, "method_table_unmask": int,
               "sync_pointer_offset": int, "large_object_threshold": int},
    "method_table": {"size": int, "fields": dict, "flags": dict, "union": dict, "relative_slots": int},
    "string": {"length_offset": int, "chars_offset": int, "base_size": int, "component_size": int,
               "terminator_size": int, "length_field": str, "chars_field": str, "max_length": int},
    "header": {"is_hash_or_syncblk": int, "is_hashcode": int, "hashcode_mask": int, "syncblock_index_mask": int,
               "spin_lock": int, "gc_reserve": int, "finalizer_run": int, "thread_id_mask": int,
               "recursion_mask": int, "recursion_shift": int, "appdomain_mask": int, "appdomain_shift": int,
               "string_has_no_high_chars": int, "string_high_chars_known": int, "kind": str,
               # Mono's lock word
               "status_mask": int, "status_hash": int, "status_inflated": int, "owner_shift": int, "hash_shift": int},
    "type_desc": {"kind_mask": int, "template_method_table": int, "argument": int, "template_relative": int},
}
PROFILE_KEYS = {"name", "flavor", "arch", "baseline", "pointer_size", "endian", "versions", "sources",
                "verified", "abstract", "kind"}
OVERRIDE_KEYS = {"versions", "reason", "sources"} | set(SCHEMA)
REQUIRED = {
    "object": {"header_size", "sync_block_offset", "method_table_offset", "alignment", "large_object_alignment",
               "min_object_size", "method_table_unmask"},
    "method_table": {"size", "fields", "flags"},  # CLR only: a MonoVTable is not a MethodTable
    "string": {"length_offset", "chars_offset", "base_size", "component_size", "terminator_size"},
    "header": {"kind"},
    "type_desc": set(),
}


@dataclass(frozen=True)
class FieldSpec:
    name: str
    offset: int
    type: str
    size: int


@dataclass(frozen=True)
class ObjectSpec:
    header_size: int
    sync_block_offset: int
    method_table_offset: int
    alignment: int
    large_object_alignment: int
    min_object_size: int
    method_table_unmask: int
    #: Mono: offset of the MonoThreadsSync* word in the object (None for the CLR)
    sync_pointer_offset: int | None = None
    #: objects of at least this many bytes are allocated on the large object heap
    large_object_threshold: int = 85000


@dataclass(frozen=True)
class MethodTableSpec:
    size: int
    fields: dict  # name -> FieldSpec
    flags: dict  # name -> mask
    eeclass_or_canon_mask: int
    #: the multipurpose slots that hold pointers (ModuleOverride) are self-relative (2.x, FEATURE_PREJIT)
    relative_slots: bool = False

    def field(self, name: str) -> FieldSpec | None:
        return self.fields.get(name)


@dataclass(frozen=True)
class StringSpec:
    length_offset: int
    chars_offset: int
    base_size: int
    component_size: int
    terminator_size: int
    #: the managed names of the two fields, as reflection and SOS's !dumpobj show them (the native
    #: StringObject calls them m_StringLength and m_FirstChar everywhere)
    length_field: str = "length"
    chars_field: str = "chars"
    #: the longest string the runtime allocates (characters)
    max_length: int = 0x3FFFFFDF


@dataclass(frozen=True)
class HeaderSpec:
    """Sync block word bits (CLR) or lock word bits (Mono); 0 means the runtime has no such bit."""

    kind: str  # "clr-syncblock" | "mono-lock-word"
    is_hash_or_syncblk: int = 0
    is_hashcode: int = 0
    hashcode_mask: int = 0
    syncblock_index_mask: int = 0
    spin_lock: int = 0
    gc_reserve: int = 0
    finalizer_run: int = 0
    thread_id_mask: int = 0
    recursion_mask: int = 0
    recursion_shift: int = 0
    appdomain_mask: int = 0
    appdomain_shift: int = 0
    string_has_no_high_chars: int = 0
    string_high_chars_known: int = 0
    status_mask: int = 0
    status_hash: int = 0
    status_inflated: int = 0
    owner_shift: int = 0
    hash_shift: int = 0


@dataclass(frozen=True)
class Profile:
    name: str
    flavor: str
    arch: str
    pointer_size: int
    little_endian: bool
    versions: str
    #: the runtime version the overrides were resolved for (None: the newest layout)
    version: tuple[int, ...] | None
    applied_overrides: tuple[str, ...]
    object: ObjectSpec
    method_table: MethodTableSpec | None  # None for Mono
    string: StringSpec
    header: HeaderSpec
    #: ParamTypeDesc (a TypeHandle with bit 1 set: pointers, by-refs, and arrays before .NET 5): offsets in
    #: pointers; empty when the runtime has none
    type_desc: dict = field(default_factory=dict)
    sources: dict = field(default_factory=dict, compare=False)
    verified: str = ""
    path: str = ""

    def __hash__(self) -> int:
        # dict-valued fields are not hashable; equality still compares every field
        return hash((self.name, self.version, self.applied_overrides, self.string, self.object))

    @property
    def label(self) -> str:
        v = ".".join(map(str, self.version)) if self.version else "newest"
        return f"{self.name} ({v})"

    # derived layout facts of System.String (pure functions of the profile)

    @property
    def string_payload_end_base(self) -> int:
        """Bytes from the start of the header to the end of the terminator of an empty string."""
        return self.object.header_size + self.string.chars_offset + self.string.terminator_size

    @property
    def string_extra_bytes(self) -> int:
        """Bytes BaseSize counts beyond header, fields and terminator (4 on .NET Framework x64)."""
        return self.string.base_size - self.string_payload_end_base

    def align(self, size: int, large: bool = False) -> int:
        a = self.object.large_object_alignment if large else self.object.alignment
        return (size + a - 1) & ~(a - 1)

    def string_size(self, length: int) -> int:
        """SOS size (``!DumpObj`` Size): BaseSize + 2 * length, unaligned."""
        return self.string.base_size + self.string.component_size * length

    def string_aligned_size(self, length: int, large: bool = False) -> int:
        """Bytes the object occupies on the GC heap: the SOS size aligned, never below the minimum."""
        return max(self.align(self.string_size(length), large), self.object.min_object_size)


# --- loading ----------------------------------------------------------------------------------------


def _merge(base: dict, top: dict) -> dict:
    out = copy.deepcopy(base)
    for k, v in top.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = _merge(out[k], v)
        else:
            out[k] = copy.deepcopy(v)
    return out


@functools.cache
def _raw(name: str, directory: str) -> dict:
    """A profile file with its baselines merged under it; overrides collected in order, not applied."""
    path = Path(directory) / f"{name}.toml"
    data = load_format(path)
    meta = data.get("profile", {})
    for key in meta:
        if key not in PROFILE_KEYS:
            raise InvalidProfile(str(path), f"profile.{key}", "unknown key")
    for key in data:
        if key not in SCHEMA and key not in ("profile", "sources", "overrides", "layouts", "heap_segment",
                                             "generation"):
            raise InvalidProfile(str(path), key, "unknown section")
    merged: dict = {}
    overrides: list = []
    sources: dict = {}
    for base in meta.get("baseline", []):
        if base == name:
            raise InvalidProfile(str(path), "profile.baseline", "a profile cannot be its own baseline")
        b = _raw(base, directory)
        merged = _merge(merged, {k: v for k, v in b.items() if k in SCHEMA})
        overrides += b["overrides"]
        sources.update(b["sources"])
    merged = _merge(merged, {k: v for k, v in data.items() if k in SCHEMA})
    for o in data.get("overrides", []):
        for key in o:
            if key not in OVERRIDE_KEYS:
                raise InvalidProfile(str(path), f"overrides.{key}", "unknown key")
        if "versions" not in o:
            raise InvalidProfile(str(path), "overrides", "an override needs `versions`")
        overrides.append(dict(o, _file=str(path)))
    sources.update(data.get("sources", {}))
    merged["profile"] = meta
    merged["overrides"] = overrides
    merged["sources"] = sources
    merged["path"] = str(path)
    return merged


def _apply_fields(fields: dict, changes: dict) -> dict:
    out = dict(fields)
    for name, spec in changes.items():
        if isinstance(spec, dict) and spec.get("remove"):
            out.pop(name, None)
        else:
            out[name] = spec
    return out


def load_profile(name: str, version: tuple[int, ...] | str | None = None,
                 directory: str | Path | None = None) -> Profile:
    """The profile ``formats/<name>.toml`` resolved for a runtime ``version`` (None: newest layout)."""
    directory = str(directory or formats_dir())
    if isinstance(version, str):
        version = parse_version(version)
    raw = _raw(name, directory)
    path = raw["path"]
    meta = raw["profile"]
    if meta.get("abstract"):
        raise InvalidProfile(path, "profile.abstract", "an abstract profile is only a baseline")
    data = {k: copy.deepcopy(raw.get(k, {})) for k in SCHEMA}
    sources = dict(raw["sources"])
    applied = []
    for o in raw["overrides"]:
        try:
            hit = version is not None and version_matches(o["versions"], version)
        except ValueError as e:
            raise InvalidProfile(o["_file"], "overrides.versions", str(e)) from None
        if not hit:
            continue
        applied.append(o["versions"])
        for section in SCHEMA:
            if section not in o:
                continue
            change = o[section]
            if section == "method_table" and "fields" in change:
                data["method_table"]["fields"] = _apply_fields(data["method_table"].get("fields", {}), change["fields"])
                change = {k: v for k, v in change.items() if k != "fields"}
            data[section] = _merge(data[section], change)
        sources.update(o.get("sources", {}))
    return _build(name, path, meta, data, sources, version, tuple(applied))


def _check_section(path: str, section: str, values: dict) -> None:
    for key, value in values.items():
        want = SCHEMA[section].get(key)
        if want is None:
            raise InvalidProfile(path, f"{section}.{key}", "unknown key")
        if not isinstance(value, want) or isinstance(value, bool):
            raise InvalidProfile(path, f"{section}.{key}", f"expected {want.__name__}, got {value!r}")
    missing = REQUIRED[section] - set(values)
    if missing:
        raise InvalidProfile(path, section, f"missing {', '.join(sorted(missing))}")


def _build(name, path, meta, data, sources, version, applied) -> Profile:
    for key in ("flavor", "arch", "pointer_size"):
        if key not in meta:
            raise InvalidProfile(path, f"profile.{key}", "missing")
    ptr = meta["pointer_size"]
    if ptr not in (4, 8):
        raise InvalidProfile(path, "profile.pointer_size", f"{ptr} is not 4 or 8")
    data["header"].setdefault("kind", "clr-syncblock")
    has_mt = bool(data["method_table"]) or meta["flavor"] != "mono"
    for section, values in data.items():
        if section == "method_table" and not has_mt:
            continue
        _check_section(path, section, values)

    o = data["object"]
    for key in ("alignment", "large_object_alignment"):
        a = o[key]
        if a <= 0 or a & (a - 1):
            raise InvalidProfile(path, f"object.{key}", f"{a} is not a power of two")
    if o["min_object_size"] % o["alignment"]:
        raise InvalidProfile(path, "object.min_object_size", "not a multiple of the alignment")

    mt = data["method_table"] if has_mt else {"size": 0, "fields": {}, "flags": {}}
    fields = {}
    spans = []
    for fname, spec in mt["fields"].items():
        if not isinstance(spec, dict) or set(spec) - {"offset", "type"} or "offset" not in spec or "type" not in spec:
            raise InvalidProfile(path, f"method_table.fields.{fname}", "needs exactly `offset` and `type`")
        if spec["type"] not in FIELD_TYPES:
            raise InvalidProfile(path, f"method_table.fields.{fname}", f"unknown type {spec['type']!r}")
        size = FIELD_TYPES[spec["type"]] or ptr
        off = spec["offset"]
        if off < 0 or off + size > mt["size"]:
            raise InvalidProfile(path, f"method_table.fields.{fname}",
                                 f"offset {off:#x} + {size} is outside the size {mt['size']:#x}")
        if off % size:
            raise InvalidProfile(path, f"method_table.fields.{fname}", f"offset {off:#x} is not {size}-aligned")
        spans.append((off, off + size, fname))
        fields[fname] = FieldSpec(fname, off, spec["type"], size)
    spans.sort()
    for (_, a1, an), (b0, _, bn) in zip(spans, spans[1:]):
        if b0 < a1:
            raise InvalidProfile(path, f"method_table.fields.{bn}", f"overlaps {an}")
    for need in ("m_dwFlags", "m_BaseSize", "m_pParentMethodTable") if has_mt else ():
        if need not in fields:
            raise InvalidProfile(path, f"method_table.fields.{need}", "missing")
    for fname, mask in mt["flags"].items():
        if not isinstance(mask, int) or not 0 <= mask <= 0xFFFFFFFF:
            raise InvalidProfile(path, f"method_table.flags.{fname}", "not a 32-bit mask")

    s = data["string"]
    if s["chars_offset"] < s["length_offset"] + 4:
        raise InvalidProfile(path, "string.chars_offset", "overlaps the length field")
    if s["base_size"] < o["header_size"] + s["chars_offset"] + s["terminator_size"]:
        raise InvalidProfile(path, "string.base_size", "smaller than header + fields + terminator")

    return Profile(
        name=name, flavor=meta["flavor"], arch=meta["arch"], pointer_size=ptr,
        little_endian=meta.get("endian", "little") == "little", versions=meta.get("versions", ""),
        version=version, applied_overrides=applied,
        object=ObjectSpec(**o),
        method_table=MethodTableSpec(size=mt["size"], fields=fields, flags=dict(mt["flags"]),
                                     eeclass_or_canon_mask=mt.get("union", {}).get("eeclass_or_canon_mask", 3),
                                     relative_slots=bool(mt.get("relative_slots", 0)))
        if has_mt else None,
        string=StringSpec(**s),
        header=HeaderSpec(**data["header"]),
        type_desc=dict(data.get("type_desc", {})),
        sources=sources, verified=meta.get("verified", ""), path=path,
    )


# --- choosing a profile -----------------------------------------------------------------------------


def load_named_profile(spec: str, default_version: tuple[int, ...] | None = None) -> Profile:
    """A profile the user names: ``NAME[@VERSION]`` (a profile of ``formats/``) or the path of a profile file,
    resolved for VERSION or else ``default_version``.  A name that is not a profile, a version that does not
    parse, or one outside the profile's ``versions`` is a :class:`UsageError` that says what exists."""
    name, _, version_text = spec.partition("@")
    directory = None
    if name.endswith(".toml") or "/" in name or "\\" in name:
        path = Path(name)
        if not path.is_file():
            raise UsageError(f"profile={spec}: no profile file {path}")
        directory, name = path.parent, path.stem
    else:
        known = list_profiles()
        if name not in known:
            raise UsageError(f"profile={spec}: no profile {name!r} (profiles: {', '.join(known)})")
    version = default_version
    if version_text:
        version = parse_version(version_text)
        if version is None or not re.fullmatch(r"\s*v?\d+(\.\d+){0,3}\s*", version_text):
            raise UsageError(f"profile={spec}: {version_text!r} is not a version (e.g. 3.1 or 8.0.4)")
    meta = _raw(name, str(directory or formats_dir()))["profile"]
    if version_text and meta.get("versions") and not version_matches(meta["versions"], version):
        raise UsageError(f"profile={spec}: profile {name} covers runtime versions {meta['versions']}, not "
                         f"{version_text}")
    return load_profile(name, version, directory)


def list_profiles(directory: str | Path | None = None) -> list[str]:
    """Names of the concrete (non-abstract) runtime profiles."""
    return [name for name, _ in _concrete(directory)]


def _concrete(directory: str | Path | None) -> list[tuple[str, dict]]:
    """The concrete profiles' names and ``[profile]`` tables (flavor and arch are a file's own)."""
    directory = Path(directory or formats_dir())
    found = []
    for p in sorted(directory.glob("*.toml")):
        meta = profile_table(p)
        if not meta.get("abstract") and "flavor" in meta:
            found.append((p.stem, meta))
    return found


def select_profile(flavor: str, arch: str, version: tuple[int, ...] | str | None,
                   directory: str | Path | None = None) -> Profile:
    """The profile for ``flavor`` on ``arch`` resolved for ``version``; :class:`NoMatchingProfile` if none."""
    if isinstance(version, str):
        version = parse_version(version)
    directory = directory or formats_dir()
    for name, meta in _concrete(directory):
        if meta["flavor"] != flavor or meta.get("arch") != arch:
            continue
        if version is not None and meta.get("versions") and not version_matches(meta["versions"], version):
            continue
        return load_profile(name, version, directory)
    raise NoMatchingProfile(flavor, arch, ".".join(map(str, version)) if version else None)


def leaf_keys(data: dict, prefix: str = "") -> list[str]:
    """Dotted keys of every value in a profile section tree (for the source-coverage check)."""
    keys = []
    for k, v in data.items():
        if isinstance(v, dict) and not {"offset", "type"} <= set(v):
            keys += leaf_keys(v, f"{prefix}{k}.")
        else:
            keys.append(f"{prefix}{k}")
    return keys


def raw_profile(name: str, directory: str | Path | None = None) -> dict:
    """The merged, unresolved data of a profile file (tests use it to check sources)."""
    return _raw(name, str(directory or formats_dir()))
