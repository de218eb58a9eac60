"""A small graph's loops run as Python where numba is not loaded yet (clrlayout/graph/compiled.py): the
commands that walk the graph answer exactly as with the compiled loops, byte for byte, on the samples that
hold an object graph; and a process that analyses a small dump loads no numba."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import clrlayout.graph.compiled as compiled
import clrlayout.graph.dominators as dominators
from tests.support.cli import run
from tests.support.samples import SAMPLES

GRAPHS = ["graph.coreclr-10.0.0.linux-x64.core", "leak.coreclr-10.0.0.linux-x64.after.core"]
#: the quick loop checks the graph sample; the leak sample is tier 3
PARAMS = [GRAPHS[0], pytest.param(GRAPHS[1], marks=pytest.mark.slow)]


def _outputs(capsys, path) -> list:
    """stdout, stderr and exit code of the commands that walk the graph (and of roots/refs of two objects)."""
    roots = ("--roots", "handles,finalizer")
    code, text, err = run(capsys, "retained", path, "--top", "1000", "--format", "json", *roots)
    assert code == 0, err
    objects = [o["address"] for o in json.loads(text)["objects"]]
    out = [(code, text, err)]
    for args in (["retained", path, "--by", "type", "--top", "1000", *roots], ["stats", path, "--live", *roots],
                 ["roots", path, objects[0], *roots], ["roots", path, objects[-1], "--format", "json", *roots],
                 ["refs", path, objects[1], *roots], ["stats", path, "--live"]):
        out.append(run(capsys, *args))
    return out


@pytest.mark.parametrize("name", PARAMS)
def test_interpreted_loops_answer_as_the_compiled_ones(name, capsys, monkeypatch):
    path = SAMPLES / name
    monkeypatch.setattr(compiled, "interpreted", lambda size: False)
    compiled_out = _outputs(capsys, path)
    assert "numba" in sys.modules
    monkeypatch.setattr(compiled, "interpreted", lambda size: True)
    monkeypatch.setattr(dominators, "_eval", getattr(dominators._eval, "py_func", dominators._eval))
    interpreted_out = _outputs(capsys, path)
    assert interpreted_out == compiled_out
    assert len(json.loads(compiled_out[0][1])["objects"]) > 100


def test_a_small_dumps_analysis_loads_no_numba():
    """A fleet's process for one small dump does without loading numba (about 0.4 s)."""
    code = ("import sys; from clrlayout.fleet.analyse import analyse; "
            f"r = analyse({str(SAMPLES / GRAPHS[0])!r}, ('handles', 'finalizer'), True); "
            "print(r['dump']['live_objects'], 'numba' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    live, loaded = out.stdout.split()
    assert out.returncode == 0 and int(live) > 1000 and loaded == "False", out.stderr
