"""Defects found reading the code (issue 47, item 5), each where behaviour changes: what a findings list counts
against what it yields, one decoding table for the table's text and the model's values, a type name several types
have, running out of memory, the contract descriptor's message for a runtime that has none, pyarrow only for
fleet."""

from __future__ import annotations

import subprocess
import sys
from types import SimpleNamespace

import pytest

import clrlayout
from clrlayout.findings import Findings, FindingKind
from tests.support.cli import run
from tests.support.samples import SAMPLES

pytestmark = pytest.mark.samples

TYPES = SAMPLES / "types.coreclr-8.0.4.win-x64.dmp"
PRIMITIVES = 0x7f6a908096a0  # a Primitives object of the types target; its bool field Bo at +66


def test_a_findings_list_counts_what_it_yields():
    f = Findings(limit=2)
    kind = next(iter(FindingKind))
    for i in range(5):
        f.add(kind, i, "x")
    assert len(f) == len(list(f)) == 2 and f.count == 5


def test_a_bool_that_is_neither_0_nor_1(tmp_path, capsys):
    """The model and `object` decode a field's bytes with one table: a bool byte of 2 is 2 (it was True in the
    model and "2 (not 0 or 1)" in the table)."""
    from clrlayout.dump import open_dump

    with open_dump(str(TYPES)) as d:
        region = next(r for r in d.memory.iter_regions() if r.start <= PRIMITIVES + 66 < r.start + r.size)
        at = region.offset + PRIMITIVES + 66 - region.start
    data = bytearray(TYPES.read_bytes())
    assert data[at] == 1
    data[at] = 2
    patched = tmp_path / "bool.dmp"
    patched.write_bytes(bytes(data))
    with clrlayout.open(str(patched)) as dump:
        obj = dump.runtime.heap.object_at(PRIMITIVES)
        assert obj.type.name == "Primitives" and obj.fields["Bo"] == 2
    code, text, _ = run(capsys, "object", patched, hex(PRIMITIVES))
    assert code == 0 and "2 (not 0 or 1)" in text
    with clrlayout.open(str(TYPES)) as dump:
        assert dump.runtime.heap.object_at(PRIMITIVES).fields["Bo"] is True


def test_a_name_several_types_have(monkeypatch):
    with clrlayout.open(str(TYPES)) as dump:
        runtime = dump.runtime
        one = runtime.type("Primitives")
        other = runtime.type("Derived")
        monkeypatch.setattr(runtime._session, "method_tables_named", lambda name: [one.method_table, other.method_table])
        with pytest.raises(clrlayout.errors.AmbiguousType, match="2 types are named Primitives"):
            runtime.type("Primitives")
        assert [t.method_table for t in runtime.types_named("Primitives")] == [one.method_table, other.method_table]


def test_out_of_memory_is_not_a_bug(monkeypatch, capsys):
    import clrlayout.session.describe as describe

    def exhausted(self):
        raise MemoryError()

    monkeypatch.setattr(describe.Describe, "_make_info", exhausted)
    code, _, err = run(capsys, "info", TYPES)
    assert code == 8 and err.startswith("clrlayout: error: out of memory") and err.count("\n") == 1


def test_the_contract_message_for_a_runtime_without_one():
    from clrlayout.session.opening import _contract

    why, _ = _contract(None, SimpleNamespace(flavor="mono", version=None), None, [])
    assert why == "Mono has none (CoreCLR exports one from .NET 9 on)"


def test_pyarrow_is_for_fleet_only(tmp_path):
    """The commands but fleet do not import pyarrow (the fleet extra installs it); fleet without it says so."""
    code = ("import sys; from clrlayout.cli import main; "
            f"main(['stats', {str(TYPES)!r}, '--format', 'json', '-q']); "
            "print('pyarrow' in sys.modules, file=sys.stderr)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and r.stderr.strip().splitlines()[-1] == "False", r.stderr
    code = ("import sys; sys.modules['pyarrow'] = None; from clrlayout.cli import main; "
            f"sys.exit(main(['fleet', {str(TYPES)!r}, '--out', {str(tmp_path / 'f')!r}]))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert r.returncode == 2 and "pip install 'clrlayout[fleet]'" in r.stderr
