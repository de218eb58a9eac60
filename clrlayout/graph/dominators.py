"""Dominators and retained sizes: the Semi-NCA algorithm (Georgiadis's, as LLVM's dominator trees compute them:
semidominators by Lengauer and Tarjan's path-compressed evaluation over a depth-first numbering, then each
immediate dominator as the nearest common ancestor of its parent and its semidominator), from a virtual root
with an edge to every root object, as Eclipse MAT computes its dominator tree.  An object's retained size is
the sum of the sizes of its dominator subtree: the bytes the heap would free if it became unreachable.

Made for heaps of hundreds of millions of objects: every array holds 4-byte node numbers where they fit and is
indexed by depth-first number; only the references that climb in that numbering are kept reversed (a
reference from an earlier node only lowers a semidominator to that node's number, folded in as it is met);
path compression reverses the path in place instead of keeping a stack; and the forward graph can be freed
once those are made.

The loops are written over numpy arrays only, so that numba compiles them when it is installed (a whole
heap of millions of objects); without it they run as Python (fine for dumps of some hundred thousand).
"""

from __future__ import annotations

import numpy as np

from ..util.allocator import release_freed
from .compiled import jit as _jit


def _preorder(indptr, indices, roots, dfnum, vertex, parent, cursor):  # pragma: no cover - also compiled
    """Depth-first from the virtual root (number 0, ``vertex[0]``), whose edges go to ``roots`` in order:
    ``dfnum`` each node's number (-1: not reached), ``vertex`` each number's node, ``parent`` each number's
    parent's number; iterative (back up through the parent), ``cursor`` each node's next edge. The count of
    numbers given."""
    count = 1
    parent[0] = 0
    for r in roots:
        if dfnum[r] >= 0:
            continue
        dfnum[r] = count
        vertex[count] = r
        parent[count] = 0
        cursor[r] = indptr[r]
        count += 1
        v = r
        while True:
            e = cursor[v]
            if e < indptr[v + 1]:
                cursor[v] = e + 1
                w = indices[e]
                if dfnum[w] < 0:
                    dfnum[w] = count
                    vertex[count] = w
                    parent[count] = dfnum[v]
                    cursor[w] = indptr[w]
                    count += 1
                    v = w
            elif v == r:
                break
            else:
                v = vertex[parent[dfnum[v]]]
    return count


def _climbing(indptr, indices, roots, dfnum, semi, rindptr, rindices, fill):  # pragma: no cover - also compiled
    """Over the reached nodes' references ``u -> w`` by number: one from an earlier number lowers ``semi[w]``
    to it (as the virtual root's edge lowers a root's to 0); one from a later number is counted (``fill``
    false) or put in ``rindices`` (``fill``: ``rindptr[w]`` the end of w's, moved back to its start)."""
    n = len(indptr) - 1
    for u in range(n):
        pu = dfnum[u]
        if pu < 0:
            continue
        for e in range(indptr[u], indptr[u + 1]):
            pw = dfnum[indices[e]]
            if pu < pw:
                if not fill and pu < semi[pw]:
                    semi[pw] = pu
            elif pu > pw:
                if fill:
                    rindptr[pw] -= 1
                    rindices[rindptr[pw]] = pu
                else:
                    rindptr[pw] += 1
    if not fill:
        for r in roots:
            semi[dfnum[r]] = 0


def _eval(v, last, parent, label, semi):  # pragma: no cover - also compiled
    """The number of lowest semidominator on the path from ``v`` up to (not including) the root of its tree
    in the forest of the numbers ``last`` and later, compressing the path (``parent`` is the forest's links):
    the path is reversed in place on the way up and put back compressed on the way down (no stack)."""
    if parent[v] < last:
        return label[v]
    prev = -1
    x = v
    while parent[x] >= last:
        up = parent[x]
        parent[x] = prev
        prev = x
        x = up
    top = parent[x]
    best = label[x]
    node = prev
    while node != -1:
        down = parent[node]
        parent[node] = top
        if semi[best] < semi[label[node]]:
            label[node] = best
        else:
            best = label[node]
        node = down
    return label[v]


def _semi_nca(count, parent, semi, rindptr, rindices, idom, label):  # pragma: no cover - also compiled
    """Semidominators (``semi``: on entry, each number's lowest from earlier numbers; ``rindices``: the later
    numbers that reference it; ``label`` each number's own), then immediate dominators by number (``idom``: on
    entry, each parent)."""
    for w in range(count - 1, 0, -1):
        s = semi[w]
        for e in range(rindptr[w], rindptr[w + 1]):
            u = _eval(rindices[e], w + 1, parent, label, semi)
            if semi[u] < s:
                s = semi[u]
        semi[w] = s
    for w in range(1, count):
        d = idom[w]
        while d > semi[w]:
            d = idom[d]
        idom[w] = d


def _numbered(dfnum, vertex):  # pragma: no cover - also compiled
    """``vertex``: each number's node (the virtual root, number 0: ``len(dfnum)``)."""
    vertex[0] = len(dfnum)
    for v in range(len(dfnum)):
        if dfnum[v] >= 0:
            vertex[dfnum[v]] = v


