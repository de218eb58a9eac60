"""The runtime's contract descriptor (.NET 9+): found where the runtime exports it, read from the dump or from the
runtime's file, its layouts equal to the profiles', its MethodTables equal to the DAC's; a bad one is a reason,
never a traceback.  Every expected value comes from the runtime (its exported symbol, its DAC, its data file)
or from the project's own data files, on cores made at test time."""

from __future__ import annotations

import dataclasses
import json
import shutil

import pytest
from elftools.elf.elffile import ELFFile

import clrlayout
import clrlayout.session
from tests.support.samples import SAMPLES
from clrlayout.cli import main
from clrlayout.runtime.contract import descriptor_data, parse_descriptor
from clrlayout.session import open_session  # the engine under the model: its plumbing too

pytestmark = pytest.mark.dac

SYMBOL = "DotNetRuntimeContractDescriptor"


def _exported(path: str, name: str) -> int | None:
    """The value of a dynamic symbol of a shared library (pyelftools), or None."""
    with open(path, "rb") as f:
        symbols = ELFFile(f).get_section_by_name(".dynsym").get_symbol_by_name(name)
        return symbols[0]["st_value"] if symbols else None


@pytest.fixture(scope="module")
def full_core(target_build, tmp_path_factory):
    """An untrimmed `createdump --full` core of the strings target on .NET 10.0.0: the runtime's data pages
    (where the descriptor is) are in it, unlike in the default heap dump."""
    from tests.support.fresh import strings_core

    return strings_core(target_build, tmp_path_factory.mktemp("full"), "10.0.0", False, full=True)


def test_the_descriptor_agrees_with_the_profiles_and_the_dac(fresh_core):
    """On each fresh core: .NET 10 exports the descriptor and clrlayout reads it at the exported address; every
    layout value of the data file is either equal to the profile's or not in this runtime's descriptor; the
    MethodTables its globals point at are the DAC's.  3.1 and 8 export none, and clrlayout says why."""
    listing = fresh_core.dac_listing()
    with open_session(fresh_core.path) as s:
        info = s.info["contract_descriptor"]
        symbol = _exported(s.runtime.module.path, SYMBOL)
        if s.runtime.version_tuple < (9,):
            assert symbol is None
            assert not info["found"] and "older than .NET 9" in info["reason"]
            return
        assert info["found"], info
        assert info["address"] == s.runtime.module.base + symbol
        # the heap dump leaves the runtime's data out: the descriptor comes from its file, relocated
        assert info["where"] == f"{s.runtime.module.path} on this machine"
        assert info["mismatches"] == []
        assert info["layout_values_checked"] + len(info["not_described"]) == len(descriptor_data()["checks"])
        assert info["layout_values_checked"] >= 24
        tables = {name: e["method_table"] for name, e in info["method_tables"].items()}
        assert tables["StringMethodTable"] == listing["string_method_table"]
        assert tables["FreeObjectMethodTable"] == listing["free_method_table"]
        assert tables["ObjectMethodTable"] == listing["object_method_table"]
        assert tables["ExceptionMethodTable"] == listing["exception_method_table"]
        assert all(e["agrees"] for e in info["method_tables"].values()) and len(tables) == 5
        assert s.warnings == []


def test_a_full_dump_holds_the_descriptor_and_trim_keeps_it(full_core, tmp_path, capsys):
    with open_session(full_core.path) as s:
        full = s.info["contract_descriptor"]
        assert full["where"] == "the dump"
        assert full["address"] == s.runtime.module.base + _exported(s.runtime.module.path, SYMBOL)
    trimmed = tmp_path / "trimmed.core"
    assert main(["trim", str(full_core.path), str(trimmed)]) == 0
    capsys.readouterr()
    with open_session(trimmed) as s:
        kept = s.info["contract_descriptor"]
        assert s.warnings == []
    assert kept == full
    assert full["mismatches"] == [] and all(e["agrees"] for e in full["method_tables"].values())
    assert trimmed.stat().st_size < 4 << 20


def _patched(source, target, offset: int, data: bytes):
    shutil.copy(source, target)
    with open(target, "r+b") as f:
        f.seek(offset)
        f.write(data)
    return target


