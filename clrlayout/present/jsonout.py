"""JSON and JSON Lines output.

Values are strings decoded with lone surrogates kept; JSON escapes them (``\\ud800``) so that every line
is valid UTF-8 and a JSON parser gets the same code units back.  U+0085, U+2028 and U+2029 are escaped too:
they are valid in JSON text, but ``str.splitlines()``, several JSON Lines tools and editors end a line at
them.  Everything else is plain UTF-8.
"""

from __future__ import annotations

import json
import re
from json.encoder import encode_basestring  # the C encoder json.dumps uses for a str

from ..heap.segments import HEAPS, LARGE_HEAPS, generation_number
from ..objects.batches import CHUNK  # lines made at once: a chunk's pieces and lines stay in the CPU cache
from ..objects.strings import StringObject
from ..runtime.structs import decode_utf16

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
    """One JSON Lines record; the field names are fixed (README: JSON Lines schema)."""
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
    """One JSON Lines record of an object of any type (README: JSON Lines schema)."""
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


# --- the JSON Lines fast path -----------------------------------------------------------------------
#
# Millions of lines, so no Python statement runs per line: a batch's lines are three pieces each, made by
# numpy or by C-level map() over the whole batch, and joined once.  The pieces: the previous line's tail
# with this line's address (a fixed-width numpy table), the size fields (one bytes object per length),
# and the characters.  A plain string's characters (printable ASCII but " and \\, the most common case)
# are the low bytes of its UTF-16 units, cut from one low-byte image of the batch's buffer; any other
# string's characters are escaped by json.dumps, as string_line does.


class _Middles(dict):
    """(length << 3 | heap code) -> the bytes between the address and the value, made once per key."""

    def __init__(self, batch):
        super().__init__()
        self.profile = batch.profile
        self.mt = b'", "method_table": "0x%x", "size": ' % batch.method_table

    def __missing__(self, key: int) -> bytes:
        p, length, code = self.profile, key >> 3, key & 7
        size = p.string.base_size + p.string.component_size * length
        align = (p.object.large_object_alignment if code in LARGE_HEAPS else p.object.alignment) - 1
        aligned = max((size + align) & ~align, p.object.min_object_size)
        gen = generation_number(code)
        value = self[key] = self.mt + b'%d, "aligned_size": %d, "length": %d, "gen": %s, "heap": "%s", "value": "' % (
            size, aligned, length, b"null" if gen is None else b"%d" % gen, HEAPS[code].encode())
        return value


_MIDDLES: dict = {}


def _middles(batch) -> _Middles:
    """The middles of a batch's profile and MethodTable, kept from batch to batch."""
    key = (id(batch.profile), batch.method_table)
    found = _MIDDLES.get(key)
    if found is None or found.profile is not batch.profile or len(found) > 65536:  # bounded
        if len(_MIDDLES) > 16:
            _MIDDLES.clear()
        found = _MIDDLES[key] = _Middles(batch)
    return found


def _plain_strings(start, lengths, units):
    """Which strings are plain (their characters: ``lengths`` units from ``start`` in ``units``): every unit
    printable ASCII but " and \\ (arithmetic on the whole buffer, then one ``logical_or.reduceat``)."""
    import numpy as np

    n = len(start)
    if not n or not len(units):
        return np.ones(n, dtype=bool)
    bad = (units - np.uint16(0x20)) >= np.uint16(0x5F)
    bad |= units == 0x22
    bad |= units == 0x5C
    end = start + lengths
    bounds = np.empty(2 * n, dtype=np.int64)
    bounds[0::2] = start
    bounds[1::2] = end
    any_bad = np.logical_or.reduceat(bad, np.minimum(bounds, len(units) - 1))[0::2]
    any_bad[lengths == 0] = False
    # a string that reaches the buffer's last unit: reduceat stops one short; check it exactly
    for i in np.flatnonzero(end >= len(units)):
        any_bad[i] = bool(bad[start[i] : end[i]].any())
    return ~any_bad


_HEAD = b'{"address": "0x'
_HEX = b"0123456789abcdef"


