"""How each output format writes a string's UTF-16 code units: as tables, for the compiled writer.

JSON escapes ``"``, ``\\`` and control characters (and U+0085, U+2028, U+2029: :mod:`.jsonout`); a table's
C#-like literal escapes those and C1 controls; CSV doubles quotes.  All of them write lone surrogates as
``\\uXXXX`` and every other character as UTF-8.  An :class:`Escapes` holds a format's rules as tables (one
class per UTF-16 unit), and :func:`.linekernels.put_value`, compiled by numba, writes a value from them in
one pass over its units.  Python's own encoders work one value at a time (``json``'s C encoder,
``str.encode``), about a microsecond a value once values are not plain ASCII, and numpy needs a dozen passes
over the units; the kernel costs about a nanosecond a character whatever the characters are.

The per-value functions (``json.dumps`` in :mod:`.jsonout`, :func:`clrlayout.objects.layout.quote`,
:func:`.jsonout.csv_value`) are the reference: the tests compare the two byte for byte.
"""

from __future__ import annotations

import numpy as np

#: unit classes
RAW, NAMED, HEX, UTF8_2, UTF8_3, SURROGATE = range(6)


class Escapes:
    """How a format writes characters: ``named`` two-character escapes (``'"': '\\\\"'``), the units written
    ``\\uXXXX`` (``hex_ranges``, half-open), lone surrogates ``\\uXXXX`` too, the rest as UTF-8."""

    def __init__(self, named: dict[str, str], hex_ranges: tuple):
        cls = np.full(0x10000, UTF8_3, dtype=np.uint8)
        cls[:0x80] = RAW
        cls[0x80:0x800] = UTF8_2
        cls[0xD800:0xE000] = SURROGATE
        for lo, hi in hex_ranges:
            cls[lo:hi] = HEX
        self.first = np.zeros(0x80, dtype=np.uint8)
        self.second = np.zeros(0x80, dtype=np.uint8)
        for ch, escape in named.items():
            assert len(escape) == 2 and ord(ch) < 0x80
            cls[ord(ch)] = NAMED
            self.first[ord(ch)], self.second[ord(ch)] = escape.encode()
        self.classes = cls


#: JSON text as json.dumps(ensure_ascii=False) writes it, plus U+0085, U+2028 and U+2029 (see jsonout)
JSON = Escapes({'"': '\\"', "\\": "\\\\", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"},
               ((0x00, 0x20), (0x85, 0x86), (0x2028, 0x202A)))
#: a table's C#-like literal (objects.layout.quote), without its quotes
LITERAL = Escapes({"\\": "\\\\", '"': '\\"', "\n": "\\n", "\r": "\\r", "\t": "\\t", "\0": "\\0"},
                  ((0x00, 0x20), (0x7F, 0xA0)))
#: a CSV value (jsonout.csv_value) as csv.writer writes it in a quoted field: a quote doubled
CSV = Escapes({"\\": "\\\\", '"': '""'}, ((0x00, 0x20), (0x7F, 0xA0)))

#: the most bytes put_value writes for one unit (``\\uXXXX``)
MAX_BYTES_PER_UNIT = 6
#: no limit for put_value
NO_LIMIT = np.uint64(2**64 - 1)
