"""type answers the same whatever the type is asked by (its MethodTable or its name), lays System.String out as
a string, and names field types in one form, the DAC's (issue 32, items 3, 4 and 9)."""

from __future__ import annotations

import json

import pytest

import clrlayout
from clrlayout.analyses.typestats import TypeStats
from clrlayout.cli import main
from clrlayout.model.typeview import type_view
from clrlayout.present.results import render
from clrlayout.present.typelayout import result
from tests.support.samples import SAMPLES, manifest
from clrlayout.session import open_session  # the engine under the model: its plumbing too


def _heap_types(path) -> list[int]:
    with open_session(path) as s:
        stats = TypeStats()
        for win in s.heap_steps().windows():
            stats.add(win, s.mts)
        return [m for m in stats.totals if s.type_name(m) not in (None, "Free")]


@pytest.mark.parametrize("entry", manifest("types"), ids=lambda e: e["file"])
@pytest.mark.slow
def test_type_by_method_table_equals_type_by_name(entry):
    """Each in a session of its own, as the command runs: by MethodTable before anything walked the heap."""
    path = SAMPLES / entry["file"]
    mts = _heap_types(path)
    with clrlayout.open(path) as d:
        by_mt = {m: list(render(result(type_view(d, m)), "json")) for m in mts}
    with clrlayout.open(path) as d:
        for m in mts:
            name = d.runtime.type_name(m)
            assert m in [t.method_table for t in d.runtime.types_named(name)], name
            assert list(render(result(type_view(d, m)), "json")) == by_mt[m], name
    assert len(mts) > 100


def test_struct_fields_found_by_method_table(capsys):
    """The command itself: a struct field's size is its struct's, never the room to the next field."""
    path = SAMPLES / "types.coreclr-8.0.4.win-x64.dmp"
    with clrlayout.open(str(path)) as d:
        mt = d.runtime.types_named("WithStructs")[0].method_table
    outputs = []
    for arg in (f"{mt:#x}", "WithStructs"):
        assert main(["type", str(path), arg, "--format", "json"]) == 0
        outputs.append(capsys.readouterr().out)
    assert outputs[0] == outputs[1]
    fields = json.loads(outputs[0])["fields"]
    structs = [f for f in fields if f["kind"] == "struct"]
    assert structs and all(f["size_known"] and f["method_table"] for f in structs)


@pytest.mark.parametrize("entry", manifest("types")[:2] + manifest("strings")[:2], ids=lambda e: e["file"])
def test_string_type_is_laid_out_as_a_string(capsys, entry):
    path = SAMPLES / entry["file"]
    assert main(["type", str(path), "System.String", "-q"]) == 0
    table = capsys.readouterr().out
    with clrlayout.open(str(path)) as d:
        version, arch = d.runtime.version, d.arch
    assert main(["layout", "--length", "0", "--arch", arch, "--runtime", "coreclr", "--runtime-version", version]) == 0
    layout = capsys.readouterr().out
    rows = [line for line in layout.splitlines() if line.startswith("  ")]
    assert rows and all(row in table.splitlines() for row in rows)  # the same rows, offsets and losses
    assert "(array length)" not in table
    assert main(["type", str(path), "System.String", "--format", "json", "-q"]) == 0
    data = json.loads(capsys.readouterr().out)
    losses = next(line for line in layout.splitlines() if line.startswith("Space losses"))
    assert f"{data['space_losses']['internal']} bytes internal" in losses


def test_field_types_are_named_as_the_dac_names_types():
    path = SAMPLES / "types.coreclr-10.0.0.linux-x64.core"
    generic = 0
    with open_session(path) as s:
        for m in _heap_types(path):
            for f in s.type_layout(m).fields:
                assert f.declaring_type in {s.type_name(x) for x in [m, *s.type_layout(m).parents]}
                if "`" in f.reflection_type and "[" in f.reflection_type:
                    generic += 1
                    assert "[[" in f.type and "," in f.type, f.type
                if f.field_method_table and "__Canon" not in s.type_name(f.field_method_table):
                    assert f.type == s.type_name(f.field_method_table)
    assert generic > 20
