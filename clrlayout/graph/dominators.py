"""Dominators and retained sizes: the Lengauer–Tarjan algorithm (the version with path compression of
Appel's *Modern Compiler Implementation*, §19.2: semidominators from a depth-first numbering, then immediate
dominators), from a virtual root with an edge to every root object, as Eclipse MAT computes its dominator
tree.  An object's retained size is the sum of the sizes of its dominator subtree: the bytes the heap would
free if it became unreachable.

The loops are written over numpy arrays only, so that numba compiles them when it is installed (a whole
heap of millions of objects); without it they run as Python (fine for dumps of some hundred thousand).
"""

from __future__ import annotations

import numpy as np

from .compiled import jit as _jit


def _lowest_semi(v, ancestor, best, semi, dfnum, chain):  # pragma: no cover - also compiled
    """The ancestor of ``v`` in the forest built so far whose semidominator is lowest (Appel's
    AncestorWithLowestSemi), compressing the path on the way (iteratively: ``chain`` is scratch space)."""
    chain[0] = v
    length = 1
    while ancestor[ancestor[chain[length - 1]]] != -1:
        chain[length] = ancestor[chain[length - 1]]
        length += 1
    for j in range(length - 2, -1, -1):
        x = chain[j]
        a = ancestor[x]
        b = best[a]
        ancestor[x] = ancestor[a]
        if dfnum[semi[b]] < dfnum[semi[best[x]]]:
            best[x] = b
    return best[v]


def _lengauer_tarjan(indptr, indices, rindptr, rindices, roots, root, n):  # pragma: no cover - also compiled
    """Over the graph's nodes and the virtual root ``root`` (= the graph's node count; ``n`` = root + 1),
    whose edges go to ``roots`` (sorted, distinct): the virtual root's edges are not in the graph's arrays."""
    dfnum = np.full(n, -1, indices.dtype)
    vertex = np.full(n, -1, indices.dtype)
    parent = np.full(n, -1, indices.dtype)
    cursor = np.zeros(n, np.int64)
    stack = np.empty(n, indices.dtype)
    is_root = np.zeros(n, np.bool_)
    for r in roots:
        is_root[r] = True
    # depth-first numbering, iterative
    count = 0
    dfnum[root] = 0
    vertex[0] = root
    count = 1
    top = 0
    stack[0] = root
    cursor[root] = 0
    while top >= 0:
        v = stack[top]
        e = cursor[v]
        if v == root:
            more = e < len(roots)
            w = roots[e] if more else root
        else:
            more = e < indptr[v + 1]
            w = indices[e] if more else root
        if more:
            cursor[v] = e + 1
            if dfnum[w] < 0:
                dfnum[w] = count
                vertex[count] = w
                parent[w] = v
                count += 1
                top += 1
                stack[top] = w
                cursor[w] = indptr[w]
        else:
            top -= 1
    cursor = np.zeros(0, np.int64)  # the walk's scratch, freed before the next arrays are made
    stack = np.empty(0, indices.dtype)
    semi = np.full(n, -1, indices.dtype)
    ancestor = np.full(n, -1, indices.dtype)
    best = np.full(n, -1, indices.dtype)
    idom = np.full(n, -1, indices.dtype)
    samedom = np.full(n, -1, indices.dtype)
    bucket_head = np.full(n, -1, indices.dtype)
    bucket_next = np.full(n, -1, indices.dtype)
    chain = np.empty(n, indices.dtype)
    for i in range(count - 1, 0, -1):
        w = vertex[i]
        p = parent[w]
        s = p
        if is_root[w]:  # the virtual root references it: no semidominator is lower (its number is 0)
            s = root
        for e in range(rindptr[w], rindptr[w + 1] if s != root else rindptr[w]):
            v = rindices[e]
            if dfnum[v] < 0:
                continue
            if dfnum[v] <= dfnum[w]:
                candidate = v
            else:
                candidate = semi[_lowest_semi(v, ancestor, best, semi, dfnum, chain)]
            if dfnum[candidate] < dfnum[s]:
                s = candidate
        semi[w] = s
        bucket_next[w] = bucket_head[s]
        bucket_head[s] = w
        ancestor[w] = p
        best[w] = w
        v = bucket_head[p]
        while v != -1:
            y = _lowest_semi(v, ancestor, best, semi, dfnum, chain)
            if semi[y] == semi[v]:
                idom[v] = p
            else:
                samedom[v] = y
            v = bucket_next[v]
        bucket_head[p] = -1
    for i in range(1, count):
        w = vertex[i]
        if samedom[w] != -1:
            idom[w] = idom[samedom[w]]
    return idom, vertex[:count]


