"""What ``clrlayout report`` says of a dump (Eclipse MAT's Leak Suspects on clrlayout's dominator tree): the live
heap's biggest retainers as suspects — single objects the virtual root dominates directly that retain at least a
share of the live heap, and types whose such objects together do — each with its accumulation point (the biggest
dominated child followed while it keeps most of its parent), a shortest chain from a root (statics named), the
types retained under it and the native bytes it owns; with earlier dumps, the types that grew at every step;
inspections (the finalization queue, the GC heap's free space, the native heap); and the dominator tree's top
levels for the treemap.  Numbers only; the presenters format them."""

from __future__ import annotations

import numpy as np

from ..graph.roots import ROOT_KINDS

#: a child is followed down while it retains at least this share of its parent (MAT's accumulation point)
ACCUMULATION = 0.7
#: the treemap: children kept per node and levels
TREE_CHILDREN, TREE_DEPTH = 12, 3


def build(session, earlier=(), threshold: float = 0.10, kinds=ROOT_KINDS, top_types: int = 10) -> dict:
    from .heap import Heap

    og = session.object_graph(kinds)
    g, live = og.graph, og.live
    idom, retained, count = og.dominators()
    n = g.count
    live_bytes = int(np.sum(g.aligned, where=live, dtype=np.int64))
    order = np.argsort(idom, kind="stable")
    sorted_idom = idom[order]

    def children(v) -> np.ndarray:
        """The nodes ``v`` (a node, or an array of them) immediately dominates."""
        many = np.atleast_1d(np.asarray(v, dtype=idom.dtype))
        lo, hi = np.searchsorted(sorted_idom, many, "left"), np.searchsorted(sorted_idom, many, "right")
        counts = hi - lo
        total = int(counts.sum())
        offsets = np.arange(total, dtype=np.int64) - np.repeat(np.cumsum(counts) - counts, counts)
        return order[np.repeat(lo, counts) + offsets]

    heap = Heap(session)
    tops = children(n)
    tops = tops[np.argsort(-retained[tops], kind="stable")]
    limit = threshold * live_bytes
    names = {}

    def type_name(node: int) -> str:
        mt = g.method_table(node)
        if mt not in names:
            names[mt] = session.type_name(mt) or f"<unknown type, MT {mt:#x}>"
        return names[mt]

    suspects = []
    for v in tops[retained[tops] >= limit].tolist():
        suspects.append(_suspect(session, heap, g, og, retained, count, children, type_name, kinds, v, top_types,
                                 live_bytes))
    by_type: dict[str, list] = {}
    for v in tops.tolist():
        by_type.setdefault(type_name(v), []).append(v)
    type_suspects = []
    for name, nodes in by_type.items():
        total = int(retained[nodes].sum())
        if len(nodes) > 1 and total >= limit:
            biggest = max(nodes, key=lambda v: int(retained[v]))
            type_suspects.append({"type": name, "objects": len(nodes), "retained_size": total,
                                  "share": total / live_bytes if live_bytes else 0.0,
                                  "biggest": int(g.addresses[biggest])})
    type_suspects.sort(key=lambda r: -r["retained_size"])
    from .native import retained_native_of

    native = retained_native_of(session, og, [s["_node"] for s in suspects]) if suspects else None
    for s in suspects:
        node = s.pop("_node")
        s["native_bytes"] = native.get(node) if native is not None else None
    return {"live_objects": int(live.sum()), "live_bytes": live_bytes, "threshold": threshold,
            "roots": sorted({r.kind for r in og.roots.roots}), "suspects": suspects, "type_suspects": type_suspects,
            "tree": _tree(g, retained, children, type_name, tops[:TREE_CHILDREN * 4], 0),
            "growth": _growth(session, earlier, kinds), "inspections": _inspections(session, og)}


