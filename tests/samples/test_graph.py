"""The object graph (issue 34): references from the GC's own descriptions, roots, reachability, retained sizes.

On the samples: every reference is null or the start of an object (and reading them half a word later
breaks that: the check has teeth), and the dominator tree equals a second, simple implementation. On fresh
cores of real processes: every handle the runtime's DAC lists is found with its type and object (and, under
server GC, the others are those of the tables the DAC does not walk), and the live set from the DAC's strong
handles equals ours with ``--roots handles``.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

import clrlayout

from clrlayout.cli import main
from clrlayout.graph.build import build_graph
from clrlayout.graph.dominators import dominator_tree, releasing_dominator_tree, retained_sizes
from clrlayout.graph.handles import read_handles
from clrlayout.graph.reach import breadth_first
from clrlayout.session import open_session
from tests.support.cli import run
from tests.support.samples import SAMPLES, manifest
from tests.support.scripts import script



def _graph(path):
    with open_session(path) as s:
        return build_graph(s.heap_steps().windows(), s.mts, s.dump.memory), s


@pytest.mark.parametrize("entry", manifest(None), ids=lambda e: e["file"])
def test_every_reference_is_null_or_an_object_start(entry):
    with open_session(SAMPLES / entry["file"]) as s:
        g = build_graph(s.heap_steps().windows(), s.mts, s.dump.memory)
        assert g.bad_count == 0, g.bad[:3]
        assert g.count > 500 and g.edge_count > 200
        assert (np.diff(g.addresses.astype(np.int64)) > 0).all()
        # each object's slots, read again for it, are its edges in order, and hold exactly their nodes' addresses
        slots = []
        for node in range(g.count):
            found = g.reference_slots(node)
            assert [t for _, t in found] == g.references(node).tolist(), node
            slots += [slot for slot, _ in found]
            if len(slots) >= 2000:
                break
        words = [s.dump.memory.read_pointer(slot) for slot in slots]
        assert words == [int(g.addresses[t]) for t in g.indices[: len(slots)].tolist()]
        # teeth: the words half a word past the slots are (almost) never object starts
        half = s.dump.pointer_size // 2
        shifted = [s.dump.memory.try_read_pointer(slot + half) for slot in slots]
        starts = sum(1 for w in shifted if w and g.node(w) is not None)
        assert starts < len(shifted) / 100


@pytest.mark.parametrize("entry", manifest("graph") + manifest("types")[1:2], ids=lambda e: e["file"])
def test_a_reference_to_no_object_is_a_finding_not_an_edge(entry, tmp_path, capsys):
    """One reference slot overwritten with an address inside an object (not its start): the graph counts it
    as a bad reference with its object, slot and value, drops only that edge, and the commands warn."""
    path = SAMPLES / entry["file"]
    with open_session(path) as s:
        g = build_graph(s.heap_steps().windows(), s.mts, s.dump.memory)
        source = next(v for v in range(g.count // 2, g.count) if len(g.reference_slots(v)) >= 2)
        (slot, target), *_ = g.reference_slots(source)
        value = int(g.addresses[target]) + s.dump.pointer_size  # inside the target, not its start
        region = s.dump.memory.region_at(slot)
        at = region.offset + slot - region.start
        edges = g.edge_count
    data = bytearray(path.read_bytes())
    data[at : at + s.dump.pointer_size] = value.to_bytes(s.dump.pointer_size, "little")
    broken = tmp_path / path.name
    broken.write_bytes(data)
    with open_session(broken) as s:
        bad = build_graph(s.heap_steps().windows(), s.mts, s.dump.memory)
    assert bad.bad_count == 1 and bad.edge_count == edges - 1
    assert [(b.source, b.slot, b.value) for b in bad.bad] == [(int(g.addresses[source]), slot, value)]
    assert bad.references(source).tolist() == g.references(source).tolist()[1:]
    assert (bad.indices == np.delete(g.indices, g.indptr[source])).all()
    kinds = "stacks" if entry["target"].endswith("types/Program.cs") else "handles"
    code, _, err = run(capsys, "retained", broken, "--top", "1", "--roots", kinds)
    assert code == 0 and "1 references point neither to null nor to the start of an object" in err


def test_retained_freeing_the_references_answers_as_keeping_them(capsys):
    """`retained` frees the graph's references once its dominator tree is made (and keeps the addresses in 4
    bytes meanwhile): its objects and types are those of the graph that keeps everything."""
    path = SAMPLES / manifest("graph")[0]["file"]
    with open_session(path) as s:
        og = s.object_graph(("handles", "finalizer"))
        _, retained, count = og.dominators()
        g = og.graph
        by_type = {s.type_name(mt): row for mt, row in og.by_type().items()}
        expect = {int(g.addresses[v]): (int(retained[v]), int(count[v])) for v in np.flatnonzero(og.live).tolist()}
        live_bytes = int(g.aligned[og.live].sum())
    got = _json(capsys, "retained", path, "--top", "50", "--roots", "handles,finalizer", "--format", "json")
    assert got["live_objects"] == len(expect) and got["live_bytes"] == live_bytes
    assert len(got["objects"]) == 50
    for o in got["objects"]:
        assert expect[int(o["address"], 16)] == (o["retained_size"], o["retained_count"])
    assert [o["retained_size"] for o in got["objects"]] == sorted((r for r, _ in expect.values()), reverse=True)[:50]
    for t in got["types"]:
        assert by_type[t["name"]] == [t["count"], t["size"], t["retained_size"]]


def test_a_graph_handed_out_before_is_not_freed_by_an_exclusive_one():
    """`exclusive` (what `retained` asks for) frees the references only of a heap graph made for that call: a
    graph of other root kinds handed out before keeps its references and addresses."""
    path = SAMPLES / manifest("graph")[0]["file"]
    with open_session(path) as s:
        mine = s.object_graph(("handles", "finalizer"), exclusive=True)
        mine.dominators(release=True)
        assert mine.indices is None and mine.graph.indices is None and mine.graph.addresses is not None
    with open_session(path) as s:
        held = s.object_graph(("handles",))
        edges = held.indices.copy()
        other = s.object_graph(("handles", "finalizer"), exclusive=True)
        other.dominators(release=True)
        assert other.indices is not None and (held.indices == edges).all() and held.graph.addresses is not None


def _chk_dominators(indptr, indices, roots):
    """Cooper, Harvey and Kennedy's iterative algorithm ("A Simple, Fast Dominance Algorithm"): a second,
    independent implementation."""
    n = len(indptr) - 1
    succ = {n: sorted(set(roots.tolist()))}
    for v in range(n):
        succ[v] = indices[indptr[v] : indptr[v + 1]].tolist()
    order, seen, stack = [], {n}, [(n, iter(succ[n]))]
    while stack:  # reverse post-order from the virtual root
        v, it = stack[-1]
        for w in it:
            if w not in seen:
                seen.add(w)
                stack.append((w, iter(succ[w])))
                break
        else:
            order.append(v)
            stack.pop()
    rpo = order[::-1]
    index = {v: i for i, v in enumerate(rpo)}
    preds: dict = {}
    for v in rpo:
        for w in succ[v]:
            preds.setdefault(w, []).append(v)
    idom = {n: n}
    changed = True
    while changed:
        changed = False
        for v in rpo[1:]:
            new = None
            for p in preds.get(v, []):
                if p in idom:
                    if new is None:
                        new = p
                    else:
                        a, b = p, new
                        while a != b:
                            while index[a] > index[b]:
                                a = idom[a]
                            while index[b] > index[a]:
                                b = idom[b]
                        new = a
            if idom.get(v) != new:
                idom[v] = new
                changed = True
    return idom


@pytest.mark.parametrize("entry", manifest("types")[:3], ids=lambda e: e["file"])
def test_dominators_equal_a_second_implementation(entry):
    g, _ = _graph(SAMPLES / entry["file"])
    roots = np.arange(0, g.count, 7)  # any root set will do for the algorithm
    idom, order = dominator_tree(g.indptr, g.indices, roots)
    other = _chk_dominators(g.indptr, g.indices, roots)
    reachable = set(order.tolist())
    assert reachable == set(other) - {g.count}
    assert all(int(idom[v]) == other[v] for v in reachable)
    assert all(idom[v] == -1 for v in range(g.count) if v not in reachable)
    # retained sizes: each node's own size plus those it dominates (by walking up each node's dominators)
    sizes = g.aligned
    retained, count = retained_sizes(idom, order, sizes)
    expect = np.zeros(g.count, dtype=np.int64)
    for v in reachable:
        d = v
        while d != g.count:
            expect[d] += sizes[v]
            d = other[d]
    assert (retained == expect).all()


def test_the_python_and_compiled_algorithms_agree(monkeypatch):
    """The dominator tree's loops run as Python (without numba) give what the compiled ones give, with the
    forward graph kept and freed on the way."""
    import clrlayout.graph.compiled as compiled
    import clrlayout.graph.dominators as dominators

    monkeypatch.setattr(compiled, "interpreted", lambda size: False)  # compiled, however small the graph
    g, _ = _graph(SAMPLES / "types.coreclr-10.0.0.linux-x64.core")
    roots = np.arange(0, g.count, 11)
    idom, order = dominator_tree(g.indptr, g.indices, roots)
    edges = [g.indptr, g.indices]
    freed_idom, freed_order = releasing_dominator_tree(edges, roots, True)
    assert edges == [] and (freed_idom == idom).all() and (freed_order == order).all()
    for name in ("_preorder", "_climbing", "_semi_nca", "_by_node", "_eval"):
        loop = compiled._compiled.get(name)
        monkeypatch.setitem(compiled._compiled, name, getattr(loop, "py_func", loop))
    monkeypatch.setattr(dominators, "_eval", compiled._compiled["_eval"])
    python_idom, python_order = dominator_tree(g.indptr, g.indices, roots)
    assert (python_idom == idom).all() and (python_order == order).all() and (idom >= 0).sum() > 1000


def test_the_compiled_and_numpy_breadth_first_agree(monkeypatch):
    """The compiled level loop and the numpy one (without numba) reach every node from the same node, forward
    from roots and backward from one object."""
    import clrlayout.graph.reach as reach

    from clrlayout.graph.dominators import reverse_graph

    g, _ = _graph(SAMPLES / "graph.coreclr-10.0.0.linux-x64.core")
    roots = np.arange(0, g.count, 97)
    rindptr, rindices = reverse_graph(g.indptr, g.indices, g.count)
    # the compiled counting sort's reversed graph is a stable argsort's: each node's referrers in order
    sources = np.repeat(np.arange(g.count), np.diff(g.indptr))
    expect = np.zeros(g.count + 1, dtype=np.int64)
    np.cumsum(np.bincount(g.indices, minlength=g.count), out=expect[1:])
    assert (rindptr == expect).all() and (rindices == sources[np.argsort(g.indices, kind="stable")]).all()
    import clrlayout.graph.compiled as loops

    monkeypatch.setattr(loops, "interpreted", lambda size: False)  # compiled, however small the graph
    compiled = reach.breadth_first(g.indptr, g.indices, roots)
    back = [np.full(g.count, -1, np.int64) for _ in range(4)]
    back[0][7] = 7
    reach.levels(rindptr, rindices, back[0], back[1], np.array([7]))
    monkeypatch.setattr(loops, "interpreted", lambda size: True)  # the numpy levels
    assert (reach.breadth_first(g.indptr, g.indices, roots) == compiled).all() and (compiled >= 0).sum() > 100
    back[2][7] = 7
    reach.levels(rindptr, rindices, back[2], back[3], np.array([7]))
    assert (back[0] == back[2]).all() and (back[1] == back[3]).all()


def test_breadth_first_paths_are_shortest():
    g, _ = _graph(SAMPLES / "types.coreclr-3.1.23.win-x64.dmp")
    roots = np.array([0, 5, 17])
    parent = breadth_first(g.indptr, g.indices, roots)
    depth = {int(r): 0 for r in roots}
    frontier = list(depth)
    while frontier:  # plain breadth-first distances
        nxt = []
        for v in frontier:
            for w in g.references(v).tolist():
                if w not in depth:
                    depth[w] = depth[v] + 1
                    nxt.append(w)
        frontier = nxt
    assert set(np.flatnonzero(parent >= 0).tolist()) == set(depth)
    for v, d in depth.items():
        if d:
            assert depth[int(parent[v])] == d - 1 and v in g.references(int(parent[v])).tolist()


def _check_expectations(path, truth) -> int:
    """Every object the graph target built is live or dead as it says, with each set of root kinds, and
    retains what it computed (under handles and the finalization queue); returns the checks made."""
    checks = 0
    with open_session(path) as s:
        for kinds in truth["objects"][0]["live"]:
            og = s.object_graph(tuple(kinds.split(",")))
            _, retained, count = og.dominators()
            for o in truth["objects"]:
                want = o["live"][kinds]
                node = og.graph.node(int(o["address"], 16))
                if want is None or (node is None and not want and o["name"].startswith("dead")):
                    continue  # unknown here; or a dead object the runtime already reclaimed
                assert node is not None, o["name"]
                assert bool(og.live[node]) == want, (kinds, o["name"])
                checks += 1
                if kinds == "handles,finalizer" and want and o["retained_count"] >= 0:
                    assert (int(count[node]), int(retained[node])) == (o["retained_count"], o["retained_bytes"]), \
                        o["name"]
                    checks += 1
    return checks


def test_the_graph_sample_is_what_its_target_built():
    entry = manifest("graph")[0]
    truth = json.loads((SAMPLES / entry["truth"]).read_text(encoding="utf-8"))
    assert _check_expectations(SAMPLES / entry["file"], truth) > 40


def _json(capsys, *args):
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    assert code == 0, err
    return json.loads(out)


def test_graph_commands_on_the_graph_sample(capsys):
    entry = manifest("graph")[0]
    path = SAMPLES / entry["file"]
    truth = {o["name"]: o for o in json.loads((SAMPLES / entry["truth"]).read_text(encoding="utf-8"))["objects"]}
    retained = _json(capsys, "retained", path, "--format", "json", "--top", "10")
    live = _json(capsys, "stats", path, "--live", "--format", "json")
    dead = _json(capsys, "stats", path, "--dead", "--with-frozen", "--format", "json")  # SOS's -dead
    every = _json(capsys, "stats", path, "--format", "json")
    free = sum(r["count"] for r in every["types"] if r["name"] == "Free")
    assert live["count"] == retained["live_objects"] and live["count"] + dead["count"] + free == every["count"]
    # refs: the chain's head references the next node and its payload, by field
    refs = _json(capsys, "refs", path, truth["chain"]["address"], "--format", "json")
    assert {r["field"] for r in refs["references"]} == {"Next", "Payload"}
    # held by the static field Graph.Chain: a slot of the statics' object[] (held by a pinned handle)
    assert refs["type"] == "Node" and refs["live"] and refs["retained_count"] == 400
    assert [(r["type"], r["field"]) for r in refs["referenced_by"]] == [("System.Object[]", "Graph.Chain (static)")]
    # roots: the stack local is reached from a thread's stack, and only from there
    roots = _json(capsys, "roots", path, truth["stack_local"]["address"], "--format", "json")
    assert roots["live"] and {p["root"]["kind"] for p in roots["paths"]} == {"stack (conservative)"}
    for p in roots["paths"]:
        assert p["chain"][-1]["address"] == truth["stack_local"]["address"]
    dead_one = _json(capsys, "roots", path, truth["stack_local"]["address"], "--roots", "handles,finalizer",
                     "--format", "json")
    assert not dead_one["live"] and dead_one["paths"] == []
    # every link of a path is a reference of the object before it
    value = _json(capsys, "roots", path, truth["dependent_value"]["address"], "--roots", "handles", "--format", "json")
    for p in value["paths"]:
        chain = p["chain"]
        for before, after in zip(chain, chain[1:]):
            r = _json(capsys, "refs", path, before["address"], "--roots", "handles", "--format", "json")
            assert after["address"] in {x["address"] for x in r["references"]}
        assert chain[-1]["field"] == "(dependent handle)"


@pytest.fixture(scope="module")
def graph_cores(target_build, tmp_path_factory):
    """Fresh cores of the strings target on .NET Core 2.2 and 3.1 (whose GC does not publish its handle tables:
    they are found by their shape), .NET 8 and 10, under workstation and server GC, with the DAC's handles."""
    from tests.support.fresh import strings_core

    out = []
    for version, server in [(v, server) for v in ("2.2.5", "3.1.23", "8.0.4", "10.0.0") for server in (False, True)]:
        core = strings_core(target_build, tmp_path_factory.mktemp("graph"), version, server)
        out.append((core, core.dac_listing("--handles", "--stack-refs")["handles"]))
    return out


