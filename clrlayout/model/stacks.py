"""Managed call stacks in the model (SOS's ``!clrstack``): each managed thread's frames — its managed methods,
named as SOS names them, and the runtime's explicit Frames (transitions to native code, exception dispatch) — as
the runtime's stack walker finds them (:mod:`clrlayout.runtime.stackwalk`), without the DAC.  Numbers only;
presenters format them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..errors import ClrLayoutError, ExitCode

if TYPE_CHECKING:
    from ..runtime.stackwalk import StackWalker
    from ..session import Session
    from .threads import ThreadInfo


class StacksNotWalkable(ClrLayoutError):
    """This dump's managed stacks cannot be walked (an architecture, runtime or dump the walker does not know)."""

    code = "stacks-not-walkable"
    exit_code = ExitCode.NO_RUNTIME


@dataclass(frozen=True)
class Frame:
    """One frame of a managed stack: a managed method's (``kind`` "managed") or an explicit Frame's ("frame")."""

    kind: str
    #: the stack pointer and instruction pointer of the frame (an explicit Frame's: where the walk met it)
    sp: int
    ip: int
    #: the managed method (an explicit Frame's: the method it is for, where it says), its name as SOS prints it
    method_desc: int
    method: str | None
    #: an explicit Frame's address and type (InlinedCallFrame...)
    frame: int = 0
    frame_name: str = ""
    #: the IP's offset in its method's code (managed frames)
    offset: int | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "sp": self.sp, "ip": self.ip, "method_desc": self.method_desc,
                "method": self.method, "frame": self.frame, "frame_name": self.frame_name, "offset": self.offset}


@dataclass(frozen=True)
class ThreadStack:
    thread: ThreadInfo
    frames: tuple[Frame, ...]
    #: why the walk stopped before the end of the stack ("": it did not)
    error: str = ""


def stack_walker(session: Session) -> StackWalker:
    """The runtime's stack walker for this dump.

    Raises:
        StacksNotWalkable: not an x64 dump, or a runtime whose code map and Frames are not known (the contract
            descriptor of .NET 9+ and formats/stack-walk.toml's layouts say where they are).
    """
    from ..runtime.stackwalk import StackWalker

    walker = session.stack_walker()
    if not isinstance(walker, StackWalker):
        raise StacksNotWalkable(str(walker))
    return walker


def thread_stacks(session: Session, threads: list[ThreadInfo] | None = None) -> list[ThreadStack]:
    """The managed stack of each thread (every managed thread of the runtime's list by default).

    Raises:
        StacksNotWalkable: see :func:`stack_walker`.
        ThreadsNotFound: the runtime's thread list cannot be read.
    """
    from .methods import MethodNamer
    from .threads import managed_threads

    walker = stack_walker(session)
    if threads is None:
        threads = managed_threads(session)
    registers = {t.id: t.context(session.dump.arch) for t in session.dump.threads}
    namer = MethodNamer(session)
    known: dict[int, str | None] = {}

    def name(md: int) -> str | None:
        if md and md not in known:
            known[md] = namer.name(md)
        return known.get(md)

    out = []
    for t in threads:
        walk = walker.walk(registers.get(t.os_id, {}), t.frame)
        frames = tuple(Frame("frame" if f.frame else "managed", f.sp, f.ip, f.method_desc, name(f.method_desc),
                             f.frame, f.frame_name, f.ip - f.code.start if f.code is not None else None)
                       for f in walk.frames)
        out.append(ThreadStack(t, frames, walk.error))
    return out