def test_a_bad_descriptor_in_the_dump_is_a_reason(full_core, tmp_path, capsys):
    """The dump's own copy is what is read: a size beyond the bound, or JSON that is not JSON, is said in
    info, and the command still answers (exit 0); the dump's strings are not affected."""
    trimmed = tmp_path / "trimmed.core"
    assert main(["trim", str(full_core.path), str(trimmed)]) == 0
    raw = trimmed.read_bytes()
    magic = descriptor_data()["descriptor"]["magic"].to_bytes(8, "little")
    at = raw.index(magic)
    with open_session(trimmed) as s:
        text_at = s.dump.memory.try_read_pointer(s.info["contract_descriptor"]["address"] + 16)
        json_in_file = raw.index(s.dump.memory.try_read(text_at, 32))
    capsys.readouterr()
    assert main(["dump", str(trimmed), "--format", "jsonl"]) == 0
    lines = capsys.readouterr().out
    cases = {
        "size": (at + 12, (0x7FFFFFFF).to_bytes(4, "little"), "bytes (at most 1,048,576 are read)"),
        "json": (json_in_file, b"{\"version\":[[[[", "does not parse"),
    }
    for name, (offset, data, reason) in cases.items():
        bad = _patched(trimmed, tmp_path / f"{name}.core", offset, data)
        code = main(["info", str(bad), "--format", "json"])
        out, err = capsys.readouterr()
        assert code == 0, err
        d = json.loads(out)["contract_descriptor"]
        assert not d["found"] and reason in d["reason"], d
        assert "Traceback" not in err
        assert main(["dump", str(bad), "--format", "jsonl"]) == 0
        assert capsys.readouterr().out == lines


def test_a_profile_that_disagrees_is_named_in_a_warning(full_core, monkeypatch, capsys):
    """A profile value the runtime contradicts: a warning that names the descriptor's field and the profile's
    key, on every command (the profile's value is still the one used)."""
    real = clrlayout.session.opening.profile_for

    def wrong(dump, runtime):
        p = real(dump, runtime)
        return dataclasses.replace(p, object=dataclasses.replace(p.object, method_table_unmask=3))

    monkeypatch.setattr(clrlayout.session.opening, "profile_for", wrong)
    code = main(["info", str(full_core.path), "--format", "json"])
    out, err = capsys.readouterr()
    assert code == 0
    d = json.loads(out)["contract_descriptor"]
    assert d["mismatches"] == [{"descriptor": "globals.ObjectToMethodTableUnmask", "says": 7,
                                "layout": "profile coreclr-x64 (10.0.0): object.method_table_unmask",
                                "expected": 3}]
    assert "contract descriptor says globals.ObjectToMethodTableUnmask = 7" in err
    assert main(["stats", str(full_core.path)]) == 0
    assert "object.method_table_unmask = 3" in capsys.readouterr().err


@pytest.mark.parametrize("text, reason", [
    (b"\xff\xfe", "does not parse"),
    (b"[1, 2]", "not a data descriptor"),
    (b"{\"types\": 5}", "not a data descriptor"),
    (b"[" * 100000 + b"]" * 100000, "does not parse"),
])
def test_parse_refuses_what_is_not_a_descriptor(text, reason):
    assert reason in parse_descriptor(text, [])


def test_parse_reads_the_compact_format():
    """docs/design/datacontracts/data_descriptor.md: offsets as numbers or [offset, type], sizes as "!",
    globals direct (numbers, hex strings, strings) or indirect ([index] into the pointer data); entries of
    other shapes, and indexes past the pointer data, are left out."""
    text = json.dumps({"version": 0, "baseline": "empty",
                       "types": {"String": {"m_StringLength": 8, "m_FirstChar": [12, "uint16"]},
                                 "Array": {"!": 16, "m_NumComponents": "0x8"}, "Bad": 3,
                                 "Odd": {"x": {"y": 1}, "z": True}},
                       "globals": {"ObjectHeaderSize": ["0x8", "uint64"], "Unmask": 7, "Arch": ["x64", "string"],
                                   "StringMethodTable": [[1], "pointer"], "Past": [[9], "pointer"],
                                   "Nothing": None},
                       "contracts": {"Object": 1, "Bad": "x"}}).encode()
    d = parse_descriptor(text, [0, 0x1000])
    assert d.types["String"] == {"m_StringLength": 8, "m_FirstChar": 12}
    assert d.types["Array"] == {"!": 16, "m_NumComponents": 8}
    assert d.types["Odd"] == {} and "Bad" not in d.types
    assert d.globals == {"ObjectHeaderSize": 8, "Unmask": 7, "Arch": "x64", "StringMethodTable": 0x1000}
    assert d.indirect == {"StringMethodTable"} and d.contracts == {"Object": 1}
    assert d.value("String.m_FirstChar") == 12 and d.value("globals.Unmask") == 7 and d.value("X.y") is None