@pytest.fixture(scope="module", params=["3.1.23", "8.0.4", "10.0.0"])
def graph_target_core(request, target_build, tmp_path_factory):
    """An untrimmed core of the graph target on a real runtime, with what the target expects (a FreshCore: the
    runtime's DAC beside it)."""
    from tests.support.fresh import FreshCore

    make_dumps = script("make_dumps")
    runtimes = script("runtimes")

    runtime = runtimes.get(request.param)
    raw, truth = make_dumps.make_linux(target_build, tmp_path_factory.mktemp("graph-target"),
                                       runtime=runtime, target="graph", full=True)
    return FreshCore(raw, json.loads(truth.read_text(encoding="utf-8")), runtime.dac, request.param, "workstation")


def test_fresh_graph_target_cores_are_what_the_target_built(graph_target_core):
    assert _check_expectations(graph_target_core.path, graph_target_core.truth) > 40


def test_a_collectible_types_objects_keep_its_loader_allocator(graph_target_core, capsys):
    """The graph target holds one object of a RunAndCollect type and nothing else of its assembly: the GC keeps
    the assembly's LoaderAllocator object alive through that object (no field of it). Every collectible
    MethodTable of the heap leads to the allocator object the DAC names (ISOSDacInterface6::
    GetMethodTableCollectibleData: the object its handle holds), and the allocator is live through that edge."""
    core = graph_target_core
    dac = {int(mt): v["object"] for mt, v in core.dac_listing("--collectible")["collectible"].items()}
    truth = {o["name"]: o for o in core.truth["objects"]}
    allocator = int(truth["collectible_allocator"]["address"], 16)
    assert set(dac.values()) == {allocator}, dac
    with open_session(core.path) as s:
        og = s.object_graph(("handles",))
        g = og.graph
        ours = {mt: int(g.addresses[node]) for mt, node in og.allocators.items()}
        assert ours == dac and not s.warnings
        holders = np.flatnonzero(np.isin(g.method_tables, np.array(sorted(dac), dtype=np.uint64))).tolist()
    assert holders
    roots = _json(capsys, "roots", core.path, hex(allocator), "--roots", "handles", "--format", "json")
    assert roots["live"] and roots["paths"]
    for p in roots["paths"]:  # the last link is the edge no slot holds
        assert p["chain"][-1] == {"address": hex(allocator), "type": "System.Reflection.LoaderAllocator",
                                  "field": "(loader allocator)"}
        assert int(p["chain"][-2]["address"], 16) in {int(g.addresses[h]) for h in holders}


