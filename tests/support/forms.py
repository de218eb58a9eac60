"""One answer in every form: the rows of a command's JSON equal its JSON Lines, line for line, and its CSV, cell
for cell (a list or an object as JSON in its cell, None as an empty one)."""

from __future__ import annotations

import csv
import io
import json

from tests.support.cli import run


def _cell(value) -> str:
    return "" if value is None else json.dumps(value) if isinstance(value, (list, dict)) else str(value)


def assert_same_rows_in_every_form(capsys, args: list, rows_of) -> list:
    """``rows_of(the JSON document)``: the rows the other forms list.  Returns them (not empty)."""
    code, out, err = run(capsys, *args, "--format", "json")
    assert code == 0, err
    rows = rows_of(json.loads(out))
    assert rows
    code, out, err = run(capsys, *args, "--format", "jsonl")
    assert code == 0 and [json.loads(line) for line in out.splitlines()] == rows, err
    code, out, err = run(capsys, *args, "--format", "csv")
    assert code == 0, err
    table = list(csv.DictReader(io.StringIO(out)))
    assert len(table) == len(rows)
    for row, line in zip(rows, table):
        assert set(line) <= set(row)
        assert {c: _cell(row[c]) for c in line} == line
    return rows
