"""``clrlayout refs``, ``roots`` and ``retained``: why an object is still there, and what it keeps (SOS
``!gcroot``, ``!objsize``; MAT's and dotMemory's dominator tree).  ``--roots`` chooses the root kinds."""

from __future__ import annotations

import click

from ..errors import TypeNotFound, UsageError
from .common import (
    ADDRESS,
    _open,
    _preamble,
    _report,
    assemblies_option,
    heap_option,
    index_options,
    out,
    profile_option,
    quiet_option,
    roots_option,
    warn,
)


def graph_options(f):
    for option in (quiet_option, heap_option, profile_option, assemblies_option, roots_option, index_options):
        f = option(f)
    return f


def _named(session, node_graph, node: int) -> dict:
    return _named_at(session, int(node_graph.addresses[node]), node_graph.method_table(node))


def _named_at(session, address: int, mt: int) -> dict:
    return {"address": f"{address:#x}", "type": session.type_name(mt) or f"<unknown type, MT {mt:#x}>"}


def _object_node(session, og, address: int, quiet: bool = False) -> int:
    """The node of the object that holds ``address``; an address inside an object (not at its start) is said to
    be, free space is not an object (as ``object`` says)."""
    node = og.graph.containing(address)
    if node is None:
        obj = session.object_at(address)
        if obj is not None and obj.is_free:
            raise TypeNotFound(f"{address:#x} is free space between objects (a free object at {obj.address:#x}, "
                               f"{obj.size:,} bytes): no object holds it")
        raise TypeNotFound(f"{address:#x}: no object of the GC heap holds this address"
                           + ("" if session.heap.segment_at(address) else " (it is outside every heap segment)"))
    start = int(og.graph.addresses[node])
    if start != address and not quiet:
        name = session.type_name(og.graph.method_table(node)) or "an object"
        warn(f"{address:#x} is inside {name} at {start:#x} (+{address - start:#x}): that object is shown")
    return node


@click.command()
@click.argument("file", type=click.Path(dir_okay=False))
@click.argument("address", type=ADDRESS, required=False)
@click.option("--to", "to", type=ADDRESS, default=None, metavar="ADDRESS",
              help="Only what references the object at ADDRESS (its referrers, each with the field that holds the "
                   "reference), instead of an ADDRESS argument.")
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True)
@graph_options
def refs(file, address, to, fmt, quiet, heap, profile, assemblies, kinds):
    """What the object at ADDRESS references and what references it, each with the field (or array index)
    that holds the reference, and its retained size; with --to ADDRESS, only what references it."""
    from ..present.jsonout import dumps

    if (address is None) == (to is None):
        raise UsageError("give the object's ADDRESS, or --to ADDRESS for only what references it (not both)")
    address = address if to is None else to
    with _open(file, None, profile, heap, assemblies) as session:
        og = session.object_graph(kinds)
        _preamble(session, quiet)
        g = og.graph
        node = _object_node(session, og, address, quiet)
        targets = og.indices[og.indptr[node] : og.indptr[node + 1]].tolist()
        references = []
        for t in dict.fromkeys(targets):
            for field in session.reference_fields(og, node, t):
                references.append({**_named(session, g, t), "field": field})
        referenced_by = []
        for s in dict.fromkeys(og.referrers(node).tolist()):
            for field in session.reference_fields(og, s, node):
                referenced_by.append({**_named(session, g, s), "field": field})
        _, retained, count = og.dominators()
        record = {**_named(session, g, node), "size": g.size(node), "live": bool(og.live[node]),
                  "retained_size": int(retained[node]), "retained_count": int(count[node]),
                  "references": references, "referenced_by": referenced_by}
        if to is not None:
            del record["references"]
        if fmt == "json":
            out(dumps(record))
        else:
            out(f"{record['type']} at {record['address']} (size {record['size']:,}, "
                f"{'live' if record['live'] else 'dead'}, retains {record['retained_size']:,} bytes in "
                f"{record['retained_count']:,} objects)")
            for title, rows in (() if to is not None else (("References", references),)) + \
                    (("Referenced by", referenced_by),):
                out(f"{title} ({len(rows):,}):")
                for r in rows:
                    out(f"  {r['address']:>18} {r['field']:<28} {r['type']}")
        _report(session, quiet)