def _suspect(session, heap, g, og, retained, count, children, type_name, kinds, v, top_types, live_bytes) -> dict:
    point, steps = v, 0
    while steps < 100_000:
        kids = children(point)
        if not len(kids):
            break
        best = int(kids[np.argmax(retained[kids])])
        if retained[best] < ACCUMULATION * retained[point]:
            break
        point, steps = best, steps + 1
    # the types of everything the accumulation point dominates
    frontier, members = np.array([point]), [np.array([point])]
    while len(frontier):
        frontier = children(frontier)
        members.append(frontier)
    nodes = np.concatenate(members)
    kinds_of = g.kinds[nodes]
    sizes = np.bincount(kinds_of, weights=g.aligned[nodes].astype(np.float64), minlength=len(g.types))
    counts = np.bincount(kinds_of, minlength=len(g.types))
    top = np.argsort(-sizes)[:top_types]
    types = [{"type": session.type_name(int(g.types[k])) or f"<unknown type, MT {int(g.types[k]):#x}>",
              "count": int(counts[k]), "bytes": int(sizes[k])} for k in top if counts[k]]
    # the shortest chain from a root that is no stack word, where one reaches it: a stack is scanned
    # conservatively, and a static that holds the object says more than a stale word of a frame
    paths = heap.root_paths(int(g.addresses[point]), roots=kinds, limit=50)
    paths = sorted(paths, key=lambda p: p.root.kind.startswith("stack"))
    chain = []
    if paths:
        p = paths[0]
        chain = [{"address": o.address, "type": o.type.name, "field": f} for o, f in p.chain]
        root = {"kind": p.root.kind, "address": p.root.address, "thread": p.root.thread}
    else:
        root = None
    return {"address": int(g.addresses[v]), "type": type_name(v), "retained_size": int(retained[v]),
            "retained_count": int(count[v]), "share": int(retained[v]) / live_bytes if live_bytes else 0.0,
            "accumulation_point": {"address": int(g.addresses[point]), "type": type_name(point),
                                   "retained_size": int(retained[point]), "depth": steps},
            "root": root, "chain": chain, "types": types, "_node": v}


def _tree(g, retained, children, type_name, nodes, depth: int) -> list:
    out = []
    for v in nodes.tolist():
        kids = children(v) if depth + 1 < TREE_DEPTH else np.zeros(0, dtype=np.int64)  # noqa: SIM108
        kids = kids[np.argsort(-retained[kids], kind="stable")][:TREE_CHILDREN]
        out.append({"address": int(g.addresses[v]), "type": type_name(v), "retained_size": int(retained[v]),
                    "children": _tree(g, retained, children, type_name, kids, depth + 1)})
    return out


def _growth(session, earlier, kinds) -> list:
    """Types whose live bytes grew at every step from the earliest dump to this one (with one earlier dump: grew),
    the largest growth of retained bytes first (``diff --live --sort retained``)."""
    if not earlier:
        return []
    from .diff import compare, totals_of

    sides = [totals_of(s, True, kinds) for s in earlier] + [totals_of(session, True, kinds)]
    result = compare(sides, "retained")
    grew = [r for r in result if (r.grew_every_step if len(sides) > 2 else r.delta_bytes > 0)]
    return [{"type": r.name, "counts": list(r.counts), "bytes": list(r.sizes), "retained": list(r.retained),
             "delta_count": r.delta_count, "delta_bytes": r.delta_bytes, "delta_retained": r.delta_retained}
            for r in grew[:25]]


def _inspections(session, og) -> dict:
    from .summaries import memory_map

    finalizer = [r for r in og.roots.roots if r.kind.startswith("finalizer")]
    g = og.graph
    queued = [g.node(r.object) for r in finalizer]
    queued = [q for q in queued if q is not None]
    mm = memory_map(session)  # its walk of the heap for the free space, in parallel where it may
    free = []
    if mm.gc is not None:
        for (heap, gen), (objects, size) in sorted(mm.gc.objects.items()):
            f = mm.gc.free.get((heap, gen), [0, 0])
            free.append({"heap": heap, "generation": gen, "object_bytes": size, "free_bytes": f[1],
                         "fragmentation": f[1] / (size + f[1]) if size + f[1] else 0.0})
    kinds = mm.kinds()
    collections, delegates = _collections_and_delegates(session, og)
    pinned = {g.node(r.object) for r in og.roots.roots if "pinned" in r.kind} - {None}
    return {"finalization_queue": {"objects": len(queued), "bytes": int(sum(int(g.aligned[q]) for q in queued))},
            "pinned": {"objects": len(pinned), "bytes": int(sum(int(g.aligned[p]) for p in pinned))},
            "duplicate_strings": _duplicates(session, og), "sparse_collections": collections,
            "event_handlers": delegates,
            "free_space": free,
            "memory": [{"kind": k, "ranges": v[0], "bytes": v[1]} for k, v in kinds.items()],
            "native_heap": mm.native_heap}


#: rows kept per inspection; a collection is sparse when its capacity is at least this many times its count
TOP, SPARSE = 10, 2


def _duplicates(session, og) -> dict:
    """Live strings whose value another live string has too: the bytes the copies waste, the values that waste
    most (``stats --type System.String --duplicates --live``)."""
    from ..analyses.stats import DuplicateCollector

    live = og.graph.addresses[og.live]
    dups = DuplicateCollector(session.profile, session.dump.memory)
    try:
        for batch in session.iter_batches():
            at = np.searchsorted(live, batch.addresses)
            keep = at < len(live)
            keep[keep] = live[at[keep]] == batch.addresses[keep]
            dups.add(batch.select(keep))
        found, wasted = dups.finish()
    finally:
        dups.close()
    return {"wasted_bytes": int(wasted), "values": [d.as_dict() for d in found[:TOP]]}


