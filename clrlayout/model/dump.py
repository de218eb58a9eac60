"""The front of the model: :func:`open` gives a :class:`Dump` (the file: format, architecture, OS, modules,
memory), whose :class:`Runtime` (flavor, version, layout profile, types) has the :class:`~.heap.Heap`: the
shape of ClrMD's ``DataTarget -> ClrRuntime -> ClrHeap``."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..errors import AmbiguousType
from .heap import Heap
from .types import ClrType

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

    from ..analyses.memory import MemoryMap
    from ..dump.addrspace import AddressSpace
    from ..dump.model import Module, Thread
    from ..findings import Findings
    from ..limits import Limits
    from ..session import Session
    from .native import NativeHeapView
    from .stacks import ThreadStack
    from .threads import ThreadInfo


@dataclass(frozen=True)
class DumpInfo:
    """What ``clrlayout info`` shows (addresses as numbers; ``info --format json`` prints them in hex)."""

    path: str
    format: str  #: "minidump" | "elf-core"
    os: str
    os_version: str | None
    arch: str  #: "x86" | "x64" | "arm64" | ...
    pointer_size: int
    process: dict[str, Any]  #: pid, name, threads
    #: the thread the dump was written for, its signal or exception code, its managed exception
    crash: dict[str, Any] | None
    redaction: dict[str, Any] | None  #: the mark of a dump trim --redact wrote: what it lacks (None: not one)
    runtime: dict[str, Any]  #: flavor, version, where the version came from, the runtime module
    profile: dict[str, Any]  #: the layout profile and its overrides
    memory: dict[str, Any]  #: ranges and bytes the dump holds
    other_streams: list[Any]  #: a minidump's streams of types not read
    gc_heap: dict[str, Any]  #: how it was found, exact or not, segments
    string_method_table: int | None
    string_method_table_base_size: int | None
    types: dict[str, Any] | None  #: the heap's MethodTables: how many, how many named, why the others are not
    contract_descriptor: dict[str, Any]
    warnings: list[str]

    @staticmethod
    def of(data: dict[str, Any]) -> DumpInfo:
        """The info of the engine's ``info`` dict.

        Args:
            data: the engine's ``info``, with ``crash`` added.
        """
        names = {f.name for f in dataclasses.fields(DumpInfo)}
        return DumpInfo(**{k: data.get(k) for k in names})  # type: ignore[arg-type]  # the reader's own keys

    def to_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}


class Runtime:
    """The .NET runtime of a dump: its flavor (coreclr, netfx, mono), version, layout profile, types and heap."""

    def __init__(self, session: Session) -> None:
        self._session = session
        self.heap = Heap(session)

    @property
    def flavor(self) -> str:
        """"coreclr", "netfx" or "mono"."""
        flavor: str = self._session.runtime.flavor
        return flavor

    @property
    def version(self) -> str | None:
        """The runtime's version ("8.0.4"), None where the dump does not tell."""
        version: str | None = self._session.runtime.version
        return version

    @property
    def profile(self) -> str:
        """The name of the layout profile (``formats/``) the dump is read with."""
        name: str = self._session.profile.name
        return name

    @property
    def pointer_size(self) -> int:
        size: int = self._session.profile.pointer_size
        return size

    @property
    def object_header_size(self) -> int:
        """The bytes of an object's header before its object pointer (the sync block word, padded)."""
        size: int = self._session.profile.object.header_size
        return size

    def unnamed_warning(self, method_tables: Iterable[int]) -> str | None:
        """The warning about the types without a name, and why.

        Args:
            method_tables: the MethodTables to look at (a listing's).

        Returns:
            The warning, or None when every one has a name.
        """
        if not self.has_method_tables:
            return None
        unnamed = self._session.why_unnamed(method_tables)  # reason -> count, most first
        n = sum(unnamed.values())
        why = "; ".join(f"{count:,} {reason}" for reason, count in unnamed.items())
        return f"{n:,} {'type has' if n == 1 else 'types have'} no name ({why})" if n else None

    @property
    def has_method_tables(self) -> bool:
        """Whether objects point at MethodTables (CoreCLR, the .NET Framework), not at MonoVTables (Mono), whose
        classes are not read."""
        return self._session.profile.method_table is not None

    def type(self, name_or_method_table: str | int) -> ClrType | None:
        """A type by its name or MethodTable.

        Args:
            name_or_method_table: the name as the DAC or reflection prints it (among the heap's types), or a
                MethodTable's address.

        Returns:
            The type, or None when there is none.

        Raises:
            clrlayout.errors.AmbiguousType: several types have that name (say which by its MethodTable).
        """
        if isinstance(name_or_method_table, int):
            return self.heap.type_of(name_or_method_table)
        found = self.types_named(name_or_method_table)
        if len(found) > 1:  # never a guess: which one is for the caller to say
            raise AmbiguousType(f"{len(found)} types are named {name_or_method_table} (MethodTables "
                                f"{', '.join(f'{t.method_table:#x}' for t in found)}: one per module or loader that "
                                f"loaded it): use types_named(), or give the MethodTable")
        return found[0] if found else None

    def type_name(self, method_table: int) -> str | None:
        """A MethodTable's type name as the DAC prints it.

        Args:
            method_table: the MethodTable's address.

        Returns:
            The name, or None where the dump does not tell.
        """
        name: str | None = self._session.type_name(method_table)
        return name

    def is_named(self, method_table: int, name: str, exact: bool = True) -> bool:
        """Whether a MethodTable's type has a name.

        Args:
            method_table: the MethodTable's address.
            name: the name as the DAC or reflection prints it.
            exact: the whole name (False: a part of it, as SOS's ``-type``).
        """
        return bool(self._session.is_named(method_table, name, exact))

    def names_containing(self, text: str) -> list[str]:
        """A few of the heap's type names that contain a text (to say what was meant).

        Args:
            text: a part of a name.
        """
        return list(self._session.type_names_containing(text))

    def is_string_method_table(self, method_table: int) -> bool:
        """Whether a MethodTable is System.String's.

        Args:
            method_table: the MethodTable's address.
        """
        return bool(self._session.is_string_method_table(method_table))

    def string_method_table(self) -> int:
        """System.String's MethodTable (learned from the heap where the dump does not name it).

        Raises:
            clrlayout.errors.StringTypeNotFound: there is none to be found.
        """
        found: int = self._session.string_method_table()
        return found

    def types_named(self, name: str) -> list[ClrType]:
        """Every type of a name among the heap's types: several where modules or load contexts loaded it.

        Args:
            name: the name as the DAC or reflection prints it.
        """
        return [t for t in (self.heap.type_of(mt) for mt in self._session.method_tables_named(name)) if t is not None]

    def threads(self) -> list[ThreadInfo]:
        """The runtime's managed threads (SOS's ``!threads``), in the order of its thread list.

        Raises:
            clrlayout.model.threads.ThreadsNotFound: the runtime's thread list cannot be read.
        """
        from .threads import managed_threads

        return managed_threads(self._session)

    def stacks(self, threads: list[ThreadInfo] | None = None) -> list[ThreadStack]:
        """The managed call stack of each thread (SOS's ``!clrstack``), walked without the DAC.

        Args:
            threads: some of :meth:`threads` (default: all of them).

        Raises:
            clrlayout.model.stacks.StacksNotWalkable: not a dump whose stacks can be walked (x64 Linux cores of
                .NET Core 3.1, .NET 8 and later).
        """
        from .stacks import thread_stacks

        return thread_stacks(self._session, threads)

    def exception_at(self, address: int) -> dict[str, Any]:
        """The exception object at an address, as SOS's ``!pe`` reads it (type, message, HResult, inner
        exceptions, the stack trace recorded as it was thrown).

        Args:
            address: the exception object's address.

        Raises:
            clrlayout.model.exceptions.NotAnException: no exception object there.
        """
        from .exceptions import exception_at

        return exception_at(self._session, address)

    @property
    def types(self) -> list[ClrType]:
        """The types of the heap's objects (an exact walk learns them), Free included, by MethodTable."""
        session = self._session
        if not session.heap.exact:
            return []
        session.method_tables_named("System.Object")  # learns the heap's types
        return [t for t in (self.heap.type_of(m) for m in sorted(session.mts.known())) if t is not None]