def _via(field: str) -> str:
    """How the table shows the field that holds a link: ``.name``, ``.[i]``; a static by its type's name."""
    return field if field.endswith("(static)") or "thread static" in field else f".{field}"


#: a run of links of one field of one type at least this long is one line of the table
RUN = 3


def chain_lines(chain: list) -> list[str]:
    """The table's lines of a root's chain: a link a line, a run of links through one field of one type (a linked
    list: ``._next`` 598 times) one line with its count and its last object."""
    lines, i = [], 0
    while i < len(chain):
        link = chain[i]
        if "omitted" in link:
            lines.append(f"  ... {link['omitted']:,} links left out (--max-length)")
            i += 1
            continue
        j = i
        while j + 1 < len(chain) and link["field"] and "omitted" not in chain[j + 1] \
                and (chain[j + 1]["type"], chain[j + 1]["field"]) == (link["type"], link["field"]):
            j += 1
        via = f"  {_via(link['field'])}" if link["field"] else ""
        if j - i + 1 >= RUN:
            lines.append(f"  -> {link['address']} {link['type']}{via} ×{j - i + 1:,} (to {chain[j]['address']})")
            i = j + 1
        else:
            lines.append(f"  -> {link['address']} {link['type']}{via}")
            i += 1
    return lines


@click.command()
@click.argument("file", type=click.Path(dir_okay=False))
@click.argument("address", type=ADDRESS)
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True)
@click.option("--limit", type=click.IntRange(min=1), default=100, show_default=True,
              help="Paths shown at the most (one per root, nearest roots first).")
@click.option("--max-length", type=click.IntRange(min=2), default=None,
              help="Links shown of each path at the most: a longer one is cut in its middle, the links left out "
                   "counted (the table collapses runs of one field of one type either way: ._next ×598).")
@graph_options
def roots(file, address, fmt, limit, max_length, quiet, heap, profile, assemblies, kinds):
    """Why the object at ADDRESS is alive (SOS !gcroot): for each root that reaches it, a shortest chain of
    references from that root to it."""
    from ..present.jsonout import dumps

    with _open(file, None, profile, heap, assemblies) as session:
        og = session.object_graph(kinds)
        _preamble(session, quiet)
        g = og.graph
        node = _object_node(session, og, address, quiet)
        by_object: dict[int, list] = {}
        for r in og.roots.roots:
            by_object.setdefault(g.node(r.object), []).append(r)
        paths = []
        namer = None
        found = og.shortest_paths(node, limit)
        for root_node, chain in found:
            links = [{**_named(session, g, chain[0]), "field": None}]
            for prev, nxt in zip(chain, chain[1:]):
                fields = session.reference_fields(og, prev, nxt)
                links.append({**_named(session, g, nxt), "field": fields[0] if fields else None})
            if max_length is not None and len(links) > max_length:  # the first links and the last, and how many between
                head = (max_length + 1) // 2
                links = links[:head] + [{"omitted": len(links) - max_length}] + links[len(links) - (max_length - head):]
            for r in by_object.get(root_node, [])[:1]:
                root = r.as_dict()
                if r.method_desc:  # a precise stack root: its frame's method, as clrstack names it
                    from ..model.methods import MethodNamer

                    namer = namer or MethodNamer(session)
                    root["method"] = namer.name(r.method_desc)
                paths.append({"root": root, "chain": links})
        record = {**_named(session, g, node), "live": bool(found), "paths": paths}  # live: a root reaches it
        if fmt == "json":
            out(dumps(record))
        else:
            if not paths:
                out(f"{record['type']} at {record['address']} is not reachable from the roots "
                    f"({', '.join(kinds)}): it is dead")
            for p in paths:
                root = p["root"]
                where = f" of thread {root['thread']}" if "thread" in root else ""
                if "slot" in root:
                    method = root.get("method") or f"MethodDesc {root['method_desc']}"
                    where += f", frame {method} slot {root['slot']}"
                out(f"{root['kind']}{where}" + (f" at {root['address']}:" if root["address"] != "0x0" else ":"))
                for line in chain_lines(p["chain"]):
                    out(line)
            out(f"Found {len(paths):,} {'path' if len(paths) == 1 else 'paths'}.")
        _report(session, quiet)


