"""The compiled kernels (numba) that write `dump`'s lines: one per format, each line from the format's
template (:mod:`.batchlines` makes it), the string's numbers, and its value escaped by
:func:`put_value`.  Every index and count is uint64: numba then needs no check for negative
indices, and LLVM vectorises the copies (about four times the speed); constants are uint64 too, so that no
arithmetic mixes signed and unsigned (which numba makes float64)."""

from __future__ import annotations

import numpy as np
from numba import njit

from .utf16 import NAMED, RAW, SURROGATE, UTF8_2, UTF8_3

_1, _2, _3, _4, _6, _8, _10 = (np.uint64(k) for k in (1, 2, 3, 4, 6, 8, 10))


@njit(cache=True, nogil=True, boundscheck=False)
def put_value(out, pos, units, start, length, classes, first, second, limit):
    """Write ``units[start:start + length]`` at ``out[pos:]`` as the tables say; stop after ``limit`` code
    points (a surrogate pair is one, as Python's ``str`` counts).  All of them uint64.  Returns the
    position after it and whether it was cut."""
    i = start
    end = start + length
    written = np.uint64(0)
    while i < end:
        if written == limit:
            return pos, True
        u = np.uint64(units[i])
        c = classes[u]
        if c == RAW:  # a run of them, copied at once
            stop = end if limit - written >= end - i else i + (limit - written)
            run = i + _1
            while run < stop and units[run] < 0x80 and classes[units[run]] == RAW:
                run += _1
            n = run - i
            for k in range(n):
                out[pos + k] = units[i + k]
            pos += n
            written += n
            i = run
            continue
        if c == NAMED:
            out[pos] = first[u]
            out[pos + _1] = second[u]
            pos += _2
        elif c == UTF8_2:
            out[pos] = 0xC0 | (u >> _6)
            out[pos + _1] = 0x80 | (u & np.uint64(0x3F))
            pos += _2
        elif c == UTF8_3:
            out[pos] = 0xE0 | (u >> np.uint64(12))
            out[pos + _1] = 0x80 | ((u >> _6) & np.uint64(0x3F))
            out[pos + _2] = 0x80 | (u & np.uint64(0x3F))
            pos += _3
        elif c == SURROGATE and u < 0xDC00 and i + _1 < end and (units[i + _1] & 0xFC00) == 0xDC00:
            cp = np.uint64(0x10000) + ((u - np.uint64(0xD800)) << np.uint64(10)) \
                + (np.uint64(units[i + _1]) - np.uint64(0xDC00))
            out[pos] = 0xF0 | (cp >> np.uint64(18))
            out[pos + _1] = 0x80 | ((cp >> np.uint64(12)) & np.uint64(0x3F))
            out[pos + _2] = 0x80 | ((cp >> _6) & np.uint64(0x3F))
            out[pos + _3] = 0x80 | (cp & np.uint64(0x3F))
            pos += _4
            i += _1
        else:  # HEX, or a lone surrogate
            out[pos] = 92  # backslash
            out[pos + _1] = 117  # u
            for k in range(4):
                d = (u >> np.uint64(12 - 4 * k)) & np.uint64(15)
                out[pos + _2 + np.uint64(k)] = 48 + d if d < 10 else 87 + d
            pos += _6
        i += _1
        written += _1
    return pos, False


@njit(cache=True, nogil=True, boundscheck=False)
def holds(units, start, length, a, b):
    """Whether ``units[start:start + length]`` holds unit ``a`` or unit ``b``."""
    i = start
    while i < start + length:
        if units[i] == a or units[i] == b:
            return True
        i += _1
    return False

@njit(cache=True, nogil=True, boundscheck=False)
def _piece(out, pos, template, marks, k):
    a = marks[k]
    n = marks[k + _1] - a
    for j in range(n):
        out[pos + j] = template[a + j]
    return pos + n


@njit(cache=True, nogil=True, boundscheck=False)
def _hex(out, pos, value, width):
    """``value`` in lowercase hex, zero-padded to ``width`` digits (0: as short as it goes)."""
    digits = _1
    v = value >> _4
    while v:
        digits += _1
        v >>= _4
    digits = max(digits, width)
    v = value
    for k in range(digits):
        d = v & np.uint64(15)
        out[pos + digits - _1 - k] = 48 + d if d < 10 else 87 + d
        v >>= _4
    return pos + digits


