"""formats/: every file through one schema-checked loader, and every source it cites resolvable in a clone."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from clrlayout import formats
from clrlayout.errors import InvalidProfile

ROOT = Path(__file__).resolve().parents[2]
FILES = sorted((ROOT / "formats").glob("*.toml"))
FACTS = ROOT / "docs" / "facts"


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_every_file_loads_through_the_checked_loader(path):
    data = formats.load(path)
    assert formats.kind_of(data["profile"]) in formats.SCHEMAS
    assert formats.profile_table(path) == data["profile"]


def test_no_module_parses_toml_itself():
    readers = [p.relative_to(ROOT).as_posix() for p in (ROOT / "clrlayout").rglob("*.py")
               if re.search(r"^\s*import (tomllib|tomli)|^\s*from (tomllib|tomli)", p.read_text(), re.M)]
    assert readers == ["clrlayout/formats.py"]


@pytest.mark.parametrize("text, key", [
    ('[profile]\nname = "x"\nkind = "type-system"\nsources = []\n[nonsense]\na = 1\n', "nonsense"),
    ('[profile]\nname = "x"\nkind = "gc-interface"\nsources = []\n[[layouts]]\nmajor = 1\n', "layouts[0]"),
    ('block = 3\n[profile]\nname = "x"\nkind = "runtime-bookkeeping"\nsources = []\n', "block"),
    ('[profile]\nname = 3\nsources = []\n', "profile.name"),
    ('[profile]\nname = "x"\n', "profile.sources"),
    ('[profile]\nname = "x"\nsources = []\nkind = "nope"\n', "profile.kind"),
    ('[block]\nx = 1\n', "profile"),
    ('[profile\n', "-"),
])
def test_a_file_that_does_not_match_its_schema_is_refused_naming_the_key(tmp_path, text, key):
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(InvalidProfile) as e:
        formats.load(path)
    assert e.value.key == key


def _cited(value) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [t for v in value for t in _cited(v)]
    if isinstance(value, dict):
        return [t for k, v in value.items() for t in _cited(v) if k in ("sources", "source", "verified")
                or isinstance(v, (dict, list))]
    return []


def _citations() -> list[tuple[str, str]]:
    out = []
    for path in FILES:
        text = path.read_text()
        out += [(path.name, m) for m in re.findall(r"[\w./-]+\.(?:md|json)\b", text)]
    return out


@pytest.mark.parametrize("where, name", _citations(), ids=lambda x: x)
def test_every_document_a_format_cites_is_in_the_repository(where, name):
    """A bare document name is one of docs/facts; a path is in the repository or in dotnet/runtime's docs."""
    if name.startswith("docs/design/") or name in ("contract-descriptor.md", "data_descriptor.md"):
        assert "dotnet/runtime" in (ROOT / "formats" / where).read_text()  # dotnet/runtime's design docs
        return
    assert (FACTS / name).is_file() or (ROOT / name).is_file(), f"{where} cites {name}, not in the repository"


def test_every_source_alias_is_defined_in_the_facts():
    defined = set()
    for doc in FACTS.glob("*.md"):
        defined |= set(re.findall(r"^\| ([A-Z]{1,2}\d{1,2}) \|", doc.read_text(), re.M))
    used = set()
    for path in FILES:
        for text in _cited(formats.load(path)):
            used |= set(re.findall(r"\b((?:C|R|DD)\d{1,2})\b", text))
    assert used and used <= defined, sorted(used - defined)