def _algorithm():
    """The compiled algorithm when numba is installed, else the Python one; its helper first: the algorithm
    calls the compiled one (numba resolves globals when it compiles)."""
    global _lowest_semi
    _lowest_semi = _jit(_lowest_semi)
    return _jit(_lengauer_tarjan)


def dominator_tree(indptr: np.ndarray, indices: np.ndarray, roots: np.ndarray,
                   reverse: tuple | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(idom, order) over the graph's ``n`` nodes plus a virtual root (node ``n``) with an edge to each root:
    ``idom[v]`` the immediate dominator of node v (``n``: only the virtual root dominates it; -1: not
    reachable), ``order`` the reachable nodes in depth-first order (every node after its dominator).
    ``reverse``: the graph's :func:`reverse_graph`, when already had. The graph's arrays are not copied."""
    n = len(indptr) - 1
    kind = np.int32 if n + 1 < 2**31 else np.int64  # node numbers: 4 bytes each where they fit
    indices = indices.astype(kind, copy=False)
    roots = np.unique(roots.astype(np.int64)).astype(kind)
    rindptr, rindices = reverse if reverse is not None else reverse_graph(indptr, indices, n)
    idom, order = _algorithm()(indptr, indices, rindptr, rindices.astype(kind, copy=False), roots, n, n + 1)
    return idom[:n], order[1:]


def reverse_graph(indptr: np.ndarray, indices: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """The reversed graph of ``n`` nodes, by a counting sort (no argsort): (rindptr, rindices), each node's
    referrers in increasing order, node numbers of ``indices``' type."""
    rindptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(indices, minlength=n), out=rindptr[1:])
    rindices = np.empty(len(indices), dtype=indices.dtype)
    _jit(_reverse)(indptr, indices, n, rindptr, rindices)
    return rindptr, rindices


def _reverse(indptr, indices, nodes, rindptr, rindices):  # pragma: no cover - also compiled
    """``rindices``: for each node, the nodes that reference it, in increasing order (``rindptr`` its bounds)."""
    pos = rindptr[:-1].copy()
    for u in range(nodes):
        for e in range(indptr[u], indptr[u + 1]):
            v = indices[e]
            rindices[pos[v]] = u
            pos[v] += 1


def _accumulate(order, idom, retained, count):  # pragma: no cover - also compiled
    for i in range(len(order) - 1, -1, -1):
        v = order[i]
        d = idom[v]
        retained[d] += retained[v]
        count[d] += count[v]


def retained_sizes(idom: np.ndarray, order: np.ndarray, sizes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(retained bytes, retained objects) of every node: its own plus its dominator subtree's (0 for a node
    that is not reachable).  Every node comes after its dominator in ``order``: adding each to its dominator,
    last first, sums whole subtrees."""
    n = len(idom)
    retained = np.zeros(n + 1, dtype=np.int64)
    count = np.zeros(n + 1, dtype=np.int64)
    retained[order] = sizes[order]
    count[order] = 1
    _jit(_accumulate)(order, idom, retained, count)
    return retained[:n], count[:n]


def _children(idom, children_ptr, children):  # pragma: no cover - also compiled
    """The dominator tree's children lists by a counting sort: ``children_ptr`` (counts in, bounds out; the
    virtual root is node ``len(idom)``), ``children`` each node's children in increasing order."""
    n = len(idom)
    for v in range(n):
        if idom[v] >= 0:
            children_ptr[idom[v] + 1] += 1
    for v in range(1, n + 2):
        children_ptr[v] += children_ptr[v - 1]
    pos = children_ptr[:-1].copy()
    for v in range(n):
        d = idom[v]
        if d >= 0:
            children[pos[d]] = v
            pos[d] += 1


