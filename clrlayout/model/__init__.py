"""The object model a program uses (the shape ClrMD gives .NET engineers): :func:`open` ->
:class:`Dump` -> :class:`Runtime` -> :class:`Heap` -> :class:`HeapObject` / :class:`ClrType`.

The commands' answers are the model's: per-type counts of ``heap.objects()`` are ``stats``', a type's
``fields`` are ``type``'s, the strings are ``dump``'s.
"""

from .dump import Dump, DumpInfo, Runtime, open
from .heap import Heap, HeapObject
from .types import ClrField, ClrType

__all__ = ["ClrField", "ClrType", "Dump", "DumpInfo", "Heap", "HeapObject", "Runtime", "open"]