class Dump:
    """An open dump file.  Use as a context manager (it holds the file open)."""

    def __init__(self, session: Session) -> None:
        self._session = session
        self.runtime = Runtime(session)
        self._warned = 0  # how many of the warnings unshown_warnings() gave

    def __enter__(self) -> Dump:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._session.close()

    @property
    def path(self) -> str:
        value: str = self._session.dump.path
        return value

    @property
    def format(self) -> str:
        value: str = self._session.dump.format
        return value

    @property
    def arch(self) -> str:
        value: str = self._session.dump.arch
        return value

    @property
    def os(self) -> str:
        value: str = self._session.dump.os
        return value

    @property
    def pointer_size(self) -> int:
        value: int = self._session.dump.pointer_size
        return value

    @property
    def modules(self) -> list[Module]:
        """The loaded modules (path, base, size, versions)."""
        return list(self._session.dump.modules)

    @property
    def threads(self) -> list[Thread]:
        """The dump's threads (OS id, registers, stack)."""
        return list(self._session.dump.threads)

    @property
    def memory(self) -> AddressSpace:
        """The target's memory (:class:`~clrlayout.dump.addrspace.AddressSpace`: ``read``, ``try_read``, ...)."""
        memory: AddressSpace = self._session.dump.memory
        return memory

    @property
    def info(self) -> DumpInfo:
        """What the dump holds (``info``), without walking the heap (``types`` is None: :meth:`describe`); its
        ``warnings`` are the dump's and what finding these raised, which :attr:`warnings` does not gain."""
        from .threads import crash_of

        return DumpInfo.of(dict(self._session.info, crash=crash_of(self._session)))

    def describe(self) -> DumpInfo:
        """:attr:`info` with the heap's types counted (``types``: a walk of the heap), as ``clrlayout info``
        shows it; a heap that cannot be walked after all leaves ``types`` None and says why in ``warnings``."""
        from ..errors import ClrLayoutError

        data = self.info.to_dict()
        failed: list[str] = []
        try:
            types = self._session.type_census()
        except ClrLayoutError as e:  # a heap that cannot be walked after all: info still says what it can
            types, failed = None, [str(e)]
        warnings = list(dict.fromkeys([*data["warnings"], *self._session.warnings, *failed]))  # the walk's too
        return DumpInfo.of({**data, "types": types, "warnings": warnings})

    def memory_map(self, jobs: int | None = None, progress: Callable[..., Any] | None = None,
                   on_found: Callable[[int], None] = lambda n: None) -> MemoryMap:
        """Where the memory went (``memory``): every byte of the dump by kind, the address space, and the GC
        heap's object and free bytes per heap and generation (:class:`~clrlayout.analyses.memory.MemoryMap`).

        Args:
            jobs: processes that share the heap walk (None: by the heap's size and the cores).
            progress: called with the bytes walked as the walk goes.
            on_found: called with the number of objects found as the walk goes.
        """
        from .summaries import memory_map

        return memory_map(self._session, jobs, progress, on_found)

    def native_heap_if_any(self) -> NativeHeapView | None:
        """glibc's malloc state where the dump has it to read; None where there is none (see :attr:`native_heap`
        for why)."""
        from .native import native_heap_of

        return native_heap_of(self._session)

    @property
    def native_heap(self) -> NativeHeapView:
        """glibc's malloc state of a Linux core (:class:`~clrlayout.model.native.NativeHeapView`: ``mallinfo``,
        ``arenas``, ``chunks()``, ``leaks()``), read once; :class:`~clrlayout.errors.NativeHeapNotFound` where
        there is none to read (a Windows dump, another allocator, a trimmed core)."""
        from .native import native_heap, native_heap_of

        view = native_heap_of(self._session)
        # none to read: read it again for the error that says why
        return view if view is not None else native_heap(self._session.dump, self._session)

    @property
    def warnings(self) -> list[str]:
        """What qualifies the answers (a heuristic scan, memory the dump lacks), as the commands warn."""
        return list(self._session.warnings)

    def unshown_warnings(self) -> list[str]:
        """The warnings that came up since this was last asked (a command prints them before its answer, and
        those its answer raised after it)."""
        warnings = self._session.warnings
        shown, self._warned = self._warned, len(warnings)
        return list(warnings[shown:])

    def add_warning(self, message: str) -> None:
        """Qualify the answers with a warning.

        Args:
            message: what a command found that the reader must know.
        """
        self._session.warnings.append(message)

    @property
    def findings(self) -> Findings:
        """The heap anomalies the walks found (counted; the first ones kept, each at its address)."""
        found: Findings = self._session.findings
        return found

    def problems(self) -> list[str]:
        """Why the answers are not exact and complete (``--strict``): empty when they are."""
        return list(self._session.problems())

    def require_exact(self, what: str) -> None:
        """Raise :class:`~clrlayout.errors.HeapNotFound` (saying why) unless the heap is walked exactly.

        Args:
            what: the answer that needs the exact walk ("statistics by type").
        """
        self._session.require_exact(what)

    @property
    def redaction(self) -> dict[str, Any] | None:
        """The mark of a dump ``trim --redact`` wrote (what it lacks); None for any other dump."""
        mark: dict[str, Any] | None = self._session.dump.redaction
        return mark

    @property
    def redacted(self) -> str | None:
        """One line: who redacted the dump and what it lacks (None: not a dump ``trim --redact`` wrote)."""
        mark = self.redaction
        if mark is None:
            return None
        from ..dump.redaction import describe

        return describe(mark)

    @property
    def truncated_bytes(self) -> int:
        """How many bytes the file lacks of what its own directory says it holds (0: not truncated)."""
        missing: int = self._session.dump.truncated_bytes
        return missing