def test_without_handle_tables_liveness_is_refused(capsys):
    """A dump without the GC's handle tables (this trimmed .NET Core 3.1 sample keeps the heap, not them):
    --live with the handles is an error that says why, never an answer that calls the objects they hold dead;
    with the other roots it answers."""
    path = SAMPLES / "strings.coreclr-3.1.23.linux-x64.core"
    code = main(["stats", str(path), "--live"])
    out, err = capsys.readouterr()
    assert code == 4 and out == "" and "handle roots" in err and "handle table map was not found" in err
    assert main(["stats", str(path), "--live", "--roots", "stacks", "--format", "json"]) == 0


def test_every_handle_the_dac_lists_is_found(graph_cores):
    for core, dac in graph_cores:
        with open_session(core.path) as s:
            handles, why = read_handles(s.dump, s.heap.dac_vars)
            heaps = s.heap.heap_count
        assert why is None
        ours = {h.address: h for h in handles}
        listed = {h["handle"]: h for h in dac if h["object"]}
        assert listed and set(listed) <= set(ours), core.path
        for address, h in listed.items():
            mine = ours[address]
            assert (mine.type, mine.object, mine.strong) == (h["type"], h["object"], h["strong"]), address
            if h["type"] == 6:
                assert mine.secondary == h["secondary"]
        # the others: the tables past the GC heaps the DAC walks (server GC with DATAS), never table 0's
        assert all(ours[a].table >= heaps for a in set(ours) - set(listed)), core.path


