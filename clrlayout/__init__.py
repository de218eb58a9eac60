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

#: the public names, each imported from its module when first used: ``import clrlayout`` itself imports
#: nothing else, so that the command (``__main__``) decides what its start-up imports, and when
_EXPORTS = {
    "open": ("session", "open_session"),  # clrlayout.open(path, *, mt=None, profile=None, heap="auto", limits=...)
    "Session": ("session", "Session"),
    "StringObject": ("objects.strings", "StringObject"),
    "HeapObject": ("heap.walk", "HeapObject"),
    "Limits": ("limits", "Limits"),
    "DEFAULT_LIMITS": ("limits", "DEFAULT_LIMITS"),
    "ClrLayoutError": ("errors", "ClrLayoutError"),
    "DumpError": ("errors", "DumpError"),
    "RuntimeNotFound": ("errors", "RuntimeNotFound"),
    "HeapNotFound": ("errors", "HeapNotFound"),
    "TypeNotFound": ("errors", "TypeNotFound"),
    "ProfileError": ("errors", "ProfileError"),
}

__all__ = [*_EXPORTS, "__version__"]


def __getattr__(name: str):
    if name not in _EXPORTS:
        raise AttributeError(f"module 'clrlayout' has no attribute {name!r}")
    from importlib import import_module

    module, attribute = _EXPORTS[name]
    value = globals()[name] = getattr(import_module(f".{module}", __name__), attribute)
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})
