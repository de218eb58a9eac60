"""What ``clrlayout report`` says of a dump (Eclipse MAT's Leak Suspects on clrlayout's dominator tree): the live
heap's biggest retainers as suspects — single objects the virtual root dominates directly that retain at least a
share of the live heap, and types whose such objects together do — each with its accumulation point (the biggest
dominated child followed while it keeps most of its parent), a shortest chain from a root (statics named), the
types retained under it and the native bytes it owns; with earlier dumps, the types that grew at every step;
inspections (the finalization queue, the GC heap's free space, the native heap); and the dominator tree's top
levels for the treemap.  Numbers only; the presenters format them.  Where the dump has an index, a report (of one
dump, its roots, threshold and depth) is kept beside it as a note, as MAT keeps its reports: asked again, it is
read, not computed again."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ..graph.roots import ROOT_KINDS

if TYPE_CHECKING:
    from ..graph.build import HeapGraph
    from ..graph.objectgraph import ObjectGraph
    from ..session import Session
    from .dump import Dump
    from .heap import Heap

#: the nodes a node (or an array of nodes) immediately dominates; a node's type name
Children = Callable[[Any], np.ndarray]
Namer = Callable[[int], str]
Row = dict[str, Any]

#: a child is followed down while it retains at least this share of its parent (MAT's accumulation point)
ACCUMULATION = 0.7
#: the treemap: children kept per node and levels
TREE_CHILDREN, TREE_DEPTH = 12, 3


def build(dump: Dump, earlier_dumps: Sequence[Dump] = (), threshold: float = 0.10,
          kinds: tuple[str, ...] = ROOT_KINDS, top_types: int = 10) -> Row:
    """The report of ``dump`` (with the growth across ``earlier_dumps`` of the same process, oldest first).

    Args:
        threshold: the share of the live heap a suspect retains at least.
        kinds: the root kinds.
        top_types: the types listed under each suspect.
    """
    session = dump._session
    earlier = [d._session for d in earlier_dumps]
    og = session.object_graph(kinds)
    note = None
    if og.layers is not None and not earlier:  # kept beside the dump's index, as MAT keeps its reports
        from ..graph.index import Note

        note = Note(og.layers.path, f"report-{og.roots_key}-{threshold!r}-{top_types}", session.warnings.append)
        kept = note.load()
        if isinstance(kept, dict):
            return _decoded(kept)  # type: ignore[no-any-return]
    before = (len(session.warnings), session.findings.count)
    found = _build(session, og, earlier, threshold, kinds, top_types)
    if note is not None and (len(session.warnings), session.findings.count) == before:  # a clean run's only
        kept = _encoded(found)
        if _decoded(json.loads(json.dumps(kept))) == found:  # what the note gives back is the report itself
            note.save(kept)
    return found


def _encoded(value: Any) -> Any:
    """A report as JSON holds it: bytes as {"$bytes": hex}."""
    if isinstance(value, bytes):
        return {"$bytes": value.hex()}
    if isinstance(value, dict):
        return {k: _encoded(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_encoded(v) for v in value]
    return value


def _decoded(value: Any) -> Any:
    if isinstance(value, dict):
        if set(value) == {"$bytes"} and isinstance(value["$bytes"], str):
            return bytes.fromhex(value["$bytes"])
        return {k: _decoded(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_decoded(v) for v in value]
    return value


def _build(session: Session, og: ObjectGraph, earlier: Sequence[Session], threshold: float,
           kinds: tuple[str, ...], top_types: int) -> Row:
    from .heap import Heap

    idom, retained, count = og.dominators()  # first: liveness then comes from the tree, with no walk of its own
    g, live = og.graph, og.live
    n = g.count
    live_bytes = int(np.sum(g.aligned, where=live, dtype=np.int64))
    order = np.argsort(idom, kind="stable")
    sorted_idom = idom[order]

    def children(v: Any) -> np.ndarray:
        """The nodes ``v`` (a node, or an array of them) immediately dominates."""
        many = np.atleast_1d(np.asarray(v, dtype=idom.dtype))
        lo, hi = np.searchsorted(sorted_idom, many, "left"), np.searchsorted(sorted_idom, many, "right")
        counts = hi - lo
        total = int(counts.sum())
        offsets = np.arange(total, dtype=np.int64) - np.repeat(np.cumsum(counts) - counts, counts)
        found: np.ndarray = order[np.repeat(lo, counts) + offsets]
        return found

    heap = Heap(session)
    tops = _through_statics(session, g, children(n), children)
    tops = tops[np.argsort(-retained[tops], kind="stable")]
    limit = threshold * live_bytes
    names: dict[int, str] = {}

    def type_name_of_kind(kind: int) -> str:
        if kind not in names:
            mt = int(g.types[kind])
            names[kind] = session.type_name(mt) or f"<unknown type, MT {mt:#x}>"
        return names[kind]

    def type_name(node: int) -> str:
        return type_name_of_kind(int(g.kinds[node]))

    suspects = []
    for v in tops[retained[tops] >= limit].tolist():
        suspects.append(_suspect(session, heap, g, og, retained, count, children, type_name, kinds, v, top_types,
                                 live_bytes))
    # the roots' objects by type: a type whose objects together retain the share is a suspect (MAT's "many
    # small holders"); types are grouped by MethodTable first, then by name (one name, several MethodTables)
    kinds_of = g.kinds[tops]
    per_kind = np.bincount(kinds_of, weights=retained[tops].astype(np.float64), minlength=len(g.types))
    objects_of = np.bincount(kinds_of, minlength=len(g.types))
    by_type: dict[str, list[int]] = {}
    for k in np.flatnonzero(objects_of).tolist():
        by_type.setdefault(type_name_of_kind(k), []).append(k)
    type_suspects: list[Row] = []
    for name, ks in by_type.items():
        total, objects = int(sum(per_kind[k] for k in ks)), int(sum(objects_of[k] for k in ks))
        if objects > 1 and total >= limit:
            mine = tops[np.isin(kinds_of, ks)]
            biggest = int(mine[np.argmax(retained[mine])])
            type_suspects.append({"type": name, "objects": objects, "retained_size": total,
                                  "share": total / live_bytes if live_bytes else 0.0,
                                  "biggest": int(g.addresses[biggest])})
    type_suspects.sort(key=lambda r: -int(r["retained_size"]))
    from .native import retained_native_of

    native = retained_native_of(session, og, [s["_node"] for s in suspects]) if suspects else None
    for s in suspects:
        node = s.pop("_node")
        s["native_bytes"] = native.get(node) if native is not None else None
    return {"live_objects": int(live.sum()), "live_bytes": live_bytes, "threshold": threshold,
            "roots": sorted({r.kind for r in og.roots.roots}), "suspects": suspects, "type_suspects": type_suspects,
            "tree": _tree(g, retained, children, type_name, tops, 0, TREE_CHILDREN * 4),
            "growth": _growth(session, earlier, kinds, og, idom, retained, type_name, type_name_of_kind, heap),
            "inspections": _inspections(session, og)}


def _through_statics(session: Session, g: HeapGraph, tops: np.ndarray, children: Children) -> np.ndarray:
    """The objects the virtual root dominates, the runtime's statics arrays replaced by what they dominate: a
    static field is a root to its reader (MAT's class statics), not a part of one object[] that would retain
    every static's graph (before .NET 9 one such array holds every static of a module)."""
    if session.profile.method_table is None:
        return tops
    nodes = [g.node(a) for a in session.statics().arrays()]
    arrays = np.array(sorted({v for v in nodes if v is not None}), dtype=tops.dtype)
    if not len(arrays):
        return tops
    inside = np.isin(tops, arrays)
    through: np.ndarray = np.concatenate([tops[~inside], children(tops[inside])])
    return through


def _suspect(session: Session, heap: Heap, g: HeapGraph, og: ObjectGraph, retained: np.ndarray, count: np.ndarray,
             children: Children, type_name: Namer, kinds: tuple[str, ...], v: int, top_types: int,
             live_bytes: int) -> Row:
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
    root, chain = _chain(heap, int(g.addresses[point]), kinds)
    return {"address": int(g.addresses[v]), "type": type_name(v), "retained_size": int(retained[v]),
            "retained_count": int(count[v]), "share": int(retained[v]) / live_bytes if live_bytes else 0.0,
            "accumulation_point": {"address": int(g.addresses[point]), "type": type_name(point),
                                   "retained_size": int(retained[point]), "depth": steps},
            "root": root, "chain": chain, "types": types, "_node": v}


def _chain(heap: Heap, address: int, kinds: tuple[str, ...]) -> tuple[Row | None, list[Row]]:
    """(root, chain): the shortest chain from a root to the object, from a root that is no stack word where one
    reaches it (a stack is scanned conservatively, and a static that holds the object says more than a stale word
    of a frame); (None, []) where no root reaches it."""
    paths = heap.root_paths(address, roots=kinds, limit=50)
    paths = sorted(paths, key=lambda p: p.root.kind.startswith("stack"))
    if not paths:
        return None, []
    p = paths[0]
    return ({"kind": p.root.kind, "address": p.root.address, "thread": p.root.thread},
            [{"address": o.address, "type": o.type.name, "field": f} for o, f in p.chain])


def _tree(g: HeapGraph, retained: np.ndarray, children: Children, type_name: Namer, nodes: np.ndarray, depth: int,
          keep: int = TREE_CHILDREN) -> list[Row]:
    """The dominator tree's top levels for the treemap: the ``keep`` biggest of ``nodes`` (sorted, biggest
    first), each with its biggest children, and the rest summed in one box (no address, no type: ``objects`` of
    them)."""
    out: list[Row] = []
    for v in nodes[:keep].tolist():
        kids = children(v) if depth + 1 < TREE_DEPTH else np.zeros(0, dtype=np.int64)
        kids = kids[np.argsort(-retained[kids], kind="stable")]
        out.append({"address": int(g.addresses[v]), "type": type_name(v), "retained_size": int(retained[v]),
                    "children": _tree(g, retained, children, type_name, kids, depth + 1)})
    rest = nodes[keep:]
    if len(rest):
        out.append({"address": None, "type": None, "objects": len(rest), "retained_size": int(retained[rest].sum()),
                    "children": []})
    return out


def _growth(session: Session, earlier: Sequence[Session], kinds: tuple[str, ...], og: ObjectGraph, idom: np.ndarray,
            retained: np.ndarray, type_name: Namer, kind_name: Namer, heap: Heap) -> list[Row]:
    """Types whose live bytes grew at every step from the earliest dump to this one (with one earlier dump: grew),
    the largest growth of retained bytes first (``diff --live --sort retained``), 25 at the most; for each, the
    holder in this dump — the nearest object that dominates at least half of the type's live bytes (``how``:
    "dominator"; MAT's accumulation point of a type), else the biggest instance ("biggest") — and its chain from a
    root."""
    if not earlier:
        return []
    from .diff import _session_totals, compare

    sides = [_session_totals(s, True, kinds) for s in earlier] + [_session_totals(session, True, kinds)]
    result = compare(sides, "retained")
    grew = [r for r in result if (r.grew_every_step if len(sides) > 2 else r.delta_bytes > 0)]
    rows: list[Row] = [{"type": r.name, "counts": list(r.counts), "bytes": list(r.sizes), "retained": list(r.retained),
             "delta_count": r.delta_count, "delta_bytes": r.delta_bytes, "delta_retained": r.delta_retained,
             "holder": None, "root": None, "chain": []}
            for r in grew[:25]]
    g, n = og.graph, og.graph.count
    kinds_named: dict[str, list[int]] = {}
    for k in range(len(g.types)):
        kinds_named.setdefault(kind_name(k), []).append(k)
    by_kind = np.flatnonzero(og.live)  # the live nodes grouped by kind, once for every row
    by_kind = by_kind[np.argsort(g.kinds[by_kind], kind="stable")]
    kind_bounds = np.searchsorted(g.kinds[by_kind], np.arange(len(g.types) + 1))
    for row in rows:
        ks = kinds_named.get(row["type"], [])
        nodes = np.concatenate([by_kind[kind_bounds[k]:kind_bounds[k + 1]] for k in ks]) if ks else by_kind[:0]
        if not len(nodes):
            continue
        holder, how = _holder(idom, nodes, g.aligned[nodes].astype(np.float64), n), "dominator"
        if holder == n:  # nothing below the roots holds most of them: the biggest one
            holder, how = int(nodes[np.argmax(retained[nodes])]), "biggest"
        row["holder"] = {"address": int(g.addresses[holder]), "type": type_name(holder),
                         "retained_size": int(retained[holder]), "how": how}
        row["root"], row["chain"] = _chain(heap, int(g.addresses[holder]), kinds)
    return rows


def _holder(idom: np.ndarray, nodes: np.ndarray, weights: np.ndarray, root: int, steps: int = 256) -> int:
    """The nearest common holder of ``nodes``: their dominators, climbed a level at a time until one of them
    dominates at least half of the nodes' ``weights`` (``root``, the virtual root, where none does)."""
    total = float(weights.sum())
    at = np.array(nodes, dtype=np.int64)
    for _ in range(steps):
        inner = at != root  # the virtual root has no dominator: what reached it stays there
        at[inner] = idom[at[inner]]
        doms, inverse = np.unique(at, return_inverse=True)
        held = np.bincount(inverse, weights=weights)
        best = int(np.argmax(held))
        if held[best] * 2 >= total or not inner.any():
            return int(doms[best])
    return root


def _inspections(session: Session, og: ObjectGraph) -> Row:
    from .summaries import memory_map

    finalizer = [r for r in og.roots.roots if r.kind.startswith("finalizer")]
    g = og.graph
    queued = [g.node(r.object) for r in finalizer]
    queued = [q for q in queued if q is not None]
    of_window, absorb, duplicates = _live_duplicates(session, og)
    # one walk of the heap, in parallel where it may: the free space, and the live duplicate strings
    mm = memory_map(session, also=(of_window, absorb))
    free: list[Row] = []
    if mm.gc is not None:
        for (heap, gen), (_, size) in sorted(mm.gc.objects.items()):
            f = mm.gc.free.get((heap, gen), [0, 0])
            free.append({"heap": heap, "generation": gen, "object_bytes": size, "free_bytes": f[1],
                         "fragmentation": f[1] / (size + f[1]) if size + f[1] else 0.0})
    kinds = mm.kinds()
    collections, delegates = _collections_and_delegates(session, og)
    pinned = {g.node(r.object) for r in og.roots.roots if "pinned" in r.kind} - {None}
    return {"finalization_queue": {"objects": len(queued), "bytes": int(sum(int(g.aligned[q]) for q in queued))},
            "pinned": {"objects": len(pinned), "bytes": int(sum(int(g.aligned[p]) for p in pinned))},
            "duplicate_strings": duplicates(mm.gc is not None), "sparse_collections": collections,
            "event_handlers": delegates,
            "free_space": free,
            "memory": [{"kind": k, "ranges": v[0], "bytes": v[1]} for k, v in kinds.items()],
            "native_heap": mm.native_heap, **_native(session)}


def _native(session: Session) -> Row:
    """glibc's arenas (the largest by system bytes) and the native leaks (in-use chunks nothing reaches: no
    module's data, stack, register, other chunk or live managed object), the largest first (``native
    --leaks``); nothing where the dump has no native heap read."""
    from .native import native_heap_of

    view = native_heap_of(session)
    if view is None:
        return {"native_arenas": None, "native_leaks": None}
    arenas = sorted(view.arenas, key=lambda a: -a["system_bytes"])
    return {"native_arenas": {"count": len(arenas), "system_bytes": sum(a["system_bytes"] for a in arenas),
                              "largest": arenas[:TOP]},
            "native_leaks": view.leak_summary(TOP)}


#: rows kept per inspection; a collection is sparse when its capacity is at least this many times its count
TOP, SPARSE = 10, 2


def _live_duplicates(session: Session, og: ObjectGraph) -> tuple[Callable[[Any], Any], Callable[[Any], None],
                                                                  Callable[[bool], Row]]:
    """Live strings whose value another live string has too (``stats --type System.String --duplicates --live``),
    collected window by window: (of a window, absorb, finish) for :func:`memory_map`'s walk of the heap;
    ``finish(walked)`` gives the bytes the copies waste and the values that waste most (``walked``: whether the map
    walked the heap; if not, the strings are found on their own)."""
    from ..analyses.stats import DuplicateCollector

    live = og.graph.addresses[og.live]

    def live_only(batch: Any) -> Any:
        at = np.searchsorted(live, batch.addresses)
        keep = at < len(live)
        keep[keep] = live[at[keep]] == batch.addresses[keep]
        return batch.select(keep)

    def of_window(win: Any) -> Any:
        part = DuplicateCollector(session.profile, None)
        for batch in session.window_batches(win):
            part.add(live_only(batch))
        return part

    dups = DuplicateCollector(session.profile, session.dump.memory)

    def finish(walked: bool) -> Row:
        try:
            if not walked:  # the map made no walk of the heap: the strings on their own
                for batch in session.iter_batches():
                    dups.add(live_only(batch))
            found, wasted = dups.finish()
        finally:
            dups.close()
        return {"wasted_bytes": int(wasted), "values": [d.as_dict() for d in found[:TOP]]}

    return of_window, dups.merge, finish


def _is_delegate(session: Session, mt: int) -> bool:
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


def _biggest_target(og: ObjectGraph, nodes: np.ndarray) -> np.ndarray:
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


def _collections_and_delegates(session: Session, og: ObjectGraph) -> tuple[Row, list[Row]]:
    """Live ``List<T>`` and ``Dictionary<K,V>`` whose capacity is far above their count (the bytes of the empty
    slots), and live delegates with many targets (``_invocationCount``: handlers piling up on an event)."""
    g, live, space = og.graph, og.live, session.dump.memory
    ptr = space.pointer_size
    sparse: list[Row] = []
    delegates: list[Row] = []
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
        if not len(nodes):  # only those that reference an array big enough to matter
            continue
        addresses = g.addresses[nodes].astype(np.uint64)

        def words(field: str, size: int = ptr, at: np.ndarray = addresses, laid: dict[str, Any] = fields) -> np.ndarray:
            got: np.ndarray = space.gather(at + np.uint64(laid[field].offset), size).astype(np.int64)
            return got

        if is_delegate:
            targets, lists = words("_invocationCount"), words("_invocationList")
            for i in np.flatnonzero((lists != 0) & (targets >= 2)).tolist():
                delegates.append({"address": int(addresses[i]), "type": name, "targets": int(targets[i])})
            continue
        arrays = words("_items" if is_list else "_entries").astype(np.uint64)
        if is_list:
            counts = words("_size", 4)
        else:
            counts = words("_count", 4) - words("_freeCount", 4)
        has = arrays != 0
        capacities = np.where(has, space.gather(arrays + np.uint64(ptr), 4).astype(np.int64), 0)
        elements = np.where(has, space.gather(arrays, ptr), 0) & ~np.uint64(3)
        for i in np.flatnonzero(has & (capacities >= 16) & (capacities >= SPARSE * np.maximum(counts, 1))).tolist():
            element = session.mts.get(int(elements[i]))
            wasted = int(capacities[i] - counts[i]) * (getattr(element, "component_size", 0) or 0)
            wasted_total += wasted
            sparse.append({"address": int(addresses[i]), "type": name, "count": int(counts[i]),
                           "capacity": int(capacities[i]), "wasted_bytes": wasted})
    sparse.sort(key=lambda r: -int(r["wasted_bytes"]))
    delegates.sort(key=lambda r: -int(r["targets"]))
    statics = session.static_holders([r["address"] for r in delegates[:TOP]],
                                     [r.object for r in og.roots.roots if r.kind.endswith("handle")])
    for r in delegates[:TOP]:
        r["static"] = statics.get(r["address"])
    return {"wasted_bytes": wasted_total, "collections": sparse[:TOP]}, delegates[:TOP]