def test_every_sample_says_what_it_knows_of_the_descriptor(sample):
    """Runtimes before .NET 9 have none; on the others the descriptor is read (or its absence explained), and
    whatever it says agrees with the profiles.  The single-file sample is a full dump: its descriptor is the
    dump's own copy, read without the app's executable."""
    with open_session(sample.path) as s:
        d = s.info["contract_descriptor"]
        version = s.runtime.version_tuple
        if version < (9,):
            assert not d["found"] and "older than .NET 9" in d["reason"]
            return
        if sample.entry["single_file"]:
            assert d["found"] and d["where"] == "the dump"
            assert d["method_tables"]["StringMethodTable"]["agrees"] is True
            assert d["method_tables"]["FreeObjectMethodTable"]["agrees"] is True
        if d["found"]:
            assert d["mismatches"] == [] and d["layout_values_checked"] >= 24
            assert not [e for e in d["method_tables"].values() if e["agrees"] is False]
        else:
            assert d["reason"].startswith("not in the dump, and ")
        assert not [w for w in s.warnings if "contract descriptor" in w]


@pytest.mark.oracle  # downloads the win-x64 runtime
def test_a_windows_runtime_file_found_with_assemblies(capsys, tmp_path):
    """A Windows minidump names C:\\...\\coreclr.dll; with --assemblies on the same build's folder the
    descriptor is read from that PE file (its export, its pointers rebased from the preferred image base):
    the Windows EEClass layout of type-system.toml (COM interop fields) is the runtime's own, and its String
    MethodTable is the one the target process reported.  The sample (a full-memory dump, trimmed) holds the
    descriptor itself; a copy without the descriptor's page is what a dump that left it out looks like."""
    from tests.support.fresh import runtimes

    from clrlayout.dump import open_dump
    from clrlayout.dump.miniwrite import write_minidump

    whole = SAMPLES / "strings.coreclr-10.0.0.win-x64.dmp"
    code = main(["info", str(whole), "--format", "json"])
    own = json.loads(capsys.readouterr().out)["contract_descriptor"]
    assert code == 0 and own["found"] and own["where"] == "the dump" and own["mismatches"] == []
    sample = tmp_path / "without-coreclr.dmp"
    page = int(own["address"], 16) & ~0xFFF
    with open_dump(str(whole)) as d, open(sample, "wb") as f:
        ranges = []
        for r in d.memory.regions:  # every range but the descriptor's page
            ranges += [(lo, hi) for lo, hi in ((r.start, min(r.end, page)), (max(r.start, page + 0x1000), r.end))
                       if lo < hi]
        write_minidump(d, ranges, f, comment="without the contract descriptor")
    folder = runtimes.get("10.0.0", "win-x64").framework_dir
    code = main(["info", str(sample), "--format", "json"])
    without = json.loads(capsys.readouterr().out)["contract_descriptor"]
    assert code == 0 and not without["found"] and "assemblies=" in without["reason"]
    code = main(["info", str(sample), "--format", "json", "--assemblies", str(folder)])
    out, err = capsys.readouterr()
    assert code == 0, err
    d = json.loads(out)["contract_descriptor"]
    # the structure from the file; what it points at, the dump still has
    assert d["found"] and d["where"] in (f"{folder / 'coreclr.dll'} on this machine",
                                         f"the dump and {folder / 'coreclr.dll'} on this machine")
    assert d["mismatches"] == [] and err == ""
    assert d["layout_values_checked"] + len(d["not_described"]) == len(descriptor_data()["checks"])
    assert all(name.startswith("FieldDesc.") for name in d["not_described"])
    truth = json.loads(whole.with_name("strings.coreclr-10.0.0.win-x64.truth.json").read_text())
    assert int(d["method_tables"]["StringMethodTable"]["method_table"], 16) == int(truth["string_method_table"], 16)