@click.command()
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--top", type=click.IntRange(min=1), default=20, show_default=True,
              help="How many objects (or types) to list, the largest retainers first.")
@click.option("--by", "by", type=click.Choice(["object", "type"]), default="object", show_default=True)
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True)
@graph_options
def retained(file, top, by, fmt, quiet, heap, profile, assemblies, kinds):
    """Retained sizes (the dominator tree of the live heap, Semi-NCA, from a virtual root above every
    root): the bytes each object would free if it became unreachable; the largest retainers, or by type."""
    import numpy as np

    from ..present.jsonout import dumps
    from ..util.allocator import release_freed

    with _open(file, None, profile, heap, assemblies) as session:
        og = session.object_graph(kinds, exclusive=True)
        _preamble(session, quiet)
        g = og.graph
        _, retained_bytes, retained_count = og.dominators(release=True)
        live = og.live
        from ..model.heap import largest

        top_nodes = [node for node in largest(retained_bytes, top) if live[node]]
        biggest = [(int(g.addresses[node]), g.method_table(node), int(g.aligned[node]), int(retained_bytes[node]),
                    int(retained_count[node]), node) for node in top_nodes]
        by_type = og.by_type()
        from ..model.native import retained_native_of

        native = retained_native_of(session, og, top_nodes)
        totals = {"live_objects": int(live.sum()), "live_bytes": int(np.sum(g.aligned, where=live, dtype=np.int64)),
                  "roots": sorted({r.kind for r in og.roots.roots})}
        handled = [r.object for r in og.roots.roots if r.kind.endswith("handle")]  # the statics arrays among them
        del og, g, live, retained_bytes, retained_count  # the graph is this command's alone: freed before naming
        release_freed()
        statics = session.static_holders([a for a, *_ in biggest], handled)
        objects = [{**_named_at(session, address, mt), "size": size, "retained_size": kept, "retained_count": count,
                    **({"native_bytes": native[node]} if native is not None else {}),
                    **({"static": statics[address]} if address in statics else {})}
                   for address, mt, size, kept, count, node in biggest]
        # only the types that can be among the top are named (those retaining as much as the top-th, ties by name)
        least = sorted((row[2] for row in by_type.values()), reverse=True)[:top][-1:] or [0]
        types = {mt: [session.type_name(mt) or f"<unknown type, MT {mt:#x}>", *row] for mt, row in by_type.items()
                 if row[2] >= least[0]}
        type_rows = sorted(({"name": n, "count": c, "size": s, "retained_size": r} for n, c, s, r in types.values()),
                           key=lambda r: (-r["retained_size"], r["name"]))[:top]
        record = {**totals, "objects": objects, "types": type_rows}
        if fmt == "json":
            out(dumps(record))
        elif by == "object":
            out(f"Live: {record['live_objects']:,} objects, {record['live_bytes']:,} bytes (roots: {', '.join(kinds)})")
            with_native = native is not None
            out(f"{'Address':>18} {'Size':>10} {'Retained':>12} {'Objects':>9}" + (f" {'Native':>10}" if with_native
                                                                                   else "") + "  Type")
            for r in objects:
                held = "" if "static" not in r else f"  ({r['static']})" if "(thread static" in r["static"] \
                    else f"  (static {r['static']})"
                extra = f" {r['native_bytes']:>10,}" if with_native else ""
                out(f"{r['address']:>18} {r['size']:>10,} {r['retained_size']:>12,} {r['retained_count']:>9,}{extra}  "
                    f"{r['type']}{held}")
        else:
            out(f"Live: {record['live_objects']:,} objects, {record['live_bytes']:,} bytes (roots: {', '.join(kinds)})")
            out(f"{'Count':>9} {'Size':>12} {'Retained':>12}  Type")
            for r in type_rows:
                out(f"{r['count']:>9,} {r['size']:>12,} {r['retained_size']:>12,}  {r['name']}")
        _report(session, quiet)
