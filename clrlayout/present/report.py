"""``clrlayout report`` as one self-contained HTML file (no network: its styles and script are inline) or JSON.
The page: the live heap and the memory map as a bar, the suspects (each with its accumulation point, root chain and
the types under it), the types that grew, the inspections, and the dominator tree as a treemap one clicks into."""

from __future__ import annotations

import html
import json

ADDRESS_KEYS = {"address", "biggest", "arena"}
COLORS = {"gc-heap": "#4e79a7", "stack": "#f28e2b", "image": "#76b7b2", "runtime": "#59a14f",
          "mapped-file": "#edc948", "native": "#e15759"}


def _hexed(value):
    if isinstance(value, dict):
        return {k: (f"{v:#x}" if k in ADDRESS_KEYS and isinstance(v, int) else _hexed(v)) for k, v in value.items()}
    if isinstance(value, list):
        return [_hexed(v) for v in value]
    return value.hex() if isinstance(value, bytes) else value


def json_result(report: dict):
    """``report --format json``'s answer (addresses in hex, bytes in hex)."""
    from .results import Result

    return Result(list, document=_hexed(report), formats_of=("json",))


def _e(text) -> str:
    return html.escape(str(text))


def _bytes(n) -> str:
    return f"{n:,}" if isinstance(n, int) else "-"