def open(path: str, *, method_table: int | None = None, profile: str | None = None, heap: str = "auto",
         limits: Limits | None = None, assemblies: tuple[str, ...] | list[str] = (),
         index: str | bool | None = None) -> Dump:
    """Open a dump (a Windows minidump or a Linux core).

    Args:
        path: the dump file.
        method_table: the String MethodTable, where the dump's own cannot be found.
        profile: a layout profile by name (``coreclr-x64@3.1``), instead of the one the dump's runtime selects.
        heap: "auto", "walk" (the exact walk, or fail) or "scan" (the checked scan for strings).
        limits: the bounds on what a dump may make the reader do (:data:`~clrlayout.limits.DEFAULT_LIMITS`).
        assemblies: folders to find assemblies in (as the DAC's metadata locator does).
        index: where the heap graph's index is kept (:mod:`clrlayout.graph.index`): None the default directory
            (``~/.cache/clrlayout/index``), a directory, False none.

    Returns:
        The open :class:`Dump`; use it as a context manager.

    Raises:
        clrlayout.ClrLayoutError: a subclass that says why the dump cannot be read (each with its exit code).
    """
    from ..limits import DEFAULT_LIMITS
    from ..session import open_session

    return Dump(open_session(path, mt=method_table, profile=profile, heap=heap, limits=limits or DEFAULT_LIMITS,
                             assemblies=list(assemblies), index=index))
