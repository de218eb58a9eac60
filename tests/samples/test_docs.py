"""The README and the docs show real output: every ``$ clrlayout ...`` example on a bundled sample (or on no
dump) is run, and its output must be the page's, line for line (a line ``...`` stands for lines left out);
every Python example followed by its output is run too; and the docs build (mkdocs, strict)."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from clrlayout.cli import main

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")
PAGES = [ROOT / "README.md"] + sorted((ROOT / "docs").rglob("*.md"))
#: every page, as one text (the examples are collected from all of them)
ALL = "\n".join(p.read_text(encoding="utf-8") for p in PAGES)


def _examples() -> list[tuple[str, str]]:
    """(command, expected output) of each ```text block that starts with `$ clrlayout` (after comment lines)."""
    out = []
    for block in re.findall(r"```text\n(.*?)```", ALL, flags=re.S):
        block = re.sub(r"\A(#[^\n]*\n)+", "", block)
        if not block.startswith("$ clrlayout "):
            continue
        for example in re.split(r"\n(?=\$ clrlayout )", block):  # a block may hold several
            command, _, output = example.partition("\n")
            out.append((command[2:], output.rstrip("\n")))
    return out


#: examples that need more than the samples: a hosted runtime (the live tests check it)
NOT_HERE = ("clrlayout live",)
EXAMPLES = [(c, o) for c, o in _examples() if not c.startswith(NOT_HERE)]


def test_the_readme_has_examples():
    assert len(re.findall(r"^\$ clrlayout ", README, flags=re.M)) >= 10 and len(EXAMPLES) >= 25


def _shell_commands() -> list[str]:
    """Every clrlayout command of the README's shell blocks (the Quickstart's), without what installs it."""
    out = []
    for block in re.findall(r"```sh\n(.*?)```", README, flags=re.S):
        for line in block.splitlines():
            for part in line.split("&&"):
                words = shlex.split(part)
                if words and words[0].endswith("clrlayout"):
                    out.append(shlex.join(words[1:]))
    return out


def test_every_clrlayout_command_of_the_readme_is_run_here():
    """No `$ clrlayout` line of the README stands outside the blocks run above (a dump this repository does not
    hold, a command a test does not run)."""
    shown = [c for c, _ in _examples()]
    every = re.findall(r"^\$ (clrlayout [^\n]*)$", ALL, flags=re.M)
    assert sorted(every) == sorted(shown)
    for command in shown:
        for word in shlex.split(command):
            if "/" in word and not word.startswith(("-", "/tmp/")):  # /tmp/...: what the command writes
                assert (ROOT / word).exists(), f"{command}: {word} is not in the repository"


@pytest.mark.parametrize("command", _shell_commands())
def test_the_quickstart_command_runs(capsys, monkeypatch, command):
    monkeypatch.chdir(ROOT)
    assert main(shlex.split(command)) == 0
    assert capsys.readouterr().out.count("\n") > 10


#: (exit code, output lines) of each example's command, run once however many pages show it
_OUTPUTS: dict = {}


@pytest.mark.parametrize("command,expected", EXAMPLES, ids=[c for c, _ in EXAMPLES])
def test_readme_example_is_real_output(capsys, monkeypatch, command, expected):
    if command not in _OUTPUTS:
        monkeypatch.chdir(ROOT)
        code = main(shlex.split(command)[1:])
        _OUTPUTS[command] = code, capsys.readouterr().out.rstrip("\n").splitlines()
    code, got = _OUTPUTS[command]
    assert code == 0
    assert _matches(got, expected.rstrip("\n").splitlines()), "\n".join(got)


def _matches(got: list[str], expected: list[str]) -> bool:
    """The expected lines, in order, with each ``...`` line standing for any number of lines."""
    chunks, chunk = [], []
    for line in expected:
        if line.strip() == "...":
            chunks.append(chunk)
            chunk = []
        else:
            chunk.append(line)
    chunks.append(chunk)
    if len(chunks) == 1:
        return got == expected
    first, *middle, last = chunks
    if got[: len(first)] != first or (last and got[-len(last):] != last):
        return False
    pos = len(first)
    for c in middle:
        while pos + len(c) <= len(got) and got[pos : pos + len(c)] != c:
            pos += 1
        if pos + len(c) > len(got):
            return False
        pos += len(c)
    return pos <= len(got) - len(last)


def _python_examples() -> list[tuple[str, str, str]]:
    """(page, code, shown output) of each ```python block that a ```text block follows."""
    out = []
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        for code, shown in re.findall(r"```python\n(.*?)```\s*```text\n(.*?)```", text, flags=re.S):
            out.append((page.relative_to(ROOT).as_posix(), code, shown))
    return out


@pytest.mark.parametrize("page,code,shown", _python_examples(), ids=[p for p, _, _ in _python_examples()])
def test_python_example_prints_what_the_page_shows(monkeypatch, page, code, shown):
    import contextlib
    import io

    monkeypatch.chdir(ROOT)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, page, "exec"), {"__name__": "docs_example"})
    assert out.getvalue() == shown


def test_the_docs_build(tmp_path):
    """mkdocs builds the site with every page in its navigation, every link resolving and the API reference
    generated from the docstrings (strict: a warning fails)."""
    from mkdocs.commands.build import build
    from mkdocs.config import load_config

    config = load_config(str(ROOT / "mkdocs.yml"), site_dir=str(tmp_path / "site"), strict=True)
    build(config)
    api = (tmp_path / "site" / "api-reference" / "index.html").read_text(encoding="utf-8")
    assert "clrlayout.model.heap.Heap" in api and "retained_size" in api


def test_every_link_of_the_readme_resolves():
    links = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", README)
    local = [link for link in links if not link.startswith(("http://", "https://"))]
    assert len(local) >= 15
    for link in local:
        assert (ROOT / link).exists(), link
