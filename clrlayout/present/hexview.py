"""An annotated hex dump in WinDbg ``db`` style: 16 bytes a line, a dash after the 8th, ASCII on the right,
and under each line a row of two-letter field marks (legend printed once)."""

from __future__ import annotations

from ..objects.layout import ObjectLayout

MARKS = {
    "header-padding": "pp",
    "sync-block": "hh",
    "method-table": "mm",
    "sync-pointer": "ss",
    "length": "ll",
    "gap": "gg",
    "chars": "cc",
    "terminator": "00",
    "extra": "xx",
    "alignment": "aa",
    "element": "ee",
    "struct": "vv",
}
LEGEND = ("pp header padding, hh sync block word, mm MethodTable, ll length, cc characters, "
          "00 terminator, xx extra bytes in BaseSize, aa alignment gap, gg field gap, ss sync pointer, "
          "ee array elements, vv a struct's bytes; "
          "a field's bytes carry the number in its table row's # column")


def _ascii(b: int) -> str:
    return chr(b) if 0x20 <= b < 0x7F else "."


#: hex lines (16 bytes each) shown of one object before the middle is left out (dump --full shows all)
MAX_LINES = 64
TAIL_LINES = 8  # of those, the last lines of the object (its end: terminator, padding)


def hex_dump(layout: ObjectLayout, pointer_size: int | None = None, line: int = 16,
             max_lines: int | None = None) -> list[str]:
    """Lines of ``db``-style output for the layout's bytes, each followed by its field marks.  With
    ``max_lines``, an object of more hex lines shows its first and last lines and says what it left out."""
    out = _hex_lines(layout, pointer_size, line)
    rows = len(out) // 2
    if max_lines is None or rows <= max_lines:
        return out
    head = max_lines - TAIL_LINES
    left = rows - max_lines
    note = f"... {left:,} lines ({left * line:,} bytes) not shown; dump --full shows them"
    return out[: 2 * head] + [note] + out[-2 * TAIL_LINES :]


def _hex_lines(layout: ObjectLayout, pointer_size: int | None, line: int) -> list[str]:
    if layout.data is None or layout.address is None:
        return []
    ptr = pointer_size or layout.profile.pointer_size
    start = layout.address + layout.start_offset
    width = 16 if ptr == 8 else 8
    out = []
    first = start - start % line
    for row_at in range(first, start + len(layout.data), line):
        hexes, marks, text = [], [], []
        for i in range(line):
            at = row_at + i
            k = at - start
            sep = "-" if i == 8 else " "
            if 0 <= k < len(layout.data):
                b = layout.data[k]
                hexes.append(f"{sep}{b:02x}")
                r = layout.row_at(at - layout.address)
                marks.append(" " + ((r.mark or MARKS.get(r.role, "  ")) if r is not None else "  "))
                text.append(_ascii(b))
            else:
                hexes.append("   ")
                marks.append("   ")
                text.append(" ")
        addr = f"{row_at:0{width}x}"
        if ptr == 8:
            addr = addr[:8] + "`" + addr[8:]
        out.append(f"{addr} {''.join(hexes)}  {''.join(text)}".rstrip())
        out.append(" " * len(addr) + " " + "".join(marks).rstrip())
    return out
