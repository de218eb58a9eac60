"""The Python API: the README's example runs and prints what the README shows; the session's answers are
the commands' answers."""

from __future__ import annotations

import contextlib
import io
import json
import os
import re

import pytest

from conftest import REPO, SAMPLES, manifest

import clrlayout
from clrlayout.cli import main


def _readme_example() -> tuple[str, str]:
    """The code block of the README's "Python API" section and the output block after it."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    section = text.split("## Python API", 1)[1].split("\n## ", 1)[0]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    shown = re.search(r"```text\n(.*?)```", section, re.S).group(1)
    return code, shown


def test_readme_example_prints_what_the_readme_shows(monkeypatch):
    code, shown = _readme_example()
    monkeypatch.chdir(REPO)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, "README.md", "exec"), {"__name__": "readme_example"})
    assert out.getvalue() == shown


def test_public_names():
    for name in clrlayout.__all__:
        assert hasattr(clrlayout, name), name
    from clrlayout.session import Session, open_session

    assert clrlayout.open is open_session and clrlayout.Session is Session
    assert issubclass(clrlayout.DumpError, clrlayout.ClrLayoutError)


@pytest.mark.parametrize("entry", manifest(), ids=lambda e: e["file"])
def test_session_answers_are_the_commands_answers(entry, capsys):
    path = str(SAMPLES / entry["file"])
    assert main(["info", path, "--format", "json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert main(["dump", path, "--format", "jsonl", "--jobs", "1"]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    with clrlayout.open(path) as s:
        assert s.info == printed
        strings = list(s.strings())
        objects = list(s.objects())
    assert [(int(r["address"], 16), r["value"], r["size"], r["aligned_size"], r["header"]) for r in lines] == \
        [(x.address, x.value, x.size, x.aligned_size, x.header) for x in strings]
    # every string is an object, named, with the same sizes
    named = [(o.address, o.size, o.aligned_size) for o in objects if o.type_name == "System.String"]
    assert named == [(x.address, x.size, x.aligned_size) for x in strings]
    assert all(o.type_name != "Free" for o in objects)
    assert len(objects) > len(strings)


def test_session_closes_the_file():
    path = str(SAMPLES / manifest()[0]["file"])
    fd_dir = "/proc/self/fd"
    if not os.path.isdir(fd_dir):
        pytest.skip("no /proc/self/fd on this OS")
    before = len(os.listdir(fd_dir))
    with clrlayout.open(path) as s:
        assert len(os.listdir(fd_dir)) == before + 1
        next(s.strings())
    assert len(os.listdir(fd_dir)) == before


def test_errors_are_typed(tmp_path):
    bad = tmp_path / "not-a-dump"
    bad.write_bytes(b"hello, world")
    with pytest.raises(clrlayout.DumpError) as e:
        clrlayout.open(bad)
    assert e.value.exit_code == 3
    path = SAMPLES / manifest()[0]["file"]
    with clrlayout.open(path, heap="scan") as s:
        assert len(list(s.strings())) > 0
        with pytest.raises(clrlayout.HeapNotFound):
            next(s.objects())
