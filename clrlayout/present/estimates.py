"""``clrlayout layout``: string layouts per profile variant, as tables or JSON."""

from __future__ import annotations

from ..objects.layout import ObjectLayout
from . import jsonout
from .text import layout_table, table

FIELD_ROWS = [("header-padding", "header padding"), ("sync-block", "sync block word"), ("method-table", "MethodTable*"),
              ("sync-pointer", "lock word (Mono)"), ("length", "length"), ("chars", "characters"),
              ("terminator", "terminator"), ("extra", "extra bytes (BaseSize)"), ("alignment", "alignment padding")]


def word_read(lay: ObjectLayout) -> str:
    past_size, past_alloc = lay.word_read_overrun()
    if not past_size:
        return "safe"
    return f"+{past_size} B, into next object" if past_alloc else f"+{past_size} B, in padding"


def single_lines(layouts: list[tuple[str, ObjectLayout]]) -> list[str]:
    lines = []
    for label, lay in layouts:
        lines += layout_table(lay, f"System.String of length {lay.length}, {label} (profile {lay.profile.name}):")
        lines.append(f"Word reads of the characters ({lay.profile.pointer_size} bytes at a time): {word_read(lay)}")
        lines.append("")
    if len(layouts) > 1:
        lines += side_by_side(layouts)
    return lines


def side_by_side(layouts: list[tuple[str, ObjectLayout]]) -> list[str]:
    headers = [""] + [label for label, _ in layouts]
    rows = []
    for role, name in FIELD_ROWS:
        sizes = [sum(r.size for r in lay.rows if r.role == role) for _, lay in layouts]
        if any(sizes):
            rows.append([name] + [f"{s}" if s else "-" for s in sizes])
    rows.append(["SOS size"] + [str(lay.sos_size) for _, lay in layouts])
    rows.append(["aligned size"] + [str(lay.aligned_size) for _, lay in layouts])
    rows.append(["space lost"] + [str(sum(lay.losses())) for _, lay in layouts])
    rows.append(["word reads"] + [word_read(lay) for _, lay in layouts])
    names = [lay.profile.string.length_field for _, lay in layouts]
    if len(set(names)) > 1:  # the same bytes under other names (.NET Core 2.0 and 2.1)
        rows.append(["length field name"] + names)
    return ["Side by side (bytes):"] + table(headers, rows, "l" + "r" * len(layouts), indent="  ")


def range_lines(layouts: list[tuple[str, ObjectLayout]]) -> list[str]:
    rows = []
    for label, lay in layouts:
        overhead = 100.0 * (lay.aligned_size - 2 * lay.length) / lay.aligned_size
        pad = sum(r.size for r in lay.rows if r.role == "alignment")
        rows.append([lay.length, label, lay.sos_size, lay.aligned_size, pad, f"{overhead:.1f}%", word_read(lay)])
    return table(["LEN", "PROFILE", "SOS SIZE", "ALIGNED", "PADDING", "OVERHEAD", "WORD READS"], rows, "rlrrrrl")


def layout_record(label: str, lay: ObjectLayout) -> dict:
    past_size, past_alloc = lay.word_read_overrun()
    return {"profile": lay.profile.name, "label": label, "flavor": lay.profile.flavor, "arch": lay.profile.arch,
            "length": lay.length, **jsonout.layout_record(lay),
            "word_read_overrun": {"past_size": past_size, "past_allocation": past_alloc}}
