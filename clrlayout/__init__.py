"""clrlayout: how .NET objects sit in memory, byte by byte, read from crash dumps without the DAC.

The library's front door is :func:`open`, which gives the model (:mod:`clrlayout.model`), shaped as ClrMD's::

    import clrlayout

    with clrlayout.open("app.dmp") as dump:          # Dump: format, arch, os, modules, memory
        runtime = dump.runtime                        # Runtime: flavor, version, profile, types
        heap = runtime.heap                           # Heap: segments, exact, objects(), strings(), object_at()
        for obj in heap.objects():                    # HeapObject: address, type, size, generation
            print(hex(obj.address), obj.type.name, obj.size)
        t = runtime.type("System.String")             # ClrType: name, method_table, base_size, fields

Errors are :class:`ClrLayoutError` subclasses (``DumpError``, ``RuntimeNotFound``, ...), each with the exit
code the command-line tool maps it to.
"""

__version__ = "0.1.0"

#: the public names, each imported from its module when first used: ``import clrlayout`` itself imports
#: nothing else, so that the command (``__main__``) decides what its start-up imports, and when
_EXPORTS = {
    "open": ("model", "open"),  # clrlayout.open(path, *, method_table=None, profile=None, heap="auto", ...)
    "Dump": ("model", "Dump"),
    "DumpInfo": ("model", "DumpInfo"),
    "Runtime": ("model", "Runtime"),
    "Heap": ("model", "Heap"),
    "HeapObject": ("model", "HeapObject"),
    "ClrType": ("model", "ClrType"),
    "ClrField": ("model", "ClrField"),
    "diff": ("model.diff", "diff"),
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
