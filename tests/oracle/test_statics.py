"""Statics named (issue 46, item 1), on fresh cores of the markers target on .NET Core 3.1, .NET 8 and .NET 10: the
base of every type's GC and non-GC statics equals the runtime's DAC's (GetDomainLocalModuleDataFromModule before
.NET 9, ISOSDacInterface14::GetStaticBaseAddress after); `type` finds a static class (no instance) and lists its
statics with the values the target planted; `roots` names the static that holds an object."""

from __future__ import annotations

import json

import pytest

from clrlayout.session import open_session
from tests.support.cli import run
from tests.support.markers import make_marked_dump, runtimes

pytestmark = pytest.mark.oracle


@pytest.fixture(scope="module", params=["3.1.23", "8.0.4", "10.0.0"])
def marked(request, target_build, tmp_path_factory):
    return make_marked_dump(target_build, tmp_path_factory.mktemp("statics"), request.param, "createdump-heap")


def _dac_statics(path, version, mts) -> dict:
    import subprocess
    import sys
    from pathlib import Path

    oracle = Path(__file__).resolve().parents[1] / "support" / "dac_oracle.py"
    r = subprocess.run([sys.executable, str(oracle), str(path), str(runtimes.get(version).dac),
                        "--statics=" + ",".join(hex(m) for m in mts)], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    return json.loads(r.stdout)["statics"]


def test_every_types_statics_are_where_the_dac_says(marked):
    with open_session(str(marked.path)) as s:
        statics = s.statics()
        mine = {}
        for mt in statics.all_types():
            lay = s.type_layout(mt)
            kinds = {f.storage for f in lay.statics} if lay is not None else set()
            if kinds & {"gc", "nongc"} and not s.names.type_arguments(mt):
                mine[mt] = (statics.bases(mt), kinds)
        program = next(m for m in mine if s.type_name(m) == "Program")
    assert len(mine) > 20 and program in mine
    dac = _dac_statics(marked.path, marked.runtime, mine)
    assert len(dac) == len(mine)
    differ = [(hex(mt), gc, nongc, dac[str(mt)]) for mt, ((gc, nongc), kinds) in mine.items()
              if ("gc" in kinds and (gc or 0) != dac[str(mt)]["gc"])
              or ("nongc" in kinds and (nongc or 0) != dac[str(mt)]["nongc"])]
    assert differ == []


def test_a_static_class_and_its_values(marked, capsys):
    """Program has no instance: `type` finds it among its module's types and lists every static with its value."""
    code, text, err = run(capsys, "type", marked.path, "Program", "--format", "json")
    assert code == 0, err
    rows = {r["name"]: r for r in json.loads(text)["static_fields"]}
    pin = int.from_bytes(bytes.fromhex(marked.markers["static_long"]["forms"][0]), "little", signed=True)
    assert rows["StaticPin"]["storage"] == "nongc" and rows["StaticPin"]["value"] == str(pin)
    name = bytes.fromhex(marked.markers["static_string"]["forms"][1]).decode()
    assert rows["StaticName"]["storage"] == "gc" and f'"{name}"' in rows["StaticName"]["value"]
    assert rows["StaticGuid"]["value"].endswith("(System.Guid)")  # a boxed struct
    assert rows["ThreadPin"]["storage"] == "thread" and rows["ThreadPin"]["address"] is None
    # a GC thread static's value on each thread that has the type's thread statics (the thread named from .NET 9);
    # a primitive thread static's are not read
    text = bytes.fromhex(marked.markers["thread_static_string"]["forms"][1]).decode()
    values = [p["value"] for p in rows["ThreadName"]["per_thread"]]
    assert sum(f'"{text}"' in v for v in values) == 1 and all(f'"{text}"' in v or v == "null" for v in values)
    assert all((p["thread"] is not None) == (marked.runtime == "10.0.0") for p in rows["ThreadName"]["per_thread"])
    assert rows["ThreadPin"]["per_thread"] == []


def test_roots_name_the_static_that_holds_an_object(marked, capsys):
    code, text, _ = run(capsys, "type", marked.path, "Program", "--format", "json")
    held = next(r for r in json.loads(text)["static_fields"] if r["name"] == "Held")["value"].split()[0]
    code, text, err = run(capsys, "roots", marked.path, held, "--roots", "handles", "--format", "json", "-q")
    assert code == 0, err
    chain = json.loads(text)["paths"][0]["chain"]
    assert chain[-1]["address"] == held and chain[-1]["field"] == "Program.Held (static)"


def _dac_thread_statics(path, version, mts) -> dict:
    import subprocess
    import sys
    from pathlib import Path

    oracle = Path(__file__).resolve().parents[1] / "support" / "dac_oracle.py"
    r = subprocess.run([sys.executable, str(oracle), str(path), str(runtimes.get(version).dac),
                        "--thread-statics=" + ",".join(hex(m) for m in mts)], capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    return json.loads(r.stdout)["thread_statics"]


@pytest.mark.parametrize("marked", ["3.1.23", "8.0.4"], indirect=True)
def test_thread_statics_are_where_the_dac_says(marked):
    """Before .NET 9: every GC thread static of every thread's ThreadLocalModule (the DAC's
    GetThreadLocalModuleData: the data of that thread's object[] of the module's GC thread statics) is named as its
    field, and no other slot is named a thread static.  (.NET 10: the test below.)"""
    with open_session(str(marked.path)) as s:
        statics = s.statics()
        fields = {mt: [f for f in s.type_layout(mt).statics if f.storage == "thread"
                       and f.kind in ("reference", "struct")]
                  for mt in statics.all_types() if s.type_layout(mt) is not None
                  and not s.names.type_arguments(mt)}
        fields = {mt: fs for mt, fs in fields.items() if fs}
        dac = _dac_thread_statics(marked.path, marked.runtime, fields)
        expected = {}
        for block in dac["blocks"]:
            for mt, fs in fields.items():
                if block["gc"] and dac["module_index"][str(mt)] == block["index"]:
                    expected.update({block["gc"] + f.offset: (mt, f.name) for f in fs})
        mine = {slot: (mt, f.name) for slot, (mt, f, thread) in statics._module_thread_statics().items()}
        names = {s.type_name(mt) for mt in fields}
    assert {"Program", "System.Threading.Thread", "System.Globalization.CultureInfo"} <= names
    assert len({b["index"] for b in dac["blocks"] if b["gc"]}) >= 2  # CoreLib's and the program's
    assert any(n == "ThreadName" for _, n in expected.values())
    assert mine == expected


def test_roots_name_a_thread_static(marked, capsys):
    """A thread static that holds an object is named in `roots`.  .NET 9+: a thread's thread-statics object[]
    (which no handle holds: the GC reports it) holds an object[] per type, whose slots are its thread statics:
    both named, with the thread.  Before: a strong handle of the thread's ThreadLocalModule holds the module's
    object[] of them, whose slot is named (the thread is not known there)."""
    text = bytes.fromhex(marked.markers["thread_static_string"]["forms"][1]).decode()
    lines = json_lines(capsys, "dump", marked.path, "--format", "jsonl")
    address = next(r["address"] for r in lines if r.get("value") == text)
    kinds = "statics" if marked.runtime == "10.0.0" else "handles"
    code, out, err = run(capsys, "roots", marked.path, address, "--roots", kinds, "--format", "json", "-q")
    assert code == 0, err
    chain = json.loads(out)["paths"][0]["chain"]
    assert chain[-1]["address"] == address
    if marked.runtime == "10.0.0":
        assert chain[-2]["field"].startswith("Program's thread statics (thread ")
        assert chain[-1]["field"].startswith("Program.ThreadName (thread static, thread ")
    else:
        assert chain[-1]["field"] == "Program.ThreadName (thread static)"
        assert chain[-2]["type"] == "System.Object[]"
        code, out, err = run(capsys, "retained", marked.path, "--top", "100000", "--format", "json", "-q")
        assert code == 0, err
        row = next(o for o in json.loads(out)["objects"] if o["address"] == address)
        assert row["static"] == "Program.ThreadName (thread static)"


def json_lines(capsys, *args):
    code, out, err = run(capsys, *args, "-q")
    assert code == 0, err
    return [json.loads(line) for line in out.splitlines()]
