"""Every profile in formats/ loads, cites a source for every value, and holds its verified facts."""

from __future__ import annotations

import dataclasses

import pytest

from clrlayout.errors import InvalidProfile, NoMatchingProfile
from clrlayout.runtime.profiles import (SCHEMA, formats_dir, leaf_keys, list_profiles, load_profile, parse_version,
                                raw_profile, select_profile, version_matches)


@pytest.mark.parametrize("name", list_profiles())
def test_profile_loads_for_every_override_boundary(name):
    raw = raw_profile(name)
    versions = {None} | {o["versions"].lstrip("<>=") for o in raw["overrides"]}
    for v in versions:
        load_profile(name, v)


@pytest.mark.parametrize("name", list_profiles() + ["clr-common", "coreclr-common"])
def test_every_value_cites_a_source(name):
    raw = raw_profile(name)
    keys = [k for section in SCHEMA for k in leaf_keys(raw.get(section, {}), f"{section}.")]
    missing = [k for k in keys if k not in raw["sources"] and k != "header.kind"]
    assert not missing, f"{name}: no source for {missing}"
    for o in raw["overrides"]:
        changed = [k for section in SCHEMA for k in leaf_keys(o.get(section, {}), f"{section}.")]
        cited = o.get("sources", {})
        for k in changed:
            field = k.rsplit(".", 1)[0] if k.endswith((".remove", ".offset", ".type")) else k
            if k.endswith(".remove"):
                continue
            assert field in cited or k in cited, f"{name} override {o['versions']}: no source for {k}"


# (flavor, arch, version) -> facts (clr-layout-facts.md §3, §4; golden WinDbg bytes; live harness)
FACTS = [
    ("netfx", "x86", "4.8", dict(ptr=4, header=4, length=4, chars=8, base=14, align=4, min=12, extra=0, tid=0x3FF)),
    ("netfx", "x64", "4.8", dict(ptr=8, header=8, length=8, chars=12, base=26, align=8, min=24, extra=4, tid=0x3FF)),
    ("coreclr", "x64", "2.1.30", dict(ptr=8, header=8, length=8, chars=12, base=26, align=8, min=24, extra=4, tid=0x3FF)),
    ("coreclr", "x64", "3.1.23", dict(ptr=8, header=8, length=8, chars=12, base=22, align=8, min=24, extra=0, tid=0x3FF)),
    ("coreclr", "x64", "8.0.0", dict(ptr=8, header=8, length=8, chars=12, base=22, align=8, min=24, extra=0, tid=0xFFFF)),
    ("coreclr", "x86", "3.1.23", dict(ptr=4, header=4, length=4, chars=8, base=14, align=4, min=12, extra=0, tid=0x3FF)),
    ("coreclr", "arm64", "6.0.0", dict(ptr=8, header=8, length=8, chars=12, base=22, align=8, min=24, extra=0, tid=0x3FF)),
]


@pytest.mark.parametrize("flavor,arch,version,facts", FACTS, ids=lambda x: str(x) if not isinstance(x, dict) else "")
def test_profile_facts(flavor, arch, version, facts):
    p = select_profile(flavor, arch, version)
    assert p.pointer_size == facts["ptr"]
    assert p.object.header_size == facts["header"]
    assert p.object.sync_block_offset == -4
    assert p.string.length_offset == facts["length"]
    assert p.string.chars_offset == facts["chars"]
    assert p.string.base_size == facts["base"]
    assert p.object.alignment == facts["align"]
    assert p.object.large_object_alignment == 8
    assert p.object.min_object_size == facts["min"]
    assert p.string_extra_bytes == facts["extra"]
    assert p.header.thread_id_mask == facts["tid"]
    assert p.method_table.fields["m_BaseSize"].offset == 4
    assert p.method_table.fields["m_pParentMethodTable"].offset == 0x10
    assert p.method_table.size == (0x40 if facts["ptr"] == 8 else 0x28)