def test_the_live_set_from_the_dacs_handles(graph_cores):
    """With --roots handles, the live set is what the DAC's strong handles reach (dependent handles as edges),
    by a plain breadth-first walk here; under server GC ours holds it (and the other tables' roots)."""
    for core, dac in graph_cores:
        with open_session(core.path) as s:
            og = s.object_graph(("handles",))
            g = og.graph
            heaps = s.heap.heap_count
            ours = {h.address: h for h in read_handles(s.dump, s.heap.dac_vars)[0]}
        adjacency = {v: g.references(v).tolist() for v in range(g.count)}
        for h in dac:
            if h["type"] == 6 and h["object"] and h["secondary"]:
                p, q = g.node(h["object"]), g.node(h["secondary"])
                if p is not None and q is not None:
                    adjacency[p].append(q)
        roots = {g.node(h["object"]) for h in dac if h["strong"] and h["object"]} - {None}
        seen, stack = set(roots), list(roots)
        while stack:
            v = stack.pop()
            for w in adjacency[v]:
                if w not in seen:
                    seen.add(w)
                    stack.append(w)
        live = set(np.flatnonzero(og.live).tolist())
        extra_tables = any(h.table >= heaps for h in ours.values())
        assert (live == seen) if not extra_tables else (seen <= live), \
            (core.path, len(live), len(seen), sorted(seen - live)[:5], sorted(live - seen)[:5])
        # the handles root much of the app (the DAC's alone may root little of it where it misses the other
        # tables under DATAS: those of 85 objects in one run, where all tables root some 450)
        assert len(live) > 100 and (extra_tables or len(seen) > 100), (len(seen), len(live))


