"""`dump`'s lines for a whole batch of strings at once: table rows, CSV rows and JSON Lines.

Millions of lines, so no Python statement runs per line: a compiled kernel (numba) writes a batch's lines
into one buffer, each line from a format's template (its fixed text, cut into pieces), the string's address,
sizes, length, heap and header, and its value escaped by :func:`.linekernels.put_value`.  The output of a batch
is written in pieces of at most ``MAX_PIECE`` bytes, so memory stays bounded whatever the strings.  The
kernels are in :mod:`.linekernels`, imported only for a heap big enough to repay loading them.

The per-string writers -- :func:`.jsonout.string_line`, :func:`.text.dumpheap_line`, :func:`csv_line` --
are the reference: the tests compare them byte for byte.  They are also used when the characters sit at odd
offsets (no layout puts them there), for a single string too big for a piece, and when stdout is not UTF-8.
"""

from __future__ import annotations

import csv
import io
import sys
from collections.abc import Callable

import numpy as np

from ..heap.segments import HEAPS, LARGE_HEAPS, generation_number
from ..objects.strings import StringObject
from . import utf16
from .jsonout import csv_value, string_line
from .text import VALUE_LIMIT, dumpheap_line, hexaddr

CSV_HEADER = "address,method_table,size,aligned_size,length,header,value"
KERNEL_HEAP_BYTES = 16 << 20  # heaps this big or bigger get the kernels
MAX_PIECE = 32 << 20  # bytes of output made at once (at most; a bound, counted before the kernel runs)
_LINE_BOUND = 320  # the most bytes a line holds besides its value (numbers of 20 digits, the longest heap name)
_ELLIPSIS = "\u2026".encode()


def renderer(fmt: str, pointer_size: int, value_limit: int | None = VALUE_LIMIT,
             heap_bytes: int = KERNEL_HEAP_BYTES) -> Callable[[object], list]:
    """batch -> the bytes of its lines on stdout, as a list of bytes, for --format table, csv or jsonl.  A
    heap of fewer than KERNEL_HEAP_BYTES is written by the per-string writers: loading the kernels (numba
    and its cache) costs about 0.3 s, more than they save on such a heap."""
    encoding = (getattr(sys.stdout, "encoding", None) or "utf-8").lower().replace("_", "-")
    errors = getattr(sys.stdout, "errors", None) or "strict"
    if encoding not in ("utf-8", "utf8") or heap_bytes < KERNEL_HEAP_BYTES:  # the kernels write UTF-8
        line = _reference(fmt, pointer_size, value_limit)
        return lambda batch: ["".join(line(s) + "\n" for s in batch.objects()).encode(encoding, errors)]
    warm_up()  # compiled (or loaded from numba's cache) now, once, not in each process of a shared walk
    if fmt == "jsonl":
        return json_chunks
    if fmt == "csv":
        return csv_chunks
    return lambda batch: table_chunks(batch, pointer_size, value_limit)


def csv_line(s: StringObject) -> str:
    """One CSV row as csv.writer writes it (the reference for :func:`csv_chunks`)."""
    buf = io.StringIO()
    csv.writer(buf, lineterminator="").writerow([f"{s.address:#x}", f"{s.method_table:#x}", s.size, s.aligned_size,
                                                 s.length, s.header, csv_value(s.value)])
    return buf.getvalue()


def _reference(fmt: str, pointer_size: int, value_limit: int | None) -> Callable[[StringObject], str]:
    if fmt == "jsonl":
        return string_line
    if fmt == "csv":
        return csv_line
    return lambda s: dumpheap_line(s, pointer_size, value_limit)


def json_chunks(batch) -> list:
    """JSON Lines, byte for byte what :func:`.jsonout.string_line` writes for each string."""
    return _lines(batch, "json_lines", "jsonl", _template(batch, _JSON_PIECES), utf16.JSON)


def table_chunks(batch, pointer_size: int, value_limit: int | None = VALUE_LIMIT) -> list:
    """Table rows, byte for byte what :func:`.text.dumpheap_line` writes for each string."""
    pieces = [b"", b" " + hexaddr(batch.method_table, pointer_size).encode() + b" ", b'  "', b'"\n', _ELLIPSIS]
    return _lines(batch, "table_lines", "table", _template(batch, pieces), utf16.LITERAL, 2 * pointer_size,
                  -1 if value_limit is None else value_limit, pointer_size)


def csv_chunks(batch) -> list:
    """CSV rows, byte for byte what :func:`csv_line` writes for each string."""
    return _lines(batch, "csv_lines", "csv", _template(batch, _CSV_PIECES), utf16.CSV)


# --- the Python side: a batch's arrays and the pieces of output ---------------------------------------

_JSON_PIECES = [b'{"address": "0x', b'", "method_table": "0x%(mt)x", "size": ', b', "aligned_size": ',
                b', "length": ', b', "gen": ', b', "heap": "', b'", "value": "', b'", "header": ', b"}\n"]
