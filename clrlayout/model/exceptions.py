"""An exception object as SOS's ``!pe`` prints it: its type, message, HResult, inner exceptions and the stack trace
the runtime recorded while it unwound (``Exception._stackTrace``: a header then one element per frame — IP, SP,
MethodDesc, flags; dotnet/runtime src/coreclr/vm/excep.h ``StackTraceElement``, ``StackTraceArray``).  A frame's
method is named through the runtime's MethodDesc (its chunk's MethodTable and the method's metadata token, at
the offsets the contract descriptor gives: .NET 9 and later) and the MethodDef row of its module's metadata
(:mod:`.methods`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..errors import ClrLayoutError, ExitCode
from .methods import MethodNamer

if TYPE_CHECKING:
    from ..session import Session
    from .heap import Heap

#: inner exceptions followed at the most; frames read at the most from one stack trace
MAX_INNER = 32
MAX_FRAMES = 4096
#: StackTraceElement on 64-bit: ip, sp, pFunc (MethodDesc*), flags (INT, padded)
ELEMENT = 32
#: the StackTraceArray's header before its elements: m_size, m_thread
HEADER = 16
METHOD_DEF = 0x06000000


class NotAnException(ClrLayoutError):
    code = "not-an-exception"
    exit_code = ExitCode.NO_RUNTIME


def exception_at(session: Session, address: int) -> dict[str, Any]:
    """{address, type, message, hresult, frames: [{ip, sp, method_desc, method}], inner: {...} or None}."""
    from .heap import Heap

    heap = Heap(session)
    seen: set[int] = set()
    first = _one(session, heap, address, seen)
    record, at = first, first
    while at["inner_address"] and len(seen) < MAX_INNER and at["inner_address"] not in seen:
        at["inner"] = _one(session, heap, at["inner_address"], seen)
        at = at["inner"]
    return record


def _one(session: Session, heap: Heap, address: int, seen: set[int]) -> dict[str, Any]:
    obj = heap.object_at(address)
    if obj is None or obj.address != address:
        raise NotAnException(f"{address:#x} is not the start of an object")
    if not _is_exception(session, obj.method_table):
        raise NotAnException(f"{address:#x} is a {obj.type.name or 'type without a name'}, not an exception")
    seen.add(address)
    f = obj.fields
    return {"address": address, "type": obj.type.name, "message": _string(heap, f.get("_message")),
            "hresult": f.get("_HResult"), "frames": _frames(session, heap, f.get("_stackTrace")),
            "inner_address": f.get("_innerException") or 0, "inner": None}


def _is_exception(session: Session, mt: int) -> bool:
    layout = session.type_layout(mt)
    if layout is None:
        return False
    return any(session.type_name(p) == "System.Exception" for p in (mt, *layout.parents))


def _string(heap: Heap, address: object) -> str | None:
    if not isinstance(address, int) or not address:
        return None
    obj = heap.object_at(address)
    return obj.as_string() if obj is not None and obj.address == address else None


def _frames(session: Session, heap: Heap, address: object) -> list[dict[str, Any]]:
    """The frames of a _stackTrace: a byte[] (the StackTraceArray), or an object[] whose first element is it."""
    if not isinstance(address, int) or not address:
        return []
    obj = heap.object_at(address)
    if obj is None or obj.address != address:
        return []
    space = session.dump.memory
    ptr = space.pointer_size
    if obj.type.name == "System.Object[]" and obj.count:
        first = space.try_read_pointer(address + 2 * ptr)
        obj = heap.object_at(first) if first else None
        if obj is None or obj.address != first:
            return []
    if obj.type.name not in ("System.Byte[]", "System.SByte[]") or ptr != 8:
        return []
    data = space.try_read(obj.address + 2 * ptr, obj.count) or b""
    if len(data) < HEADER:
        return []
    size = int.from_bytes(data[:8], "little")
    count = min(size, (len(data) - HEADER) // ELEMENT, MAX_FRAMES)
    namer = MethodNamer(session)
    out = []
    for i in range(count):
        at = HEADER + i * ELEMENT
        ip, sp, md = (int.from_bytes(data[at + k : at + k + 8], "little") for k in (0, 8, 16))
        out.append({"ip": ip, "sp": sp, "method_desc": md, "method": namer.name(md)})
    return out
