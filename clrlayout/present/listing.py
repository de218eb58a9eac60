"""``dump``'s listings in each format, streamed (millions of rows): a head, a line per object, a tail — the table
(SOS's ``!dumpheap`` columns and a total line), JSON Lines (a record a line) or CSV (a header and a row a line).
The strings' own lines come a batch at a time from :mod:`.batchlines`; here are their head and tail, and every
line of a listing of objects of other types."""

from __future__ import annotations

import csv
import io
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .batchlines import CSV_HEADER
from .jsonout import csv_value, dumps, object_record
from .text import dumpheap_header, object_line, objects_header, total_line


@dataclass(frozen=True)
class Listing:
    head: list[str]  #: the lines before the first object
    #: (object, its heap's name, its fields' (name, value) or None) -> its line
    line: Callable[[Any, str, Any], str]
    tail: Callable[[int, int, int], list[str]]  #: (count, SOS size, aligned size) -> the lines after the last


def _no_tail(count: int, size: int, aligned: int) -> list[str]:
    return []


def _csv_field(value: str) -> str:
    buf = io.StringIO()
    csv.writer(buf, lineterminator="").writerow([value])
    return buf.getvalue()


def _unused_line(obj: Any, heap_name: str, values: Any) -> str:
    raise AssertionError("string lines come from batchlines")


def string_listing(fmt: str, pointer_size: int, with_layout: bool = False) -> Listing:
    """The head and tail of a listing of strings (their lines are :func:`.batchlines.renderer`'s)."""
    return {
        "table": Listing([] if with_layout else [dumpheap_header(pointer_size)], _unused_line,
                         lambda c, s, a: [total_line(c, s, a)]),
        "jsonl": Listing([], _unused_line, _no_tail),
        "csv": Listing([CSV_HEADER], _unused_line, _no_tail),
    }[fmt]


def object_listing(fmt: str, pointer_size: int, with_fields: bool = False, with_layout: bool = False) -> Listing:
    """A listing of objects of any type: Address, MT, Size and the name (``!dumpheap -type``), with each object's
    fields' values (``with_fields``); with each object's layout (``with_layout``) the lines are the layouts'."""
    def table_line(obj: Any, heap_name: str, values: Any) -> str:
        return object_line(obj, pointer_size) + "".join(f"  {n}={v}" for n, v in (values or ()))

    def json_line(obj: Any, heap_name: str, values: Any) -> str:
        record = object_record(obj, heap_name)
        if values is not None:
            record["fields"] = dict(values)
        return dumps(record)

    def csv_line(obj: Any, heap_name: str, values: Any) -> str:
        return ",".join([f"{obj.address:#x}", f"{obj.method_table:#x}", str(obj.size), str(obj.aligned_size),
                         str(obj.count) if obj.type.component_size else "", heap_name,
                         _csv_field(csv_value(obj.type_name or ""))]
                        + ([_csv_field(dumps(dict(values)))] if values is not None else []))

    return {
        "table": Listing([] if with_layout else [objects_header(pointer_size)], table_line,
                         lambda c, s, a: [total_line(c, s, a, noun=("object", "objects"))]),
        "jsonl": Listing([], json_line, _no_tail),
        "csv": Listing(["address,method_table,size,aligned_size,length,heap,type" + (",fields" if with_fields else "")],
                       csv_line, _no_tail),
    }[fmt]


def layout_result(record: dict[str, Any], lay: Any, title: str, problems: list[str], full: bool) -> Any:
    """One object's layout (``object``, ``dump --layout``): JSON Lines, its record with the layout's; the table,
    the layout's rows (JOL's), what is incomplete, and the annotated hex dump (``full``: all of it)."""
    from .hexview import MAX_LINES, hex_dump
    from .jsonout import layout_record
    from .results import Result
    from .text import layout_table

    def lines() -> list[str]:
        return [*layout_table(lay, title), *(f"  (incomplete: {p})" for p in problems), "",
                *hex_dump(lay, max_lines=None if full else MAX_LINES), ""]

    return Result(lines, [{**record, "layout": layout_record(lay), **({"problems": problems} if problems else {})}])