def test_string_high_char_bits_only_up_to_3_1():
    assert select_profile("coreclr", "x64", "3.1").header.string_has_no_high_chars == 0x80000000
    assert select_profile("coreclr", "x64", "5.0").header.string_has_no_high_chars == 0
    assert select_profile("netfx", "x64", "4.8").header.string_has_no_high_chars == 0x80000000


def test_method_table_unmask_by_version():
    assert select_profile("coreclr", "x64", "5.0").object.method_table_unmask == 3
    assert select_profile("coreclr", "x64", "6.0").object.method_table_unmask == 7
    assert select_profile("coreclr", "x86", "8.0").object.method_table_unmask == 3


def test_net9_method_table_fields():
    p = select_profile("coreclr", "x64", "9.0")
    assert "m_wToken" not in p.method_table.fields and p.method_table.fields["m_dwFlags2"].offset == 8
    assert p.method_table.fields["m_pAuxiliaryData"].offset == 0x20
    assert p.method_table.flags["Collectible"] == 0x00200000


def test_versions():
    assert parse_version("2.0.0-preview3-25510-01") == (2, 0, 0)
    assert parse_version("4.8.4515.0") == (4, 8, 4515, 0)
    assert parse_version("nonsense") is None
    assert version_matches(">=3.0,<5", (3, 1, 23)) and not version_matches(">=3.0,<5", (5, 0))
    assert version_matches("<3.0", (2, 2, 8))


def test_no_profile_for_unknown_runtime():
    with pytest.raises(NoMatchingProfile):
        select_profile("coreclr", "mips", "3.1")
    with pytest.raises(NoMatchingProfile):
        select_profile("netfx", "x64", "2.0")


def test_invalid_profiles_are_rejected(tmp_path):
    src = (formats_dir() / "coreclr-x64.toml").read_text()
    for f in ("clr-common.toml", "coreclr-common.toml"):
        (tmp_path / f).write_text((formats_dir() / f).read_text())
    cases = {
        "unknown key": src.replace("alignment = 8\n", "alignment = 8\nalignmnet = 8\n"),
        "not a power of two": src.replace("alignment = 8\n", "alignment = 6\n"),
        "overlaps": src.replace("m_wToken = { offset = 0x0A", "m_wToken = { offset = 0x08"),
        "outside the size": src.replace("m_pInterfaceMap = { offset = 0x38", "m_pInterfaceMap = { offset = 0x40"),
        "smaller than header": src.replace("base_size = 22\n", "base_size = 20\n"),
    }
    for i, (reason, text) in enumerate(cases.items()):
        name = f"bad{i}"
        (tmp_path / f"{name}.toml").write_text(text.replace('name = "coreclr-x64"', f'name = "{name}"'))
        with pytest.raises(InvalidProfile, match=reason):
            load_profile(name, "3.1", tmp_path)


def test_profiles_are_values():
    p = select_profile("coreclr", "x64", "3.1.23")
    assert p == select_profile("coreclr", "x64", "3.1.23")
    assert p != dataclasses.replace(p, string=dataclasses.replace(p.string, base_size=24))


@pytest.mark.parametrize("flavor,arch,version,names", [
    ("netfx", "x64", "4.8", ("m_stringLength", "m_firstChar")),   # the golden WinDbg !do of tests/data
    ("coreclr", "x64", "2.0.0", ("m_stringLength", "m_firstChar")),
    ("coreclr", "x64", "2.1.30", ("_stringLength", "_firstChar")),
    ("coreclr", "x86", "10.0.0", ("_stringLength", "_firstChar")),
])
def test_string_field_names_are_the_managed_ones(flavor, arch, version, names):
    """!dumpobj shows the managed names from metadata; the native StringObject's m_StringLength is not one."""
    s = select_profile(flavor, arch, version).string
    assert (s.length_field, s.chars_field) == names


def test_golden_field_names_match_the_netfx_profile():
    import json
    from pathlib import Path

    golden = json.loads((Path(__file__).parents[1] / "data" / "netfx-windbg-strings.json").read_text())
    text = json.dumps(golden)
    p = select_profile("netfx", "x64", "4.8").string
    assert f'"{p.length_field}"' in text and f'"{p.chars_field}"' in text
