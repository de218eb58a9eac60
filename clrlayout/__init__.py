"""clrlayout: how .NET objects sit in memory, byte by byte, read from crash dumps without the DAC.

The library's front door is :func:`open`::

    import clrlayout

    with clrlayout.open("app.core") as dump:
        print(dump.info["runtime"])                # what `clrlayout info` shows, as data
        for s in dump.strings():                   # every System.String, in heap order
            print(hex(s.address), s.size, s.value)
        for o in dump.objects():                   # every object but free space, in heap order
            print(hex(o.address), hex(o.method_table), o.size, o.type_name)

Errors are :class:`ClrLayoutError` subclasses (``DumpError``, ``RuntimeNotFound``, ...), each with the exit
code the command-line tool maps it to.
"""

__version__ = "0.1.0"

from .errors import (  # noqa: E402
    ClrLayoutError,
    DumpError,
    HeapNotFound,
    ProfileError,
    RuntimeNotFound,
    TypeNotFound,
)
from .heap.walk import HeapObject  # noqa: E402
from .limits import DEFAULT_LIMITS, Limits  # noqa: E402
from .objects.strings import StringObject  # noqa: E402
from .session import Session, open_session  # noqa: E402

#: ``clrlayout.open(path, *, mt=None, profile=None, heap="auto", limits=DEFAULT_LIMITS)`` -> :class:`Session`
open = open_session

__all__ = [
    "open",
    "Session",
    "StringObject",
    "HeapObject",
    "Limits",
    "DEFAULT_LIMITS",
    "ClrLayoutError",
    "DumpError",
    "RuntimeNotFound",
    "HeapNotFound",
    "TypeNotFound",
    "ProfileError",
    "__version__",
]
