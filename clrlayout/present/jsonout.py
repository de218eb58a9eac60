"""JSON and JSON Lines output.

Values are strings decoded with lone surrogates kept; JSON escapes them (``\\ud800``) so that every line
is valid UTF-8 and a JSON parser gets the same code units back.  U+0085, U+2028 and U+2029 are escaped too:
they are valid in JSON text, but ``str.splitlines()``, several JSON Lines tools and editors end a line at
them.  Everything else is plain UTF-8.
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..objects.strings import StringObject

#: what a CSV value escapes: the backslash itself, control characters (C0, DEL, C1) and lone surrogates
_CSV_ESCAPED = re.compile("[\\\\\x00-\x1f\x7f-\x9f\ud800-\udfff]")
#: what JSON text escapes beyond json's own escapes: lone surrogates, and what other tools take as line ends
_ESCAPED = re.compile("[\ud800-\udfff\u0085\u2028\u2029]")


def _escape(m: re.Match) -> str:
    return f"\\u{ord(m.group()):04x}"


def dumps(obj) -> str:
    """``json.dumps`` that keeps non-ASCII as UTF-8 but escapes lone surrogates, U+0085, U+2028 and U+2029."""
    return _ESCAPED.sub(_escape, json.dumps(obj, ensure_ascii=False))


def string_record(s: StringObject) -> dict:
    """One JSON Lines record; the field names are fixed (docs/reference.md: JSON Lines schema)."""
    return {
        "address": f"{s.address:#x}",
        "method_table": f"{s.method_table:#x}",
        "size": s.size,
        "aligned_size": s.aligned_size,
        "length": s.length,
        "gen": s.gen,
        "heap": s.heap,
        "value": s.value,
        "header": s.header,
    }


def object_record(obj, heap: str) -> dict:
    """One JSON Lines record of an object of any type (docs/reference.md: JSON Lines schema)."""
    record = {"address": f"{obj.address:#x}", "method_table": f"{obj.method_table:#x}", "type": obj.type_name,
              "size": obj.size, "aligned_size": obj.aligned_size}
    if obj.type.component_size:
        record["length"] = obj.count
    record["heap"] = heap
    return record


def layout_record(lay) -> dict:
    """An object's layout as JSON: the rows (offsets from the object pointer), sizes, space losses, and the
    object's bytes in hex when they were read from a dump."""
    internal, external = lay.losses()
    record = {
        "sos_size": lay.sos_size, "aligned_size": lay.aligned_size,
        "space_losses": {"internal": internal, "external": external},
        "rows": [{"offset": r.offset, "size": r.size, "type": r.type, "description": r.description, "role": r.role,
                  **({"value": r.value} if r.value is not None else {}),
                  **({"mark": r.mark} if r.mark is not None else {})} for r in lay.rows],
    }
    if lay.data is not None:
        record["bytes"] = lay.data.hex()
    return record


def string_line(s: StringObject) -> str:
    return dumps(string_record(s))


def csv_value(value: str) -> str:
    """A value for CSV, one reversible rule: a backslash is written ``\\\\``, a control character (U+0000 to
    U+001F, U+007F to U+009F) or a lone surrogate ``\\uXXXX``, every other character as it is.  So a NUL, a
    line break or a lone surrogate never reaches the file raw, and ``\\ud800`` in the value is told apart
    from the characters backslash, u, d, 8, 0, 0."""
    return _CSV_ESCAPED.sub(_csv_escape, value)


def _csv_escape(m: re.Match) -> str:
    ch = m.group()
    return "\\\\" if ch == "\\" else f"\\u{ord(ch):04x}"