def _by_node(vertex, idom, count, out):  # pragma: no cover - also compiled
    """``out``: each node's immediate dominator as a node (the virtual root: ``len(out)``; -1: not reached)."""
    n = len(out)
    for i in range(1, count):
        d = idom[i]
        out[vertex[i]] = vertex[d] if d > 0 else n


def _algorithm(size: int):
    """The compiled loops when numba is installed (and a graph of ``size`` nodes and edges is not run as Python),
    else the Python ones; the helper first: the compiled algorithm calls the compiled helper (numba resolves
    globals when it compiles)."""
    global _eval
    algorithm = _jit(_semi_nca, size)
    if algorithm is not _semi_nca:
        _eval = _jit(_eval)
    return algorithm


def dominator_tree(indptr: np.ndarray, indices: np.ndarray, roots: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(idom, order) over the graph's ``n`` nodes plus a virtual root (node ``n``) with an edge to each root:
    ``idom[v]`` the immediate dominator of node v (``n``: only the virtual root dominates it; -1: not
    reachable), ``order`` the reachable nodes in depth-first order (every node after its dominator)."""
    return releasing_dominator_tree([indptr, indices], roots, False)


def releasing_dominator_tree(edges: list, roots: np.ndarray, release: bool) -> tuple[np.ndarray, np.ndarray]:
    """:func:`dominator_tree` of the graph ``edges = [indptr, indices]``; with ``release``, the list is emptied
    once the algorithm no longer needs the forward graph, so that it is freed then if the caller holds it
    nowhere else."""
    indptr, indices = edges
    n = len(indptr) - 1
    kind = np.int32 if n + 1 < 2**31 else np.int64  # node numbers: 4 bytes each where they fit
    roots = np.unique(np.asarray(roots).astype(np.int64)).astype(kind)
    dfnum = np.full(n, -1, kind)
    vertex = np.empty(n + 1, kind)
    parent = np.empty(n + 1, kind)
    cursor = np.empty(n, indptr.dtype)
    vertex[0] = n
    count = int(_jit(_preorder, n + len(indices))(indptr, indices, roots, dfnum, vertex, parent, cursor))
    del cursor
    release_freed()  # freed arrays go back to the kernel between the phases (glibc keeps them otherwise)
    vertex = None  # made again from the numbers below; its memory, kept by glibc, holds the next arrays
    parent = parent[:count].copy() if count < n // 2 else parent
    semi = parent[:count].copy()  # lowered below by earlier references and the virtual root
    rindptr = np.zeros(count + 1, dtype=np.int32 if len(indices) < 2**31 else np.int64)  # as the graph's
    climbing = _jit(_climbing, n + len(indices))
    climbing(indptr, indices, roots, dfnum, semi, rindptr, np.empty(0, kind), False)
    np.cumsum(rindptr, out=rindptr)
    rindices = np.empty(int(rindptr[-1]), kind)
    climbing(indptr, indices, roots, dfnum, semi, rindptr, rindices, True)
    if release:
        edges.clear()
    del indptr, indices
    release_freed()
    vertex = np.empty(count, kind)
    _jit(_numbered, n)(dfnum, vertex)
    del dfnum
    release_freed()
    idom = parent[:count].copy()
    semi_nca = _algorithm(count + len(rindices))
    semi_nca(count, parent[:count], semi, rindptr, rindices, idom, np.arange(count, dtype=kind))
    del parent, semi, rindptr, rindices
    release_freed()
    out = np.full(n, -1, kind)
    _jit(_by_node, n)(vertex, idom, count, out)
    return out, vertex[1:count]


def reverse_graph(indptr: np.ndarray, indices: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """The reversed graph of ``n`` nodes, by a counting sort (no argsort): (rindptr, rindices), each node's
    referrers in increasing order, node numbers of ``indices``' type."""
    rindptr = np.zeros(n + 1, dtype=indptr.dtype)
    rindptr[1:] = np.cumsum(np.bincount(indices, minlength=n))
    rindices = np.empty(len(indices), dtype=indices.dtype)
    _jit(_reverse, n + len(indices))(indptr, indices, n, rindptr, rindices)
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
    that is not reachable); 4-byte integers where the heap's bytes and nodes fit in them.  Every node comes
    after its dominator in ``order``: adding each to its dominator, last first, sums whole subtrees."""
    n = len(idom)
    total = int(sizes.sum(dtype=np.uint64)) if len(sizes) else 0
    retained = np.zeros(n + 1, dtype=np.uint32 if total < 2**32 else np.int64)  # at most the heap's bytes
    count = np.zeros(n + 1, dtype=idom.dtype)  # at most n
    retained[order] = sizes[order]
    count[order] = 1
    _jit(_accumulate, n)(order, idom, retained, count)
    return retained[:n], count[:n]


def _children(idom, children_ptr, children):  # pragma: no cover - also compiled
    """The dominator tree's children lists by a counting sort: ``children_ptr`` (counts in, bounds out; the
    virtual root is node ``len(idom)``), ``children`` each node's children in increasing order (put from the
    end of each list, the last first: no cursor array)."""
    n = len(idom)
    for v in range(n):
        if idom[v] >= 0:
            children_ptr[idom[v]] += 1
    for v in range(1, n + 2):
        children_ptr[v] += children_ptr[v - 1]
    for v in range(n - 1, -1, -1):
        d = idom[v]
        if d >= 0:
            children_ptr[d] -= 1
            children[children_ptr[d]] = v


def _tops(children_ptr, children, root, kinds, kind_count, idom):  # pragma: no cover - also compiled
    """Depth-first over the dominator tree: for each node, whether none of its strict dominators is of its own
    kind (how many of each kind are on the path from the root is counted on the way; ``kinds`` has no entry
    for the virtual root ``root``). No stack and no cursor: back up through ``idom``, and a node's next child
    is the first of its (increasing) children after the one just left, found by a binary search."""
    n = len(kinds)
    top = np.zeros(n, np.bool_)
    active = np.zeros(kind_count, np.int64)
    v = root
    e = children_ptr[root]
    while True:
        if e < children_ptr[v + 1]:
            w = children[e]
            top[w] = active[kinds[w]] == 0
            active[kinds[w]] += 1
            v = w
            e = children_ptr[w]
        elif v == root:
            break
        else:
            active[kinds[v]] -= 1
            left = v
            v = idom[v]
            lo, hi = children_ptr[v], children_ptr[v + 1]
            while lo < hi:  # the first child after the one left
                mid = (lo + hi) >> 1
                if children[mid] <= left:
                    lo = mid + 1
                else:
                    hi = mid
            e = lo
    return top


def top_of_kind(idom: np.ndarray, kinds: np.ndarray) -> np.ndarray:
    """Which reachable nodes have no strict dominator of their own kind (``kinds``: a small integer per node;
    unreachable nodes are not top): what a kind's retained size sums, without counting a node twice.  One
    walk of the dominator tree, whatever its depth."""
    n = len(idom)
    kind = np.int32 if n + 2 < 2**31 else np.int64  # node numbers: 4 bytes each where they fit
    children_ptr = np.zeros(n + 2, dtype=kind)
    children = np.empty(int((idom >= 0).sum()), dtype=kind)
    _jit(_children, n)(idom, children_ptr, children)
    kind_count = int(kinds.max(initial=0)) + 1
    return _jit(_tops, n)(children_ptr, children, n, kinds, kind_count, idom)


def largest(values, top: int, chunk: int = 1 << 20) -> list[int]:
    """The indexes of the ``top`` largest ``values``, largest first, the lowest index first among equals: a
    chunk at a time (no copy of every value), each chunk's above its top-th largest and the lowest-indexed of
    those equal to it."""
    found = []
    for lo in range(0, len(values), chunk):
        part = values[lo : lo + chunk]
        if len(part) > top:
            kth = np.partition(part, len(part) - top)[len(part) - top]
            above = np.flatnonzero(part > kth)
            found += [lo + above, lo + np.flatnonzero(part == kth)[: top - len(above)]]
        else:
            found.append(lo + np.arange(len(part)))
    candidates = np.concatenate(found) if found else np.zeros(0, dtype=np.int64)
    order = np.lexsort((candidates, -values[candidates].astype(np.int64)))
    return candidates[order][:top].tolist()


def warm_up() -> None:
    """Each loop run once on a tiny graph, with the types of every real run (the heap graph's 4-byte node
    numbers and row bounds, 8-byte bounds past 2**31 references, 8-byte numbers past 2**31 nodes; sizes of 4
    and 8 bytes; kinds of 2 and 4), so that numba compiles it (or loads it from its cache) here."""
    from .lookup import nodes_of
    from .reach import breadth_first, levels

    for ptype, itype in ((np.int32, np.int32), (np.int64, np.int32), (np.int64, np.int64)):
        indptr, indices = np.array([0, 1, 2, 2], dtype=ptype), np.array([1, 2], dtype=itype)
        idom, order = dominator_tree(indptr, indices, np.array([0]))
        for sizes in (np.uint32, np.int64):
            retained_sizes(idom, order, np.array([8, 16, 24], dtype=sizes))
            retained_sizes(idom, order, np.array([8, 16, 2**32], dtype=sizes))  # 8-byte sums
        for kinds in (np.uint16, np.uint32):
            top_of_kind(idom, np.array([0, 1, 1], dtype=kinds))
        rindptr, rindices = reverse_graph(indptr, indices, 3)
        breadth_first(indptr, indices, np.array([0]))
        levels(rindptr, rindices, np.full(3, -1, np.int64), np.full(3, -1, np.int64), np.array([2]))
    for kind in (np.int32, np.int64):
        nodes_of(np.array([16, 48, 8192], dtype=np.uint64), np.array([48, 0, 8192, 40], dtype=np.uint64), kind)