def _tops(children_ptr, children, root, kinds, kind_count):  # pragma: no cover - also compiled
    """Depth-first over the dominator tree: for each node, whether none of its strict dominators is of its own
    kind (how many of each kind are on the path from the root is counted on the way; ``kinds`` has no entry
    for the virtual root ``root``)."""
    n = len(kinds)
    top = np.zeros(n, np.bool_)
    active = np.zeros(kind_count, np.int64)
    stack = np.empty(n + 1, children.dtype)
    cursor = np.empty(n + 1, children_ptr.dtype)
    depth = 0
    stack[0] = root
    cursor[0] = children_ptr[root]
    while depth >= 0:
        v = stack[depth]
        e = cursor[depth]
        if e < children_ptr[v + 1]:
            cursor[depth] = e + 1
            w = children[e]
            top[w] = active[kinds[w]] == 0
            active[kinds[w]] += 1
            depth += 1
            stack[depth] = w
            cursor[depth] = children_ptr[w]
        else:
            if v != root:
                active[kinds[v]] -= 1
            depth -= 1
    return top


def top_of_kind(idom: np.ndarray, kinds: np.ndarray) -> np.ndarray:
    """Which reachable nodes have no strict dominator of their own kind (``kinds``: a small integer per node;
    unreachable nodes are not top): what a kind's retained size sums, without counting a node twice.  One
    walk of the dominator tree, whatever its depth."""
    n = len(idom)
    kind = np.int32 if n + 2 < 2**31 else np.int64  # node numbers: 4 bytes each where they fit
    children_ptr = np.zeros(n + 2, dtype=kind)
    children = np.empty(int((idom >= 0).sum()), dtype=kind)
    _jit(_children)(idom, children_ptr, children)
    kind_count = int(kinds.max(initial=0)) + 1
    kinds = np.asarray(kinds, dtype=np.int32 if kind_count <= 2**31 else np.int64)
    return _jit(_tops)(children_ptr, children, n, kinds, kind_count)


def warm_up() -> None:
    """Each loop run once on a tiny graph, with the types of every real run (the heap graph's 4-byte node
    numbers, and 8-byte ones), so that numba compiles it (or loads it from its cache) here."""
    indptr, indices = np.array([0, 1, 2, 2], dtype=np.int64), np.array([1, 2], dtype=np.int64)
    dominator_tree(indptr, indices.astype(np.int32), np.array([0], dtype=np.int64))  # the heap graph's types
    idom, order = dominator_tree(indptr, indices, np.array([0], dtype=np.int64))
    retained_sizes(idom, order, np.array([8, 16, 24], dtype=np.int64))
    idom32, order32 = dominator_tree(indptr, indices.astype(np.int32), np.array([0], dtype=np.int64))
    retained_sizes(idom32, order32, np.array([8, 16, 24], dtype=np.int64))
    top_of_kind(idom, np.array([0, 1, 1], dtype=np.int64))
    top_of_kind(idom32, np.array([0, 1, 1], dtype=np.int64))
    from .build import nodes_of
    from .reach import breadth_first, levels

    for kind in (np.int32, np.int64):
        nodes_of(np.array([16, 48, 8192], dtype=np.uint64), np.array([48, 0, 8192, 40], dtype=np.uint64), kind)

    breadth_first(indptr, indices.astype(np.int32), np.array([0], dtype=np.int64))
    breadth_first(indptr, indices, np.array([0], dtype=np.int64))
    for kind in (np.int32, np.int64):
        levels(indptr, indices.astype(kind), np.full(3, -1, np.int64), np.full(3, -1, np.int64),
               np.array([2], dtype=np.int64))

