"""The reference no field holds: an object of a collectible type keeps its type's LoaderAllocator object alive.

A type of a collectible assembly (``AssemblyLoadContext(isCollectible: true)``, ``AssemblyBuilderAccess.
RunAndCollect``) is unloaded when its ``System.Reflection.LoaderAllocator`` object dies; the runtime's native
LoaderAllocator holds that object only by a weak handle, and the GC follows an edge from every object of such a
type to it (gc.cpp ``go_through_object_cl``, ``MethodTable::GetLoaderAllocatorObjectForGC``). Without that edge
the allocator, the types' ``RuntimeType`` objects and the assembly would all be called dead while the GC keeps
them.

Which allocator a MethodTable belongs to is found without the DAC and without the offsets of the runtime's
``LoaderAllocator``, which change from release to release:

- each managed LoaderAllocator object names its native one through its scout (``m_scout`` ->
  ``LoaderAllocatorScout.m_nativeLoaderAllocator``);
- a collectible type's MethodTable is allocated from its loader allocator's loader heaps, which the native
  LoaderAllocator embeds (``m_LowFreqHeapInstance``, ``m_HighFreqHeapInstance``, ...): the loader heap block that
  holds the MethodTable belongs to a heap whose list word (``m_pFirstBlock``) lies a little past the start of
  that native LoaderAllocator (``allocator_span`` of ``formats/loader-heap.toml``).

Checked against the runtime's own DAC (``ISOSDacInterface6::GetMethodTableCollectibleData``: the allocator's
handle, whose object is the one found here) on 3.1, 8 and 10 (tests/samples/test_graph.py).
"""

from __future__ import annotations

import bisect

#: the managed side, as the DAC names its types and fields
ALLOCATOR_TYPE = "System.Reflection.LoaderAllocator"
SCOUT_FIELD = "m_scout"
NATIVE_FIELD = "m_nativeLoaderAllocator"


def allocators_of_types(method_tables, blocks, natives: dict[int, int], span: int) -> dict[int, int]:
    """MethodTable -> its managed LoaderAllocator object, for each of ``method_tables`` (collectible ones) whose
    loader heap block is among ``blocks`` (:class:`~clrlayout.runtime.loaderheaps.LoaderHeapBlock`) and lies
    within ``span`` bytes past one of ``natives`` (native LoaderAllocator address -> managed object)."""
    starts = [b.start for b in blocks]
    bases = sorted(natives)
    out = {}
    for mt in method_tables:
        i = bisect.bisect_right(starts, mt) - 1
        if i < 0 or mt >= blocks[i].end or not blocks[i].heap:
            continue
        word = blocks[i].heap
        j = bisect.bisect_right(bases, word) - 1
        if j >= 0 and word - bases[j] < span:
            out[mt] = natives[bases[j]]
    return out