def _prefixes(addresses, head: bytes) -> list:
    """head + hex(address) for every address: one fixed-width numpy table when the addresses are all as
    wide in hex (the usual case)."""
    import numpy as np

    a = addresses.astype(np.uint64)
    width = max(1, (int(a.max()).bit_length() + 3) // 4)
    if width != max(1, (int(a.min()).bit_length() + 3) // 4):
        return list(map((head + b"%x").__mod__, a.tolist()))
    # the leading digits that all the addresses share (those of min and max) are written once
    varying = min(width, max(1, (int(a.min() ^ a.max()).bit_length() + 3) // 4))
    prefix = head + b"%0*x" % (width, int(a.min()))
    rows = np.empty((len(a), len(head) + width), dtype=np.uint8)
    rows[:, : len(prefix) - varying] = np.frombuffer(prefix[: len(prefix) - varying], dtype=np.uint8)
    shifts = np.arange(4 * (varying - 1), -1, -4, dtype=np.uint64)
    rows[:, len(prefix) - varying :] = np.frombuffer(_HEX, dtype=np.uint8)[(a[:, None] >> shifts) & np.uint64(15)]
    return rows.view(f"S{rows.shape[1]}").ravel().tolist()


def _json_values(raws: list) -> list:
    """The JSON text of each value between its quotes, as :func:`dumps` writes it in a line: json's own
    C string encoder for each, then one substitution and one encode for them all (an encoded value holds
    no newline, so they are joined and split on newlines)."""
    if not raws:
        return []
    text = "\n".join(map(encode_basestring, map(decode_utf16, raws)))
    lines = _ESCAPED.sub(_escape, text).encode("utf-8").split(b"\n")
    return [line[1:-1] for line in lines]


_ZERO_TAIL = b'", "header": 0}\n'


def batch_lines(batch) -> bytes:
    """JSON Lines for a whole batch, byte for byte what :func:`string_line` gives for each string."""
    return b"".join(batch_chunks(batch))


def batch_chunks(batch) -> list:
    """:func:`batch_lines` in pieces of at most CHUNK lines (written one after the other)."""
    n = len(batch)
    if not n:
        return []
    if (batch.char_offsets & 1).any():  # characters at odd offsets: none of the layouts puts them there
        return [b"".join(string_line(batch.object(i)).encode("utf-8") + b"\n" for i in range(n))]
    return [_chunk_lines(batch, i, min(n, i + CHUNK)) for i in range(0, n, CHUNK)]


def _chunk_lines(batch, first: int, last: int) -> bytes:
    """The lines of strings ``first`` to ``last - 1`` of a batch; only their part of its buffer is read."""
    import numpy as np

    n = last - first
    lengths = batch.lengths[first:last]
    units, start = batch.chunk_units(first, last)
    plain = _plain_strings(start, lengths, units)
    low = units.astype(np.uint8).tobytes()  # each unit's low byte (a cast: several times a strided copy's speed)
    chars = list(map(low.__getitem__, map(slice, start.tolist(), (start + lengths).tolist())))
    keys = (lengths.astype(np.int64) << 3) | batch.heaps[first:last]
    mids = list(map(_middles(batch).__getitem__, keys.tolist()))
    others = np.flatnonzero(~plain).tolist()
    for i, value in zip(others, _json_values([batch.raw(first + i) for i in others])):
        chars[i] = value
    headers = batch.headers[first:last]
    # three pieces a line, each line's tail going with the next line's head; joined once
    pieces = [None] * (3 * n + 1)
    heads = _prefixes(batch.addresses[first:last], _ZERO_TAIL + _HEAD)
    heads[0] = heads[0][len(_ZERO_TAIL) :]
    pieces[-1] = _ZERO_TAIL
    for i in np.flatnonzero(headers).tolist():  # a non-zero header word: another tail
        tail = b'", "header": %d}\n' % int(headers[i])
        if i + 1 < n:
            heads[i + 1] = tail + heads[i + 1][len(_ZERO_TAIL) :]
        else:
            pieces[-1] = tail
    pieces[0:-1:3] = heads
    pieces[1::3] = mids
    pieces[2::3] = chars
    return b"".join(pieces)
