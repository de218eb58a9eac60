"""An exception object as SOS's ``!pe`` prints it: its type, message, HResult, inner exceptions and the stack trace
the runtime recorded while it unwound (``Exception._stackTrace``: a header then one element per frame — IP, SP,
MethodDesc, flags; dotnet/runtime src/coreclr/vm/excep.h ``StackTraceElement``, ``StackTraceArray``).  A frame's
method is named through the runtime's MethodDesc (its chunk's MethodTable and the method's metadata token, at
the offsets the contract descriptor gives: .NET 9 and later) and the MethodDef row of its module's metadata."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..errors import ClrLayoutError, ExitCode

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
    namer = _MethodNamer(session)
    out = []
    for i in range(count):
        at = HEADER + i * ELEMENT
        ip, sp, md = (int.from_bytes(data[at + k : at + k + 8], "little") for k in (0, 8, 16))
        out.append({"ip": ip, "sp": sp, "method_desc": md, "method": namer.name(md)})
    return out


class _MethodNamer:
    """``Type.Method`` of a MethodDesc: its chunk's MethodTable and its MethodDef token, where the MethodDesc's
    layout is known — the runtime's contract descriptor (.NET 9+), else formats/type-system.toml's
    ``method_desc`` for the version (a RID taken only where the type owns that method)."""

    def __init__(self, session: Session) -> None:
        self.session = session
        version = session.runtime.version_tuple
        contract = session.contract if session.runtime.flavor == "coreclr" and version and version >= (9,) else None
        self.contract = contract if contract is not None and not isinstance(contract, str) else None
        self.profile: dict[str, Any] | None = None
        if self.contract is None and session.runtime.flavor == "coreclr" and version:
            from ..formats import load
            from ..runtime.profiles import version_matches

            self.profile = next((m for m in load("type-system").get("method_desc", [])
                                 if m["pointer_size"] == session.dump.memory.pointer_size
                                 and version_matches(m["versions"], version)), None)

    def _layout(self) -> tuple[dict[str, int], list[int]] | None:
        """The offsets (chunk_index, token_remainder, alignment, chunk_size, chunk_method_table,
        chunk_token_range) and the remainder widths to try."""
        c = self.contract
        if c is not None:
            try:
                desc, chunk_t = c.types["MethodDesc"], c.types["MethodDescChunk"]
                return ({"chunk_index": desc["ChunkIndex"], "token_remainder": desc["Flags3AndTokenRemainder"],
                         "alignment": int(c.globals["MethodDescAlignment"]), "chunk_size": chunk_t["!"],
                         "chunk_method_table": chunk_t["MethodTable"],
                         "chunk_token_range": chunk_t["FlagsAndTokenRange"]},
                        [int(c.globals["MethodDescTokenRemainderBitCount"])])
            except (KeyError, TypeError, ValueError):
                return None
        if self.profile is not None:
            return self.profile, list(self.profile["remainder_bits"])
        return None

    def name(self, md: int) -> str | None:
        found = self._layout() if md else None
        if found is None:
            return None
        lay, widths = found
        space = self.session.dump.memory
        head = space.try_read(md, lay["token_remainder"] + 2)
        index_byte = space.try_read(md + lay["chunk_index"], 1)
        if head is None or index_byte is None:
            return None
        chunk = md - index_byte[0] * lay["alignment"] - lay["chunk_size"]
        mt = space.try_read_pointer(chunk + lay["chunk_method_table"])
        if mt and lay.get("chunk_method_table_relative"):  # 2.x: an offset from the field (odd: an indirection)
            at = chunk + lay["chunk_method_table"] + (mt & ~1)
            mt = space.try_read_pointer(at) if mt & 1 else at & ((1 << 64) - 1)
        rng_bytes = space.try_read(chunk + lay["chunk_token_range"], 2)
        if not mt or rng_bytes is None:
            return None
        flags3 = int.from_bytes(head[lay["token_remainder"]:lay["token_remainder"] + 2], "little")
        rng = int.from_bytes(rng_bytes, "little")
        type_name = self.session.type_name(mt)
        image = self.session.names.image_of(mt)
        metadata = image.metadata if image is not None else None
        if type_name is None or metadata is None:
            return None
        typedef = self.session.names.token_of(mt) & 0xFFFFFF
        for bits in widths:
            rid = ((rng & ((1 << (24 - bits)) - 1)) << bits) | (flags3 & ((1 << bits) - 1))  # range, remainder
            if self.contract is None and metadata.method_owner(rid) != typedef:
                continue  # not this width: the type does not own that method
            method = metadata.method_name(rid)
            if method is not None:
                return f"{type_name}.{method}"
        return None