@pytest.mark.parametrize("entry", manifest("graph") + manifest("types")[:1], ids=lambda e: e["file"])
def test_retained_by_type_counts_no_object_twice(entry):
    """A type's retained bytes: its objects' retained sizes, but for those dominated by another of the type
    (found here by climbing each object's dominators); one walk of the tree does it (compiled and not)."""
    from clrlayout.graph.dominators import top_of_kind

    with open_session(SAMPLES / entry["file"]) as s:
        kinds = ("stacks",) if entry["target"].endswith("types/Program.cs") else ("handles", "finalizer")
        try:
            og = s.object_graph(kinds)
        except clrlayout.ClrLayoutError:
            pytest.skip("no roots of these kinds in this trimmed sample")  # pragma: no cover
        g = og.graph
        idom, retained, _ = og.dominators()
        n = g.count
        expect: dict = {}
        for v in np.flatnonzero(og.live).tolist():
            mt = int(g.method_tables[v])
            d = int(idom[v])
            while 0 <= d < n and int(g.method_tables[d]) != mt:
                d = int(idom[d])
            if not 0 <= d < n:
                expect[mt] = expect.get(mt, 0) + int(retained[v])
        assert {mt: row[2] for mt, row in og.by_type().items() if row[2]} == {m: r for m, r in expect.items() if r}
        _, kinds_of = np.unique(g.method_tables, return_inverse=True)
        import clrlayout.graph.compiled as loops

        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(loops, "interpreted", lambda size: False)  # compiled, however small the graph
            compiled = top_of_kind(idom, kinds_of)
            patch.setattr(loops, "interpreted", lambda size: True)  # the Python walk
            assert (top_of_kind(idom, kinds_of) == compiled).all()