@njit(cache=True, nogil=True, boundscheck=False)
def _dec(out, pos, value, width):
    """``value`` in decimal, right-aligned in ``width`` characters (0: as short as it goes)."""
    digits = _1
    v = value // _10
    while v:
        digits += _1
        v //= _10
    while width > digits:
        out[pos] = 32
        pos += _1
        width -= _1
    v = value
    for k in range(digits):
        out[pos + digits - _1 - k] = 48 + v % _10
        v //= _10
    return pos + digits


@njit(cache=True, nogil=True, boundscheck=False)
def _numbers(out, pos, template, marks, address, size, aligned, length):
    """Pieces 0 to 3 of a JSON or CSV line, each followed by its number: address (hex), size, aligned
    size, length."""
    pos = _piece(out, pos, template, marks, 0)
    pos = _hex(out, pos, address, np.uint64(0))
    pos = _piece(out, pos, template, marks, 1)
    pos = _dec(out, pos, size, np.uint64(0))
    pos = _piece(out, pos, template, marks, 2)
    pos = _dec(out, pos, aligned, np.uint64(0))
    pos = _piece(out, pos, template, marks, 3)
    return _dec(out, pos, length, np.uint64(0))


@njit(cache=True, nogil=True, boundscheck=False)
def _sizes(length, code, base, component, align, min_size):
    size = base + component * length
    a = align[code]
    return size, max((size + a) & ~a, min_size)


@njit(cache=True, nogil=True, boundscheck=False)
def json_lines(out, first, last, units, chars, lengths, addresses, headers, heaps, template, marks, classes,
        esc1, esc2, base, component, align, min_size, texts, text_marks, n_codes, width, limit):
    pos = np.uint64(0)
    for i in range(first, last):
        code = np.uint64(heaps[i])
        size, aligned = _sizes(lengths[i], code, base, component, align, min_size)
        pos = _numbers(out, pos, template, marks, addresses[i], size, aligned, lengths[i])
        pos = _piece(out, pos, template, marks, 4)
        pos = _piece(out, pos, texts, text_marks, code)
        pos = _piece(out, pos, template, marks, 5)
        pos = _piece(out, pos, texts, text_marks, n_codes + code)
        pos = _piece(out, pos, template, marks, 6)
        pos, _ = put_value(out, pos, units, chars[i], lengths[i], classes, esc1, esc2, limit)
        pos = _piece(out, pos, template, marks, 7)
        pos = _dec(out, pos, headers[i], np.uint64(0))
        pos = _piece(out, pos, template, marks, 8)
    return pos


@njit(cache=True, nogil=True, boundscheck=False)
def table_lines(out, first, last, units, chars, lengths, addresses, headers, heaps, template, marks, classes,
        esc1, esc2, base, component, align, min_size, texts, text_marks, n_codes, width, limit):
    pos = np.uint64(0)
    for i in range(first, last):
        pos = _piece(out, pos, template, marks, 0)
        pos = _hex(out, pos, addresses[i], width)
        pos = _piece(out, pos, template, marks, 1)
        pos = _dec(out, pos, base + component * lengths[i], _8)
        pos = _piece(out, pos, template, marks, 2)
        pos, cut = put_value(out, pos, units, chars[i], lengths[i], classes, esc1, esc2, limit)
        if cut:
            pos = _piece(out, pos, template, marks, 4)
        pos = _piece(out, pos, template, marks, 3)
    return pos


@njit(cache=True, nogil=True, boundscheck=False)
def csv_lines(out, first, last, units, chars, lengths, addresses, headers, heaps, template, marks, classes,
        esc1, esc2, base, component, align, min_size, texts, text_marks, n_codes, width, limit):
    pos = np.uint64(0)
    for i in range(first, last):
        size, aligned = _sizes(lengths[i], np.uint64(heaps[i]), base, component, align, min_size)
        pos = _numbers(out, pos, template, marks, addresses[i], size, aligned, lengths[i])
        pos = _piece(out, pos, template, marks, 4)
        pos = _dec(out, pos, headers[i], np.uint64(0))
        pos = _piece(out, pos, template, marks, 5)
        quoted = holds(units, chars[i], lengths[i], 44, 34)  # a comma or a quote: csv quotes the field
        if quoted:
            out[pos] = 34
            pos += _1
        pos, _ = put_value(out, pos, units, chars[i], lengths[i], classes, esc1, esc2, limit)
        if quoted:
            out[pos] = 34
            pos += _1
        pos = _piece(out, pos, template, marks, 6)
    return pos
