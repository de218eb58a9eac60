"""Plain-text tables: stable columns for people and for scripts (no colour, no box drawing)."""

from __future__ import annotations

from ..objects.layout import ObjectLayout, quote
from ..objects.strings import StringObject


def table(headers: list[str], rows: list[list], align: str | None = None, indent: str = "") -> list[str]:
    """Columns sized to their widest cell; ``align`` is one of l/r per column (numbers default right)."""
    cells = [[str(c) for c in r] for r in rows]
    widths = [len(h) for h in headers]
    for r in cells:
        for i, c in enumerate(r):
            widths[i] = max(widths[i], len(c))
    if align is None:
        align = "".join("r" if rows and isinstance(rows[0][i], int) else "l" for i in range(len(headers)))

    def fmt(r):
        parts = [c.rjust(w) if a == "r" else c.ljust(w) for c, w, a in zip(r, widths, align)]
        return (indent + " ".join(parts)).rstrip()

    return [fmt(headers)] + [fmt(r) for r in cells]


def hexaddr(value: int, pointer_size: int) -> str:
    return f"{value:0{2 * pointer_size}x}"


#: characters of a value a table row shows before it cuts it with "…" (dump --full shows them all)
VALUE_LIMIT = 80


def display_value(value: str | None, limit: int | None = VALUE_LIMIT) -> str:
    """A value as a table shows it: a C#-like literal (quote()), cut after ``limit`` characters (None: whole)."""
    if value is None:
        return ""
    text = value if limit is None or len(value) <= limit else value[:limit] + "\u2026"
    return quote(text)


def dumpheap_header(pointer_size: int) -> str:
    w = 2 * pointer_size
    return f"{'Address':>{w}} {'MT':>{w}} {'Size':>8}  Value"


def dumpheap_line(s: StringObject, pointer_size: int, value_limit: int | None = VALUE_LIMIT) -> str:
    """One row like SOS !dumpheap (Address, MT, Size) plus the value."""
    return (f"{hexaddr(s.address, pointer_size)} {hexaddr(s.method_table, pointer_size)} {s.size:8d}  "
            f"{display_value(s.value, value_limit)}")


def objects_header(pointer_size: int) -> str:
    w = 2 * pointer_size
    return f"{'Address':>{w}} {'MT':>{w}} {'Size':>8}  Type"


def object_line(obj, pointer_size: int) -> str:
    """One row like SOS !dumpheap -type (Address, MT, Size) plus the name (and an array's length)."""
    name = obj.type_name or f"<unknown type, MT {obj.method_table:#x}>"
    if obj.type.component_size and obj.type.kind == "array":
        name += f" (length {obj.count:,})"
    return f"{hexaddr(obj.address, pointer_size)} {hexaddr(obj.method_table, pointer_size)} {obj.size:8d}  {name}"


def counted(n: int, noun: str, plural: str | None = None) -> str:
    """``1 object``, ``2 objects``, ``1,024 bytes``: a count with its noun in the right number."""
    return f"{n:,} {noun if n == 1 else plural or noun + 's'}"


def total_line(count: int, size: int, aligned: int, noun: tuple = ("string", "strings")) -> str:
    return f"Total {counted(count, *noun)}, {size:,} bytes (SOS size), {aligned:,} bytes on the heap (aligned)"


def layout_table(layout: ObjectLayout, title: str) -> list[str]:
    """JOL-style: OFF SZ TYPE DESCRIPTION VALUE, then the instance size and the space losses."""
    with_values = any(r.value is not None for r in layout.rows)
    with_marks = any(r.mark is not None for r in layout.rows)
    headers = ["OFF", "SZ", "TYPE", "DESCRIPTION"] + (["VALUE"] if with_values else []) + (["#"] if with_marks else [])
    rows = []
    for r in layout.rows:
        row = [r.offset, r.size, r.type, r.description]
        if with_values:
            row.append(r.value or "")
        if with_marks:
            row.append(r.mark or "")
        rows.append(row)
    lines = [title]
    lines += table(headers, rows, "rrll" + "l" * with_values + "l" * with_marks, indent="  ")
    internal, external = layout.losses()
    base = layout.profile.string.base_size if layout.base_size is None else layout.base_size
    parts = f"BaseSize {base}" + (f" + {layout.component_size} x {layout.length}" if layout.component_size else "")
    lines.append(f"Instance size: {layout.aligned_size} bytes (SOS size {layout.sos_size}: {parts})")
    lines.append(f"Space losses: {internal} bytes internal + {external} bytes external = "
                 f"{internal + external} bytes total")
    return lines