def test_thread_statics_are_roots_on_net10(graph_cores):
    """.NET 10 keeps each thread's thread statics in an object[] that no handle holds (graph-facts.md): found
    through the runtime's thread list, one per thread that has any, each a root; objects only they hold are
    live with them and dead without.  Before .NET 9 handles hold the statics: the kind adds nothing."""
    for core, _ in graph_cores:
        with open_session(core.path) as s:
            threads = {t.id for t in s.dump.threads}
            every = s.object_graph(("handles", "statics"))
            statics = [r for r in every.roots.roots if r.kind == "thread static"]
            without = s.object_graph(("handles",))
            if core.runtime.startswith("10."):
                assert statics and all(r.thread in threads for r in statics), core.path
                assert all(s.type_name(int(every.graph.method_tables[every.graph.node(r.object)])) == "System.Object[]"
                           for r in statics)
                assert every.live.sum() > without.live.sum() and (without.live <= every.live).all()
            else:
                assert statics == [] and (every.live == without.live).all(), core.path


def test_every_heaps_finalization_queue_is_found(graph_cores):
    """One finalization queue per GC heap (server GC of .NET Core 2.x and 3.x too: dac_gc_heap.finalize_queue
    of formats/gc-dac-vars.toml), each a CFinalize: fill pointers in order within its array (m_Array equal to
    the first, m_EndArray at or after the last); the finalizer roots are then readable."""
    from clrlayout.heap.segments import finalize_queues

    for core, _ in graph_cores:
        with open_session(core.path) as s:
            queues = finalize_queues(s.dump, s.heap.dac_vars)
            assert len(queues) == s.heap.heap_count, core.path
            n = s.heap.dac_vars.generation_count + 2
            for q in queues:
                words = np.frombuffer(s.dump.memory.read(q, (n + 2) * 8), dtype="<u8").tolist()
                fill, array, end = words[:n], words[n], words[n + 1]
                assert array == fill[0] and fill == sorted(fill) and fill[-1] <= end, (core.path, words)
            s.object_graph(("finalizer",))  # no problem reading them


