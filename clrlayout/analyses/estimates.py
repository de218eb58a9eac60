"""Layouts without a dump (JOL's "estimates"): every string layout the profiles describe.

A profile's overrides name the runtime versions where something changed; resolving the profile at each
of those versions and grouping the versions with the same string layout gives its layout variants, e.g.
CoreCLR x64 "1.0-2.0" (BaseSize 26, m_stringLength), "2.1-2.x" (BaseSize 26, _stringLength) and "3.0+"
(BaseSize 22), .NET Framework "4.x".
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..errors import UsageError
from ..runtime.profiles import Profile, list_profiles, load_profile, parse_version, raw_profile, version_matches


@dataclass(frozen=True)
class Variant:
    profile: Profile
    versions: str  # "3.0+", "1.0-2.x", "4.x"

    @property
    def label(self) -> str:
        return f"{self.profile.flavor} {self.versions} {self.profile.arch}"


def _layout_key(p: Profile) -> tuple:
    o, s = p.object, p.string
    return (o.header_size, o.sync_pointer_offset, s.length_offset, s.chars_offset, s.base_size, o.alignment,
            o.large_object_alignment, o.min_object_size, s.length_field, s.chars_field)


def _upper_bound(name: str) -> tuple[int, ...] | None:
    """The first version a profile no longer covers (its ``versions`` ``<X`` clause), if it has one."""
    for clause in (raw_profile(name)["profile"].get("versions") or "").split(","):
        m = re.fullmatch(r"\s*<\s*([\d.]+)\s*", clause)
        if m:
            return parse_version(m.group(1))
    return None


def _last_before(nxt: tuple[int, ...]) -> tuple[int, ...]:
    """The last version before ``nxt``, as a label: (3, 0) -> (2,) ("2.x"); (2, 1) -> (2, 0)."""
    return (nxt[0] - 1,) if not nxt[1:] or nxt[1] == 0 else (nxt[0], nxt[1] - 1)


def _bounds(name: str) -> list[tuple[int, ...]]:
    raw = raw_profile(name)
    start = parse_version(re.sub(r"^[<>=]+", "", raw["profile"].get("versions", "") or "0")) or (0,)
    found = {start}
    for o in raw["overrides"]:
        for clause in o["versions"].split(","):
            v = parse_version(re.sub(r"^[<>=]+", "", clause.strip()))
            if v and v > start:
                found.add(v)
    return sorted(found)


def _fmt(v: tuple[int, ...]) -> str:
    return ".".join(map(str, v[:2] if len(v) > 1 else v + (0,)))


def variants(name: str) -> list[Variant]:
    """The distinct string layouts of one profile, each with the version range it holds for."""
    bounds = _bounds(name)
    groups: list[list] = []  # [key, first version, last version, profile]
    for v in bounds:
        p = load_profile(name, v)
        key = _layout_key(p)
        if groups and groups[-1][0] == key:
            groups[-1][2] = v
            continue
        groups.append([key, v, v, p])
    out = []
    end = _upper_bound(name)
    for i, (_, first, _, p) in enumerate(groups):
        nxt = groups[i + 1][1] if i + 1 < len(groups) else end
        if nxt is not None:
            last = _last_before(nxt)
            if len(last) == 1 and first[0] == last[0] and not any(first[1:]):
                text = f"{last[0]}.x"  # 4.0 up to 5: "4.x"
            else:
                text = f"{_fmt(first)}-{last[0]}.x" if len(last) == 1 else f"{_fmt(first)}-{_fmt(last)}"
        else:
            text = f"{_fmt(first)}+"
        out.append(Variant(p, text))
    return out


def select_variants(flavors: list[str] | None = None, archs: list[str] | None = None,
                    version: str | None = None) -> list[Variant]:
    """Variants of every profile matching the flavors and architectures (all when None).

    With ``version``, each profile that covers that version, resolved for it; a version that does not
    parse, or that no chosen profile covers, is a :class:`UsageError` that says what the profiles cover."""
    parsed = None
    if version is not None:
        parsed = parse_version(version)
        if parsed is None or not re.fullmatch(r"\s*v?\d+(\.\d+){0,3}\s*", version):
            raise UsageError(f"runtime_version={version}: not a version (e.g. 4.8, 3.1 or 8.0.4)")
    out, covers = [], []
    for name in list_profiles():
        meta = raw_profile(name)["profile"]
        if flavors and meta["flavor"] not in flavors:
            continue
        if archs and meta["arch"] not in archs:
            continue
        if parsed is not None:
            covers.append(f"{name} {meta.get('versions') or 'any'}")
            if meta.get("versions") and not version_matches(meta["versions"], parsed):
                continue
            out.append(Variant(load_profile(name, parsed), version.strip()))
        else:
            out += variants(name)
    if parsed is not None and not out and covers:
        raise UsageError(f"runtime_version={version}: no profile covers it ({'; '.join(covers)})")
    return out


def parse_lengths(text: str) -> list[int]:
    """``"5"`` -> [5]; ``"0..9"`` -> [0, ..., 9]."""
    m = re.fullmatch(r"\s*(\d+)\s*(?:\.\.\s*(\d+)\s*)?", text)
    if not m:
        raise ValueError(f"{text!r} is not N or A..B")
    lo = int(m.group(1))
    hi = int(m.group(2)) if m.group(2) is not None else lo
    if hi < lo:
        raise ValueError(f"{text!r}: the range is empty")
    return list(range(lo, hi + 1))