def _is_delegate(session, mt: int) -> bool:
    """Whether System.MulticastDelegate is among the type's parents (by its MethodTables' parent chain)."""
    seen = 0
    while mt and seen < 64:
        record = session.mts.get(mt)
        if record is None:
            return False
        mt, seen = record.parent, seen + 1
        if mt and session.type_name(mt) == "System.MulticastDelegate":
            return True
    return False


def _biggest_target(og, nodes: np.ndarray) -> np.ndarray:
    """The aligned size of the biggest object each of ``nodes`` references (0: none), from the graph's edges."""
    if not len(nodes):
        return np.zeros(0, dtype=np.int64)
    indptr, indices, aligned = og.indptr, og.indices, og.graph.aligned
    lo, hi = indptr[nodes].astype(np.int64), indptr[nodes + 1].astype(np.int64)
    counts = hi - lo
    out = np.zeros(len(nodes), dtype=np.int64)
    has = counts > 0
    if has.any():
        total = int(counts.sum())
        offsets = np.arange(total, dtype=np.int64) - np.repeat(np.cumsum(counts) - counts, counts)
        sizes = aligned[indices[np.repeat(lo, counts) + offsets]].astype(np.int64)
        starts = (np.cumsum(counts) - counts)[has]
        out[has] = np.maximum.reduceat(sizes, starts)
    return out


def _collections_and_delegates(session, og) -> tuple[dict, list]:
    """Live ``List<T>`` and ``Dictionary<K,V>`` whose capacity is far above their count (the bytes of the empty
    slots), and live delegates with many targets (``_invocationCount``: handlers piling up on an event)."""
    g, live, space = og.graph, og.live, session.dump.memory
    ptr = space.pointer_size
    sparse, delegates = [], []
    wasted_total = 0
    for kind, mt in enumerate(g.types.tolist()):
        name = session.type_name(mt) or ""
        collection = name.startswith(("System.Collections.Generic.List`1[", "System.Collections.Generic.Dictionary`2["))
        if not collection and not _is_delegate(session, mt):
            continue  # a type's layout is worked out only for the types looked at
        layout = session.type_layout(mt)
        if layout is None:
            continue
        fields = {f.name: f for f in layout.fields}
        is_list = name.startswith("System.Collections.Generic.List`1[") and {"_items", "_size"} <= set(fields)
        is_dict = name.startswith("System.Collections.Generic.Dictionary`2[") and \
            {"_entries", "_count", "_freeCount"} <= set(fields)
        is_delegate = {"_invocationList", "_invocationCount"} <= set(fields)
        if not (is_list or is_dict or is_delegate):
            continue
        nodes = np.flatnonzero((g.kinds == kind) & live)
        nodes = nodes[_biggest_target(og, nodes) >= (3 * ptr + 2 * ptr if is_delegate else 3 * ptr + 16 * 4)]
        for node in nodes.tolist():  # only those that reference an array big enough to matter
            address = int(g.addresses[node])

            def word(field: str, size: int = ptr) -> int:
                data = space.try_read(address + fields[field].offset, size)
                return int.from_bytes(data, "little") if data else 0

            if is_delegate:
                targets = word("_invocationCount")
                if word("_invocationList") and targets >= 2:
                    delegates.append({"address": address, "type": name, "targets": targets})
                continue
            array = word("_items" if is_list else "_entries")
            if not array:
                continue
            length = space.try_read(array + ptr, 4)
            capacity = int.from_bytes(length, "little") if length else 0
            count = word("_size", 4) if is_list else word("_count", 4) - word("_freeCount", 4)
            element = session.mts.get((space.try_read_pointer(array) or 0) & ~3)
            slot = getattr(element, "component_size", 0) or 0
            if capacity >= 16 and capacity >= SPARSE * max(count, 1):
                wasted = (capacity - count) * slot
                wasted_total += wasted
                sparse.append({"address": address, "type": name, "count": count, "capacity": capacity,
                               "wasted_bytes": wasted})
    sparse.sort(key=lambda r: -r["wasted_bytes"])
    delegates.sort(key=lambda r: -r["targets"])
    statics = session.static_holders([r["address"] for r in delegates[:TOP]],
                                     [r.object for r in og.roots.roots if r.kind.endswith("handle")])
    for r in delegates[:TOP]:
        r["static"] = statics.get(r["address"])
    return {"wasted_bytes": wasted_total, "collections": sparse[:TOP]}, delegates[:TOP]