def test_no_object_the_dacs_roots_keep_alive_is_dead(graph_cores):
    """The DAC's roots — its strong handles and the precise stack references of every managed thread
    (GetStackReferences: the JIT's GC info, unwound from the core's registers) — reach, over the heap's
    references and the dependent handles, only objects that are live with every root kind clrlayout reads
    (the stacks scanned conservatively, which finds a superset of the precise references)."""
    for core, handles in graph_cores:
        refs = core.dac_listing("--handles", "--stack-refs")["stack_refs"]
        with open_session(core.path) as s:
            og = s.object_graph()
            g = og.graph
            heap = [(seg.start, seg.end) for seg in s.heap.segments]
        roots = {g.node(h["object"]) for h in handles if h["object"] and h["strong"]}
        # the references into the GC heap: the DAC also reports some that are not (objects the JIT allocated on
        # the stack, which .NET 10 does; now and then, on 8 and 10, a word of other memory of the runtime's, no
        # segment's), which no heap walk can call live or dead
        on_heap = [r for r in refs if r["object"] and any(lo <= r["object"] < hi for lo, hi in heap)]
        precise = {g.containing(r["object"]) if r["flags"] & 1 else g.node(r["object"]) for r in on_heap}
        assert None not in precise, (core.path, [hex(r["object"]) for r in on_heap
                                                 if g.containing(r["object"]) is None])
        assert precise, core.path  # 13 to 20 references of the main thread on these cores
        from tests.support.reach import reached_from

        reached = reached_from(og, roots | precise)
        dead = np.flatnonzero(reached & ~og.live)
        assert len(dead) == 0, (core.path, [hex(int(g.addresses[v])) for v in dead[:5]])
        assert reached.sum() > 100


def test_a_stack_ends_where_the_gc_heap_begins():
    """createdump writes adjacent mappings of one protection as one PT_LOAD segment: a thread's stack and the GC
    heap reserved right above it came as one (a 3.1 core of the secrets target: 114 objects called live by
    heap words scanned as stack words).  The stack scanned stops at the segment's start (its heap_segment)."""
    from types import SimpleNamespace

    from clrlayout.dump.model import Thread
    from clrlayout.graph.roots import thread_stacks
    from clrlayout.heap.segments import Segment

    stack = Thread(7, 0x7000_0000, 0x7003_0000, sp=0x7001_fcc0)  # the PT_LOAD that holds the stack pointer
    dump = SimpleNamespace(memory=SimpleNamespace(pointer_size=8), threads=[stack])
    heap = [Segment(0x7002_1000, 0x7002_8000, "soh", header=0x7002_0000), Segment(0x9000_1000, 0x9000_2000, "loh")]
    assert [(t.id, lo, hi) for t, lo, hi in thread_stacks(dump, heap)] == [(7, 0x7001_fcc0, 0x7002_0000)]
    assert [(lo, hi) for _, lo, hi in thread_stacks(dump, heap[1:])] == [(0x7001_fcc0, 0x7003_0000)]
    # the GC's bookkeeping (card table, mark array...) reserved above it: the same
    assert [(lo, hi) for _, lo, hi in thread_stacks(dump, heap[1:], [(0x7002_4000, 0x8000_0000)])] == \
        [(0x7001_fcc0, 0x7002_4000)]


def test_no_stack_scanned_runs_into_the_gc_heap(graph_cores):
    """Nor into the GC's bookkeeping or handle tables (what find_roots is given: Session.not_stacks)."""
    from clrlayout.graph.roots import thread_stacks

    for core, _ in graph_cores:
        with open_session(core.path) as s:
            heap = [(seg.start - seg.start % 4096, seg.end) for seg in s.heap.segments]  # the objects' pages
            heap += s.gc_bookkeeping() + s.gc_handle_tables()
            for t, lo, hi in thread_stacks(s.dump, s.heap.segments, s.not_stacks()):
                assert not any(a < hi and lo < b for a, b in heap), (core.path, t.id, hex(lo), hex(hi))
