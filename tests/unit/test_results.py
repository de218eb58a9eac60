"""Every command's answer is a ``Result`` that ``present.results.render`` gives in each format the same way (issue
47, item 4): the JSON document, a row a line in JSON Lines, the columns in CSV (values escaped as ``dump``'s CSV
escapes them), the table's lines; a form the answer does not have is refused."""

from __future__ import annotations

import csv
import io
import json

import pytest

from clrlayout.present.results import Result, render

ROWS = [{"address": "0x10", "name": "a,b", "count": 3, "flags": ["x", "y"], "missing": None},
        {"address": "0x20", "name": "tab\there \"q\"", "count": 0, "flags": [], "missing": None}]


def _result(**kw) -> Result:
    return Result(lambda: ["the table"], list(ROWS), ("address", "name", "count", "flags", "missing"), "items",
                  {"total": 3}, **kw)


def test_each_format_from_one_result():
    r = _result()
    assert r.formats == ("table", "json", "jsonl", "csv")
    assert list(render(r, "table")) == ["the table"]
    assert json.loads("\n".join(render(r, "json"))) == {"items": ROWS, "total": 3}
    assert [json.loads(line) for line in render(r, "jsonl")] == ROWS
    lines = list(render(r, "csv"))
    assert lines[0] == "address,name,count,flags,missing"
    parsed = list(csv.reader(io.StringIO("\n".join(lines))))
    assert parsed[1] == ["0x10", "a,b", "3", '["x", "y"]', ""]
    assert parsed[2] == ["0x20", "tab\\u0009here \"q\"", "0", "[]", ""]  # escaped as dump escapes it


def test_a_document_has_no_rows_to_list():
    r = Result(lambda: ["text"], document={"a": 1})
    assert r.formats == ("table", "json")
    assert list(render(r, "json")) == ['{"a": 1}']
    with pytest.raises(ValueError, match="no jsonl form"):
        render(r, "jsonl")
    with pytest.raises(ValueError, match="no csv form"):
        render(Result(list, [{"a": 1}]), "csv")  # rows without columns: no CSV


def test_forms_made_only_when_asked():
    """The table's lines are made only for the table; the rows are read once, by the form asked for."""
    made = []
    rows = ({"n": i} for i in range(3))
    r = Result(lambda: made.append("table") or ["x"], rows, ("n",))
    assert [json.loads(line)["n"] for line in render(r, "jsonl")] == [0, 1, 2]
    assert made == []