_CSV_PIECES = [b"0x", b",0x%(mt)x,", b",", b",", b",", b",", b"\n"]


def _template(batch, pieces: list) -> tuple[np.ndarray, np.ndarray]:
    """A format's fixed text: its pieces, the MethodTable filled in, as one array and the pieces' bounds."""
    filled = [p % {b"mt": batch.method_table} if b"%(mt)" in p else p for p in pieces]
    marks = np.zeros(len(filled) + 1, dtype=np.uint64)
    marks[1:] = np.cumsum([len(p) for p in filled])
    return np.frombuffer(b"".join(filled) or b"\0", dtype=np.uint8), marks


def _heap_tables(profile) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per heap code: the alignment mask, and the text of its generation (JSON's gen) and of its name."""
    codes = range(len(HEAPS))
    o = profile.object
    align = np.array([(o.large_object_alignment if c in LARGE_HEAPS else o.alignment) - 1 for c in codes],
                     dtype=np.uint64)
    texts = [b"null" if generation_number(c) is None else b"%d" % generation_number(c) for c in codes]
    texts += [HEAPS[c].encode() for c in codes]
    marks = np.zeros(len(texts) + 1, dtype=np.uint64)
    marks[1:] = np.cumsum([len(t) for t in texts])
    return align, np.frombuffer(b"".join(texts), dtype=np.uint8), marks, np.uint64(len(HEAPS))


def _units(data) -> np.ndarray:
    """A batch's buffer as read-only, aligned UTF-16 units (one array type for the kernels)."""
    raw = np.frombuffer(data, dtype=np.uint8)
    units = raw[: len(raw) & ~1].view("<u2") if raw.ctypes.data % 2 == 0 else raw[: len(raw) & ~1].copy().view("<u2")
    units.flags.writeable = False
    return units


def _lines(batch, kernel: str, fmt: str, template, escapes: utf16.Escapes, width: int = 0, limit: int = -1,
           pointer_size: int = 8) -> list:
    from . import linekernels

    n = len(batch)
    if not n:
        return []
    if (batch.char_offsets & 1).any():  # characters at odd offsets: none of the layouts puts them there
        return [_by_reference(batch, range(n), fmt, pointer_size, limit)]
    kernel = getattr(linekernels, kernel)
    lengths = batch.lengths.astype(np.int64, copy=False)
    shown = lengths if limit < 0 else np.minimum(lengths, limit)
    bound = np.cumsum(_LINE_BOUND + len(template[0]) + utf16.MAX_BYTES_PER_UNIT * shown)
    p = batch.profile
    align, texts, text_marks, n_codes = _heap_tables(p)
    u64 = (lambda a: a.astype(np.uint64))
    args = (_units(batch.data), u64(batch.char_offsets >> 1), u64(lengths), u64(batch.addresses), u64(batch.headers),
            batch.heaps.astype(np.uint8, copy=False), *template, escapes.classes, escapes.first, escapes.second,
            np.uint64(p.string.base_size), np.uint64(p.string.component_size), align,
            np.uint64(p.object.min_object_size), texts, text_marks, n_codes, np.uint64(width),
            utf16.NO_LIMIT if limit < 0 else np.uint64(limit))
    chunks, first = [], 0
    while first < n:
        done = int(bound[first - 1]) if first else 0
        last = max(first + 1, int(np.searchsorted(bound, done + MAX_PIECE, side="right")))
        size = int(bound[last - 1]) - done
        if size > MAX_PIECE:  # one string too big for a piece: the per-string writer, as for a few strings
            chunks.append(_by_reference(batch, range(first, last), fmt, pointer_size, limit))
        else:
            out = np.empty(size, dtype=np.uint8)
            end = int(kernel(out, np.uint64(first), np.uint64(last), *args))
            chunks.append(out[:end].tobytes())
        first = last
    return chunks


def _by_reference(batch, indices, fmt: str, pointer_size: int, limit: int) -> bytes:
    line = _reference(fmt, pointer_size, None if limit < 0 else limit)
    return "".join(line(batch.object(i)) + "\n" for i in indices).encode("utf-8")


def warm_up() -> None:
    """Run each kernel once on a tiny batch, so that numba compiles it (or loads it from its cache) here."""
    from ..objects.batches import StringBatch
    from ..runtime.profiles import select_profile

    p = select_profile("coreclr", "x64", "3.1.23")
    batch = StringBatch(p, 0x1000, np.array([0x2000], dtype=np.uint64), np.array([1], dtype=np.int64),
                        np.zeros(1, dtype=np.uint64), np.zeros(1, dtype=bool), b"a\0\0\0", np.zeros(1, np.int64))
    json_chunks(batch), csv_chunks(batch), table_chunks(batch, 8)