def _table(headers, rows, cls="sortable") -> str:
    head = "".join(f"<th>{_e(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in r) + "</tr>" for r in rows)
    return f'<table class="{cls}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def as_html(report: dict, title: str) -> str:
    r = _hexed(report)
    live = r["live_bytes"]
    parts = [f"<h1>Leak report: {_e(title)}</h1>",
             f'<p class="summary">Live heap: <b>{r["live_objects"]:,}</b> objects, <b>{live:,}</b> bytes (roots: '
             f'{_e(", ".join(r["roots"]))}). Suspects retain at least {r["threshold"]:.0%} of it.</p>',
             _memory_bar(r["inspections"]["memory"])]
    parts.append('<h2 id="suspects">Suspects</h2>')
    if not r["suspects"] and not r["type_suspects"]:
        parts.append('<p class="none">No single object or type retains the threshold of the live heap.</p>')
    for i, s in enumerate(r["suspects"], 1):
        point = s["accumulation_point"]
        chain = _chain_html(s["chain"])
        root = s["root"]
        root_text = f'{_e(root["kind"])}' + (f" of thread {root['thread']}" if root and root.get("thread") else "") \
            if root else "-"
        native = f"; it owns <b>{s['native_bytes']:,}</b> native bytes" if s.get("native_bytes") else ""
        parts.append(
            f'<div class="suspect" id="suspect-{i}"><h3>Suspect {i}: <code>{_e(s["type"])}</code> at '
            f'{_e(s["address"])}</h3><p>Retains <b class="retained">{s["retained_size"]:,}</b> bytes '
            f'({s["share"]:.1%} of the live heap) in {s["retained_count"]:,} objects{native}.</p>'
            f'<p>Accumulation point: <code>{_e(point["type"])}</code> at {_e(point["address"])}, '
            f'{point["retained_size"]:,} bytes, {point["depth"]} levels down.</p>'
            f'<p>Shortest path from a root ({root_text}): {chain}</p>'
            + _table(["Type", "Objects", "Bytes"], [[f"<code>{_e(t['type'])}</code>", f"{t['count']:,}",
                                                     f"{t['bytes']:,}"] for t in s["types"]]) + "</div>")
    if r["type_suspects"]:
        parts.append("<h3>Types whose objects together retain the threshold</h3>")
        parts.append(_table(["Type", "Objects", "Retained", "Share", "Biggest"],
                            [[f"<code>{_e(t['type'])}</code>", f"{t['objects']:,}", f"{t['retained_size']:,}",
                              f"{t['share']:.1%}", _e(t["biggest"])] for t in r["type_suspects"]]))
    if r["growth"]:
        parts.append('<h2 id="growth">Growth</h2>')
        parts.append(_growth_lines(r["growth"][:8]))
        parts.append(_table(["Type", "Bytes in each dump", "+Bytes", "+Count", "+Retained", "Held by"],
                            [[f"<code>{_e(g['type'])}</code>", _e(" → ".join(f"{b:,}" for b in g["bytes"])),
                              f"{g['delta_bytes']:+,}", f"{g['delta_count']:+,}",
                              f"{g['delta_retained']:+,}" if g["delta_retained"] is not None else "-",
                              _chain_html(g["chain"]) if g.get("holder") else "-"]
                             for g in r["growth"]]))
    parts.append('<h2 id="inspections">Inspections</h2>')
    q, pinned = r["inspections"]["finalization_queue"], r["inspections"]["pinned"]
    parts.append(f"<p>Objects waiting for finalization: <b>{q['objects']:,}</b> ({q['bytes']:,} bytes). Objects "
                 f"pinned by handles (the GC cannot move them): <b>{pinned['objects']:,}</b> "
                 f"({pinned['bytes']:,} bytes).</p>")
    free = r["inspections"]["free_space"]
    if free:
        parts.append(_table(["Heap", "Generation", "Object bytes", "Free bytes", "Fragmentation"],
                            [[f["heap"], _e(f["generation"]), f"{f['object_bytes']:,}", f"{f['free_bytes']:,}",
                              f"{f['fragmentation']:.1%}"] for f in free]))
    ins = r["inspections"]
    dup = ins["duplicate_strings"]
    parts.append(f"<h3>Duplicate strings</h3><p>Copies of values another string holds too waste "
                 f"<b>{dup['wasted_bytes']:,}</b> bytes.</p>")
    if dup["values"]:
        parts.append(_table(["Value", "Count", "Wasted bytes"],
                            [[f"<code>{_e(d['value'][:80])}</code>", f"{d['count']:,}", f"{d['wasted_bytes']:,}"]
                             for d in dup["values"]]))
    sc = ins["sparse_collections"]
    parts.append(f"<h3>Collections far larger than their content</h3><p>Empty slots of lists and dictionaries at "
                 f"least {2}× their count waste <b>{sc['wasted_bytes']:,}</b> bytes.</p>")
    if sc["collections"]:
        parts.append(_table(["Collection", "Address", "Count", "Capacity", "Wasted bytes"],
                            [[f"<code>{_e(c['type'])}</code>", _e(c["address"]), f"{c['count']:,}",
                              f"{c['capacity']:,}", f"{c['wasted_bytes']:,}"] for c in sc["collections"]]))
    handlers = ins["event_handlers"]
    parts.append("<h3>Delegates with many targets (event handlers piling up)</h3>")
    parts.append(_table(["Delegate", "Address", "Targets", "Held by the static"],
                        [[f"<code>{_e(d['type'])}</code>", _e(d["address"]), f"{d['targets']:,}",
                          _e(d.get("static") or "-")] for d in handlers]) if handlers else "<p>None.</p>")
    native = r["inspections"]["native_heap"]
    if native:
        parts.append(_table(["Native memory", "Bytes"], [[_e(k.replace("_", " ")), f"{native[k]:,}"] for k in
                                                         ("in_use", "free_in_arenas", "arena_overhead",
                                                          "mmapped_chunks", "other_native")]))
    parts.extend(_native_parts(ins))
    parts.append('<h2 id="treemap-title">Dominator tree</h2><p>Click a box to look inside it; '
                 '<a href="#" id="treemap-up">up</a>.</p><div id="crumbs"></div><div id="treemap"></div>')
    tree = json.dumps(_labelled(r["tree"])).replace("</", "<\\/")
    return PAGE.format(title=_e(title), body="\n".join(parts), tree=tree)


def _native_parts(ins: dict) -> list:
    """glibc's arenas and the native leaks (Linux cores whose native heap was read); addresses and previews as
    the JSON has them (hex)."""
    parts = []
    arenas, leaks = ins.get("native_arenas"), ins.get("native_leaks")
    if arenas:
        parts.append(f"<h3>malloc arenas</h3><p>{arenas['count']:,} arenas hold <b>{arenas['system_bytes']:,}</b> "
                     f"bytes from the system (<code>MALLOC_ARENA_MAX</code> caps their number).</p>")
        parts.append(_table(["Arena", "Threads", "System bytes", "In use", "Free in bins/tcache/fastbins", "Top"],
                            [[_e(a["address"]) + (" (main)" if a["main"] else ""),
                              _e(", ".join(map(str, a["threads"])) or "-"), f"{a['system_bytes']:,}",
                              f"{a['in_use']['bytes']:,}",
                              f"{a['bins']['bytes'] + a['tcache']['bytes'] + a['fastbins']['bytes']:,}",
                              f"{a['top_bytes']:,}"] for a in arenas["largest"]]))
    if leaks:
        held = f"; {leaks['held_by_dead']:,} of them held only by dead managed objects" if leaks["held_by_dead"] else ""
        parts.append(f"<h3>Native leaks</h3><p><b>{leaks['count']:,}</b> in-use chunks, <b>{leaks['bytes']:,}</b> "
                     f"bytes, that no module's data, stack, register, other chunk or live object points at{held}.</p>")
        for missing in leaks["missing"]:
            parts.append(f'<p class="note">{_e(missing)}</p>')
        if leaks["largest"]:
            parts.append(_table(["Chunk", "Size", "First bytes"],
                                [[_e(c["address"]), f"{c['size']:,}",
                                  f"<code>{_e(_spaced(c['preview'][:64]))}</code>"] for c in leaks["largest"]]))
    return parts


def _labelled(tree: list) -> list:
    """The treemap's nodes, the box of the rest of a level named for its objects."""
    return [{**node, "type": node["type"] if node["type"] is not None else f"{node['objects']:,} more objects",
             "children": _labelled(node["children"])} for node in tree]


def _chain_html(chain: list) -> str:
    """A root chain as links: each object's type, then the field of it that holds the next."""
    return " &rarr; ".join(f'<code>{_e(link["type"])}</code>' + (f' <span class="field">{_e(link["field"])}</span>'
                                                                  if link["field"] else "")
                           for link in chain) or "(no root reaches it)"


def _spaced(hexed: str) -> str:
    return " ".join(hexed[i:i + 2] for i in range(0, len(hexed), 2))


def _growth_lines(rows: list) -> str:
    """Each growing type's live bytes across the dumps, a line each (inline SVG)."""
    steps = max(len(r["bytes"]) for r in rows)
    top = max(max(r["bytes"]) for r in rows) or 1
    w, h, pad = 640, 200, 30
    colors = ["#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7"]
    lines, legend = [], []
    for i, r in enumerate(rows):
        points = " ".join(f"{pad + (w - 2 * pad) * j / max(steps - 1, 1):.1f},"
                          f"{h - pad - (h - 2 * pad) * b / top:.1f}" for j, b in enumerate(r["bytes"]))
        color = colors[i % len(colors)]
        lines.append(f'<polyline class="growth-line" fill="none" stroke="{color}" stroke-width="2" '
                     f'points="{points}"><title>{_e(r["type"])}</title></polyline>')
        legend.append(f'<span><i style="background:{color}"></i>{_e(r["type"])}</span>')
    axis = "".join(f'<text x="{pad + (w - 2 * pad) * j / max(steps - 1, 1):.1f}" y="{h - 8}" font-size="11" '
                   f'text-anchor="middle">dump {j + 1}</text>' for j in range(steps))
    return (f'<svg id="growth-lines" width="{w}" height="{h}" role="img"><text x="{pad}" y="14" font-size="11">'
            f'live bytes (up to {top:,})</text>{"".join(lines)}{axis}</svg><p class="legend">{" ".join(legend)}</p>')


def _memory_bar(kinds: list) -> str:
    total = sum(k["bytes"] for k in kinds) or 1
    cells = "".join(f'<div class="cell" title="{_e(k["kind"])}: {k["bytes"]:,} bytes" style="width:'
                    f'{100 * k["bytes"] / total:.3f}%;background:{COLORS.get(k["kind"], "#999")}"></div>'
                    for k in kinds if k["bytes"])
    legend = " ".join(f'<span><i style="background:{COLORS.get(k["kind"], "#999")}"></i>{_e(k["kind"])} '
                      f'{k["bytes"]:,}</span>' for k in kinds if k["bytes"])
    return f'<div class="bar" id="memory-bar">{cells}</div><p class="legend">{legend}</p>'


PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>clrlayout report: {title}</title>
<style>
body {{ font: 14px/1.45 system-ui, sans-serif; margin: 2em auto; max-width: 1100px; color: #222; }}
code {{ font-size: 12px; }} table {{ border-collapse: collapse; margin: .6em 0; }}
th, td {{ border-bottom: 1px solid #ddd; padding: 2px 10px; text-align: left; }} th {{ cursor: pointer; }}
.suspect {{ border-left: 4px solid #e15759; padding: 0 1em; margin: 1em 0; background: #fafafa; }}
.field {{ color: #777; }} .bar {{ display: flex; height: 22px; border: 1px solid #ccc; }}
.legend i {{ display: inline-block; width: 10px; height: 10px; margin: 0 4px 0 12px; }}
#treemap {{ position: relative; width: 100%; height: 480px; border: 1px solid #ccc; }}
#treemap div {{ position: absolute; box-sizing: border-box; border: 1px solid #fff; overflow: hidden;
  font-size: 11px; color: #fff; padding: 2px; cursor: pointer; }}
</style></head><body>
{body}
<script id="tree-data" type="application/json">{tree}</script>
<script>
(function () {{
  var root = {{type: "live heap", children: JSON.parse(document.getElementById("tree-data").textContent)}};
  root.retained_size = root.children.reduce(function (a, c) {{ return a + c.retained_size; }}, 0);
  var path = [root], box = document.getElementById("treemap");
  var palette = ["#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7"];
  function worst(row, side) {{  // the worst aspect ratio of a row of areas laid along a side
    var s = row.reduce(function (a, r) {{ return a + r.a; }}, 0), m = 1;
    row.forEach(function (r) {{ m = Math.max(m, side * side * r.a / (s * s), s * s / (side * side * r.a)); }});
    return m;
  }}
  function layout(items, x, y, w, h, out) {{  // squarified (Bruls, Huizing and van Wijk, 2000), largest first
    var total = items.reduce(function (a, c) {{ return a + c.retained_size; }}, 0);
    if (!total || w <= 0 || h <= 0) {{ return out; }}
    var rest = items.map(function (c) {{ return {{c: c, a: c.retained_size * w * h / total}}; }});
    while (rest.length) {{
      var side = Math.min(w, h), row = [], best = Infinity;
      while (row.length < rest.length) {{
        var next = worst(row.concat([rest[row.length]]), side);
        if (row.length && next > best) {{ break; }}
        row.push(rest[row.length]); best = next;
      }}
      rest = rest.slice(row.length);
      var area = row.reduce(function (a, r) {{ return a + r.a; }}, 0), thick = area / side;
      if (w >= h) {{  // a column at the left, as tall as the box
        row.forEach(function (r) {{ out.push([r.c, x, y, thick, r.a / thick]); y += r.a / thick; }});
        y -= side; x += thick; w -= thick;
      }} else {{  // a row at the top, as wide as the box
        row.forEach(function (r) {{ out.push([r.c, x, y, r.a / thick, thick]); x += r.a / thick; }});
        x -= side; y += thick; h -= thick;
      }}
    }}
    return out;
  }}
  function draw() {{
    var node = path[path.length - 1];
    box.innerHTML = "";
    document.getElementById("crumbs").textContent = path.map(function (p) {{ return p.type; }}).join(" > ");
    layout((node.children || []).filter(function (c) {{ return c.retained_size > 0; }}), 0, 0,
           box.clientWidth, box.clientHeight, []).forEach(function (r, i) {{
      var d = document.createElement("div"), c = r[0];
      d.style.left = r[1] + "px"; d.style.top = r[2] + "px"; d.style.width = r[3] + "px"; d.style.height = r[4] + "px";
      d.style.background = palette[i % palette.length];
      d.className = "node"; d.dataset.retained = c.retained_size;
      if (c.address) {{ d.dataset.address = c.address; }}
      d.title = c.type + (c.address ? " " + c.address : "") + ": " + c.retained_size.toLocaleString() + " bytes";
      d.textContent = c.type + " (" + c.retained_size.toLocaleString() + ")";
      d.onclick = function () {{ if (c.children && c.children.length) {{ path.push(c); draw(); }} }};
      box.appendChild(d);
    }});
  }}
  document.getElementById("treemap-up").onclick = function (e) {{
    e.preventDefault(); if (path.length > 1) {{ path.pop(); draw(); }}
  }};
  document.querySelectorAll("table.sortable th").forEach(function (th, i) {{
    th.onclick = function () {{
      var table = th.closest("table"), body = table.tBodies[0];
      var col = Array.prototype.indexOf.call(th.parentNode.children, th);
      var rows = Array.prototype.slice.call(body.rows), asc = th.dataset.asc !== "1";
      function key(r) {{
        var t = r.cells[col].textContent.replace(/[,%+]/g, ""); var n = parseFloat(t); return isNaN(n) ? t : n;
      }}
      rows.sort(function (a, b) {{
        var x = key(a), y = key(b); return (x > y ? 1 : x < y ? -1 : 0) * (asc ? 1 : -1);
      }});
      rows.forEach(function (r) {{ body.appendChild(r); }}); th.dataset.asc = asc ? "1" : "0";
    }};
  }});
  draw();
}})();
</script></body></html>
"""
