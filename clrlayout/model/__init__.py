"""The object model a program uses (the shape ClrMD gives .NET engineers): :func:`open` ->
:class:`Dump` -> :class:`Runtime` -> :class:`Heap` -> :class:`HeapObject` / :class:`ClrType`, and the heap's
:class:`Graph` (references, referrers, root paths, retained sizes, the biggest retainers).

The commands' answers are the model's: per-type counts of ``heap.objects()`` are ``stats``', a type's
``fields`` are ``type``'s, the strings are ``dump``'s.
"""

from .dump import Dump, DumpInfo, Runtime, open
from .heap import Graph, Heap, HeapObject, Retained, TypeRetained
from .types import ClrField, ClrType

__all__ = ["ClrField", "ClrType", "Dump", "DumpInfo", "Graph", "Heap", "HeapObject", "Retained", "Runtime",
           "TypeRetained", "open"]
