"""JSON and JSON Lines output.

Values are strings decoded with lone surrogates kept; JSON escapes them (``\\ud800``) so that every line
is valid UTF-8 and a JSON parser gets the same code units back.  Everything else is plain UTF-8.
"""

from __future__ import annotations

import json
import re

from ..strings import StringObject

_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def dumps(obj) -> str:
    """``json.dumps`` that keeps non-ASCII as UTF-8 but escapes lone surrogates."""
    text = json.dumps(obj, ensure_ascii=False)
    return _LONE_SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def string_record(s: StringObject) -> dict:
    """One JSON Lines record; the field names are fixed (README: JSON Lines schema)."""
    return {
        "address": f"{s.address:#x}",
        "method_table": f"{s.method_table:#x}",
        "size": s.size,
        "aligned_size": s.aligned_size,
        "length": s.length,
        "value": s.value,
        "header": s.header,
    }


def string_line(s: StringObject) -> str:
    return dumps(string_record(s))


def csv_value(value: str) -> str:
    """A value for CSV: lone surrogates as \\uXXXX escapes (CSV has no escape of its own for them)."""
    return _LONE_SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", value)
