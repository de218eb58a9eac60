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


# --- the JSON Lines fast path -----------------------------------------------------------------------

# UTF-16 units that need no JSON escape and are one byte in UTF-8: printable ASCII except " and \\
_PLAIN = bytes(b for b in range(0x20, 0x7F) if b not in (0x22, 0x5C))
_NOT_PLAIN = None


def _plain_strings(batch):
    """Which strings of a batch are plain ASCII, for the whole batch at once (a table look-up of every
    unit, summed per string with ``add.reduceat``)."""
    import numpy as np

    global _NOT_PLAIN
    if _NOT_PLAIN is None:
        _NOT_PLAIN = np.ones(65536, dtype=np.uint8)
        _NOT_PLAIN[np.frombuffer(_PLAIN, dtype=np.uint8)] = 0
    n = len(batch)
    units = np.frombuffer(batch.data, dtype="<u2", count=len(batch.data) // 2)
    if not n or not len(units):
        return np.ones(n, dtype=bool)
    start = batch.char_offsets // 2
    bounds = np.empty(2 * n, dtype=np.int64)
    bounds[0::2] = start
    bounds[1::2] = start + batch.lengths
    bad = np.add.reduceat(_NOT_PLAIN[units], np.minimum(bounds, len(units) - 1), dtype=np.int64)[0::2]
    bad[batch.lengths == 0] = 0
    # a string that reaches the buffer's last unit: reduceat stops one short; check it exactly
    last = bounds[1::2] >= len(units)
    for i in np.flatnonzero(last):
        bad[i] = int(_NOT_PLAIN[units[start[i] : start[i] + batch.lengths[i]]].sum())
    return bad == 0


def batch_lines(batch) -> bytes:
    """JSON Lines for a whole batch, byte for byte what :func:`string_line` gives for each string.

    Plain ASCII strings (most strings) are written straight from their UTF-16 bytes; the others go
    through :func:`string_line`."""
    data = batch.data
    mt = b'", "method_table": "0x%x", "size": ' % batch.method_table
    addresses = batch.addresses.tolist()
    lengths = batch.lengths.tolist()
    sizes = batch.sizes.tolist()
    aligned = batch.aligned_sizes.tolist()
    headers = batch.headers.tolist()
    offsets = batch.char_offsets.tolist()
    plain = _plain_strings(batch).tolist()
    middle: dict = {}  # size, aligned size and length depend on the length only
    zero_tail = b'", "header": 0}\n'
    lines = []
    append = lines.append
    for i in range(len(addresses)):
        if not plain[i]:
            append(string_line(batch.object(i)).encode("utf-8") + b"\n")
            continue
        n = lengths[i]
        key = (n, aligned[i])
        m = middle.get(key)
        if m is None:
            m = middle[key] = mt + b'%d, "aligned_size": %d, "length": %d, "value": "' % (sizes[i], aligned[i], n)
        a = offsets[i]
        h = headers[i]
        if h:
            append(b'{"address": "0x%x%s%s", "header": %d}\n' % (addresses[i], m, data[a : a + 2 * n : 2], h))
        else:
            append(b'{"address": "0x%x%s%s%s' % (addresses[i], m, data[a : a + 2 * n : 2], zero_tail))
    return b"".join(lines)
