"""The answers of ``refs``, ``roots`` and ``retained`` as records (what their JSON prints): an object's
references and referrers, each with the fields that hold them; the shortest chain from each root that reaches an
object (SOS's ``!gcroot``); the largest retainers of the dominator tree, by object and by type, with the static
field that holds each and the native bytes it keeps."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..errors import TypeNotFound

if TYPE_CHECKING:
    from ..graph.objectgraph import ObjectGraph
    from .dump import Dump


def _named_at(dump: Dump, address: int, mt: int) -> dict[str, Any]:
    return {"address": f"{address:#x}", "type": dump.runtime.type_name(mt) or f"<unknown type, MT {mt:#x}>"}


def _named(dump: Dump, og: ObjectGraph, node: int) -> dict[str, Any]:
    return _named_at(dump, int(og.graph.addresses[node]), og.graph.method_table(node))


def object_node(dump: Dump, og: ObjectGraph, address: int) -> tuple[int, str | None]:
    """The node of the object that holds ``address``, and (for an address inside an object, not at its start) a
    note that says which object is shown.

    Raises:
        clrlayout.errors.TypeNotFound: no object holds it, or it is free space between objects.
    """
    session = dump._session
    node = og.graph.containing(address)
    if node is None:
        obj = session.object_at(address)
        if obj is not None and obj.is_free:
            raise TypeNotFound(f"{address:#x} is free space between objects (a free object at {obj.address:#x}, "
                               f"{obj.size:,} bytes): no object holds it")
        raise TypeNotFound(f"{address:#x}: no object of the GC heap holds this address"
                           + ("" if session.heap.segment_at(address) else " (it is outside every heap segment)"))
    start = int(og.graph.addresses[node])
    note = None
    if start != address:
        name = dump.runtime.type_name(og.graph.method_table(node)) or "an object"
        note = f"{address:#x} is inside {name} at {start:#x} (+{address - start:#x}): that object is shown"
    return node, note


def refs_record(dump: Dump, og: ObjectGraph, node: int, with_references: bool = True) -> dict[str, Any]:
    """What the object at ``node`` references (``with_references``) and what references it, each with the field
    (or array index) that holds the reference; its size, liveness and retained size."""
    session = dump._session
    targets = og.indices[og.indptr[node]: og.indptr[node + 1]].tolist()
    references = []
    for t in dict.fromkeys(targets):
        for field in session.reference_fields(og, node, t):
            references.append({**_named(dump, og, t), "field": field})
    referenced_by = []
    for s in dict.fromkeys(og.referrers(node).tolist()):
        for field in session.reference_fields(og, s, node):
            referenced_by.append({**_named(dump, og, s), "field": field})
    _, retained, count = og.dominators()
    record = {**_named(dump, og, node), "size": og.graph.size(node), "live": bool(og.live[node]),
              "retained_size": int(retained[node]), "retained_count": int(count[node]),
              "references": references, "referenced_by": referenced_by}
    if not with_references:
        del record["references"]
    return record


def roots_record(dump: Dump, og: ObjectGraph, node: int, limit: int, max_length: int | None) -> dict[str, Any]:
    """For each root that reaches the object at ``node`` (``limit`` at the most, nearest first), a shortest chain
    of references from it, each link with the field that holds the next; chains longer than ``max_length`` cut
    in their middle, the links left out counted."""
    session = dump._session
    g = og.graph
    by_object: dict[int, list[Any]] = {}
    for r in og.roots.roots:
        root_node = g.node(r.object)
        if root_node is not None:
            by_object.setdefault(root_node, []).append(r)
    paths = []
    namer = None
    found = og.shortest_paths(node, limit)
    for root_node, chain in found:
        links: list[dict[str, Any]] = [{**_named(dump, og, chain[0]), "field": None}]
        for prev, nxt in zip(chain, chain[1:]):
            fields = session.reference_fields(og, prev, nxt)
            links.append({**_named(dump, og, nxt), "field": fields[0] if fields else None})
        if max_length is not None and len(links) > max_length:  # the first links and the last, and how many between
            head = (max_length + 1) // 2
            links = links[:head] + [{"omitted": len(links) - max_length}] + links[len(links) - (max_length - head):]
        for r in by_object.get(root_node, [])[:1]:
            root = r.as_dict()
            if r.method_desc:  # a precise stack root: its frame's method, as clrstack names it
                from .methods import MethodNamer

                namer = namer or MethodNamer(session)
                root["method"] = namer.name(r.method_desc)
            paths.append({"root": root, "chain": links})
    return {**_named(dump, og, node), "live": bool(found), "paths": paths}  # live: a root reaches it


def retained_record(dump: Dump, kinds: tuple[str, ...], top: int) -> tuple[dict[str, Any], bool]:
    """The live heap's totals, its ``top`` largest retainers (objects) and the ``top`` types that retain the
    most, from the dominator tree of a graph of this answer's alone (freed before the objects are named).

    Returns:
        The record, and whether it has native bytes (a dump with a native heap).
    """

    from ..util.allocator import release_freed
    from .native import retained_native_of

    session = dump._session
    og = session.object_graph(kinds, exclusive=True)
    g = og.graph
    _, retained_bytes, retained_count = og.dominators(release=True)
    top_nodes = og.largest_retainers(top)
    biggest = [(int(g.addresses[node]), g.method_table(node), int(g.aligned[node]), int(retained_bytes[node]),
                int(retained_count[node]), node) for node in top_nodes]
    by_type = og.by_type()  # the live objects by type: their sums are the live heap's
    native = retained_native_of(session, og, top_nodes)
    totals = {"live_objects": sum(row[0] for row in by_type.values()),
              "live_bytes": sum(row[1] for row in by_type.values()), "roots": sorted({r.kind for r in og.roots.roots})}
    handled = [r.object for r in og.roots.roots if r.kind.endswith("handle")]  # the statics arrays among them
    del og, g, retained_bytes, retained_count  # the graph is this answer's alone: freed before naming
    release_freed()
    statics = session.static_holders([a for a, *_ in biggest], handled)
    objects = [{**_named_at(dump, address, mt), "size": size, "retained_size": kept, "retained_count": count,
                **({"native_bytes": native[node]} if native is not None else {}),
                **({"static": statics[address]} if address in statics else {})}
               for address, mt, size, kept, count, node in biggest]
    # only the types that can be among the top are named (those retaining as much as the top-th, ties by name)
    least = sorted((row[2] for row in by_type.values()), reverse=True)[:top][-1:] or [0]
    types = {mt: [dump.runtime.type_name(mt) or f"<unknown type, MT {mt:#x}>", *row] for mt, row in by_type.items()
             if row[2] >= least[0]}
    type_rows = sorted(({"name": n, "count": c, "size": s, "retained_size": r} for n, c, s, r in types.values()),
                       key=lambda r: (-r["retained_size"], r["name"]))[:top]
    return {**totals, "objects": objects, "types": type_rows}, native is not None


def object_graph(dump: Dump, kinds: tuple[str, ...]) -> ObjectGraph:
    """The heap's object graph with the roots of ``kinds``, kept by the dump (made once per set of kinds, or
    mapped from its index).

    Raises:
        clrlayout.errors.RootsNotFound: a kind of root cannot be read from this dump.
    """
    og: ObjectGraph = dump._session.object_graph(kinds)
    return og
