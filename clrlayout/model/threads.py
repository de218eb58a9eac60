"""The runtime's managed threads in the model (SOS's ``!threads``): :func:`managed_threads` reads the runtime's
thread list (:mod:`clrlayout.runtime.threadstore`) and resolves what its handles hold — the managed Thread object
and its name, the exception the thread last threw, its type and message.  Numbers only; presenters format them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..errors import ClrLayoutError, ExitCode

if TYPE_CHECKING:
    from ..session import Session
    from .heap import Heap, HeapObject


class ThreadsNotFound(ClrLayoutError):
    """The runtime's thread list cannot be read from this dump (neither a contract descriptor nor a Thread layout)."""

    code = "threads-not-found"
    exit_code = ExitCode.NO_RUNTIME


@dataclass(frozen=True)
class ThreadInfo:
    os_id: int
    managed_id: int
    #: the runtime's native Thread
    address: int
    #: Thread._name (m_Name before .NET Core 3.0; None: unnamed, or its Thread object is not in the dump)
    name: str | None
    #: "cooperative" (in managed code: the GC waits for it) or "preemptive"
    gc_mode: str
    state: int
    flags: tuple[str, ...]
    #: "finalizer", "gc" or ""
    special: str
    frame: int
    #: the managed System.Threading.Thread object (0: none)
    thread_object: int
    #: the exception the thread last threw: {"address", "type", "message"}, or None
    exception: dict[str, Any] | None
    #: the locks it holds; None where the runtime does not count them (.NET 8 and later)
    lock_count: int | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"os_id": self.os_id, "managed_id": self.managed_id, "address": self.address, "name": self.name,
                "gc_mode": self.gc_mode, "state": self.state, "flags": list(self.flags), "special": self.special,
                "frame": self.frame, "thread_object": self.thread_object, "exception": self.exception,
                "lock_count": self.lock_count}


def managed_threads(session: Session) -> list[ThreadInfo]:
    """The runtime's managed threads (SOS's ``!threads``).

    Args:
        session: the engine over the dump.

    Raises:
        ThreadsNotFound: the runtime's thread list cannot be read (no contract descriptor, and no Thread layout in
            formats/thread-state.toml for this runtime, or one its threads do not fit).
    """
    from .heap import Heap

    found = session.runtime_threads()
    if isinstance(found, str):
        raise ThreadsNotFound(found)
    heap = Heap(session)
    space = session.dump.memory
    out = []
    for t in found:
        obj = _object(heap, space.try_read_pointer(t.exposed_handle) if t.exposed_handle else 0)
        name = _string(heap, obj.fields.get("_name", obj.fields.get("m_Name"))) if obj is not None else None
        thrown = _object(heap, space.try_read_pointer(t.last_thrown_handle) if t.last_thrown_handle else 0)
        exception: dict[str, Any] | None = None
        if thrown is not None:
            exception = {"address": thrown.address, "type": thrown.type.name,
                         "message": _string(heap, thrown.fields.get("_message"))}
        out.append(ThreadInfo(t.os_id, t.managed_id, t.address, name,
                              "cooperative" if t.preemptive_gc_disabled else "preemptive", t.state,
                              tuple(t.flags()), t.special, t.frame, obj.address if obj is not None else 0, exception,
                              t.lock_count))
    return out


def _object(heap: Heap, address: int | None) -> HeapObject | None:
    if not address:
        return None
    obj = heap.object_at(address)
    return obj if obj is not None and obj.address == address else None


def _string(heap: Heap, address: object) -> str | None:
    obj = _object(heap, address) if isinstance(address, int) else None
    return obj.as_string() if obj is not None else None


#: signal numbers a crash dump names (Linux)
SIGNALS = {4: "SIGILL", 5: "SIGTRAP", 6: "SIGABRT", 7: "SIGBUS", 8: "SIGFPE", 11: "SIGSEGV", 3: "SIGQUIT",
           9: "SIGKILL", 15: "SIGTERM"}


def crash_of(session: Session) -> dict[str, Any] | None:
    """What the dump was written for.

    Args:
        session: the engine over the dump.

    Returns:
        The reader's ``crash`` with the signal named and, where the runtime's threads can be read (.NET 9+), the
        exception the crashing thread has in flight; None where the dump was not written for a crash.
    """
    crash = session.dump.crash
    if not crash:
        return None
    out = dict(crash)
    if "signal" in out:
        out["signal_name"] = SIGNALS.get(out["signal"])
    try:
        threads = managed_threads(session)
    except ClrLayoutError:
        return out
    for t in threads:
        if t.os_id == crash["thread"]:
            out["managed_id"] = t.managed_id
            out["exception"] = t.exception
    return out
