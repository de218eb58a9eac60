"""One answer, every form (issue 47, item 4): ``threads`` on a committed core gives the same rows as JSON, JSON
Lines and CSV (``clrstack``'s frames: tests/oracle/test_stacks.py, on cores whose stacks are walked)."""

from __future__ import annotations

from tests.support.forms import assert_same_rows_in_every_form
from tests.support.samples import SAMPLES


def test_threads_in_every_form(capsys):
    rows = assert_same_rows_in_every_form(capsys, ["threads", SAMPLES / "graph.coreclr-10.0.0.linux-x64.core"],
                                          lambda document: document["threads"])
    assert {r["managed_id"] for r in rows} == {1, 2, 3, 4}
