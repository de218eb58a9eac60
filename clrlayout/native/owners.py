"""Which managed object owns which native chunk: a word inside an object that points into an in-use chunk's
user data (its start or inside it) and that the object's type says is a native pointer — an ``IntPtr``,
``UIntPtr``, pointer or function-pointer field (in the class or in a struct field of it, a ``SafeHandle``'s
``handle`` among them), a boxed ``IntPtr``, an element of an ``IntPtr[]``/``UIntPtr[]`` or of an array of
pointers.  A ``long`` that happens to hold an address is not one.  The GC heap's words are read once, a window at
a time, in numpy; only the few words whose value falls in a chunk are looked at one by one, by type."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from .leaks import ChunkIndex, _words

#: CorElementType of a native pointer: ELEMENT_TYPE_PTR, I (IntPtr, nint), U (UIntPtr, nuint), FNPTR
POINTER_ELEMENT_TYPES = {0x0F, 0x18, 0x19, 0x1B}
POINTER_ARRAYS = ("System.IntPtr[]", "System.UIntPtr[]")


def candidate_words(memory, ranges, addresses: np.ndarray, aligned: np.ndarray, index: ChunkIndex):
    """(word address, object node, chunk) for every word of the objects in ``ranges`` (the GC heap's segments)
    whose value points into an in-use chunk."""
    out_w, out_n, out_k = [], [], []
    if not len(index) or not len(addresses):
        return np.zeros(0, np.uint64), np.zeros(0, np.int64), np.zeros(0, np.int64)
    lo, hi = np.uint64(index.lo), np.uint64(index.hi)
    ends = addresses + aligned.astype(np.uint64)
    for start, end in ranges:
        for at, values in _words(memory, start, end, index.word):
            keep = (values >= lo) & (values < hi)
            if not keep.any():
                continue
            at, values = at[keep], values[keep]
            k = index.lookup(values)
            at, k = at[k >= 0], k[k >= 0]
            node = np.searchsorted(addresses, at, side="right").astype(np.int64) - 1
            ok = (node >= 0)
            ok[ok] = at[ok] < ends[node[ok]]
            out_w.append(at[ok])
            out_n.append(node[ok])
            out_k.append(k[ok])
    if not out_w:
        return np.zeros(0, np.uint64), np.zeros(0, np.int64), np.zeros(0, np.int64)
    return np.concatenate(out_w), np.concatenate(out_n), np.concatenate(out_k)


def pointer_offsets(layout, pointer_size: int) -> set[int]:
    """The offsets (from the object pointer) of a type's native-pointer fields, struct fields' own included."""
    found: set[int] = set()

    def visit(fields, base: int, depth: int) -> None:
        for f in fields:
            if f.element_type in POINTER_ELEMENT_TYPES and f.size == pointer_size:
                found.add(base + f.offset)
            elif f.kind == "struct" and f.fields and depth < 8:
                visit(f.fields, base + f.offset, depth + 1)

    if layout is not None:
        visit(layout.fields, 0, 0)
    return found


def is_pointer_slot(layout, offset: int, pointer_size: int, cache: dict) -> bool:
    """Whether ``offset`` into an object of this type holds a native pointer."""
    if layout is None:
        return False
    key = layout.method_table
    if key not in cache:
        array = layout.component_size == pointer_size and (layout.name or "").endswith(POINTER_ARRAYS + ("*[]",))
        cache[key] = (array, pointer_offsets(layout, pointer_size))
    array, offsets = cache[key]
    if array:
        return offset >= 2 * pointer_size and offset % pointer_size == 0
    return offset in offsets


def owners(words, nodes, chunks, addresses, method_tables: np.ndarray, layout_of: Callable, pointer_size: int):
    """The candidate words kept where the object's type says the word is a native pointer: (node, chunk) pairs."""
    cache: dict = {}
    layouts: dict = {}
    keep = np.zeros(len(words), dtype=bool)
    for i in range(len(words)):
        node = int(nodes[i])
        mt = int(method_tables[node])
        if mt not in layouts:
            layouts[mt] = layout_of(mt)
        keep[i] = is_pointer_slot(layouts[mt], int(words[i]) - int(addresses[node]), pointer_size, cache)
    return nodes[keep], chunks[keep], words[keep]
