"""A command's answer as one shape, rendered one way for every command (Volatility 3's TreeGrid and renderers):
a :class:`Result` holds the rows of its table (each a JSON-ready dict, named by its columns), what the JSON
document holds beside them (totals, the command's own keys), and how the table form reads; :func:`render` gives
the lines of a format — ``table``, ``json``, ``jsonl`` (one row a line) or ``csv`` (the columns, a row a line) —
from the same result.  A command offers the formats its result has (``formats``): a document without rows has
no JSON Lines or CSV form."""

from __future__ import annotations

import csv
import io
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from .jsonout import csv_value, dumps


@dataclass
class Result:
    """What a command answers.

    ``rows``: the rows of its table, each a dict of JSON values (JSON Lines prints one a line, CSV the
    ``columns`` of each); ``document``: the JSON document (default: ``{rows_key: rows}`` and ``totals``);
    ``text``: the lines of the table form (a callable: made only when that form is asked for)."""

    text: Callable[[], Iterable[str]]
    rows: Iterable[dict[str, Any]] | None = None
    columns: tuple[str, ...] = ()
    rows_key: str = "rows"
    totals: dict[str, Any] = field(default_factory=dict)
    document: Any = None  #: a dict, or the list some commands print
    #: the forms it has, when not all those its parts allow (a document without a table form)
    formats_of: tuple[str, ...] | None = None

    @property
    def formats(self) -> tuple[str, ...]:
        if self.formats_of is not None:
            return self.formats_of
        return ("table", "json") + (("jsonl",) if self.rows is not None else ()) + \
            (("csv",) if self.rows is not None and self.columns else ())

    def as_document(self) -> Any:
        if self.document is not None:
            return self.document
        return {self.rows_key: list(self.rows or ()), **self.totals}


def _table(result: Result) -> Iterable[str]:
    return result.text()


def _json(result: Result) -> Iterable[str]:
    return [dumps(result.as_document())]


def _jsonl(result: Result) -> Iterable[str]:
    return (dumps(row) for row in result.rows or ())


def _csv_cell(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, str):
        return csv_value(value)
    if isinstance(value, (dict, list)):
        return dumps(value)
    return value


def _csv(result: Result) -> Iterable[str]:
    def line(cells: Iterable[Any]) -> str:
        buf = io.StringIO()
        csv.writer(buf, lineterminator="").writerow(cells)
        return buf.getvalue()

    yield line(result.columns)
    for row in result.rows or ():
        yield line(_csv_cell(row.get(c)) for c in result.columns)


RENDERERS: dict[str, Callable[[Result], Iterable[str]]] = {"table": _table, "json": _json, "jsonl": _jsonl,
                                                          "csv": _csv}


def render(result: Result, fmt: str) -> Iterable[str]:
    """The lines of ``result`` in a format it has (:attr:`Result.formats`).

    Raises:
        ValueError: a format the result has no form in (the command's choices never offer one).
    """
    if fmt not in result.formats:
        raise ValueError(f"this answer has no {fmt} form (it has {', '.join(result.formats)})")
    return RENDERERS[fmt](result)
