"""Names of managed methods as SOS prints them (``Namespace.Type.Method(Parameter, ...)``): a MethodDesc's type and
MethodDef token, read at the runtime's layout, and the method's name and signature from its module's metadata.
Parameters are named as the runtime's TypeString does in a signature: primitives by their short names
(``Int32``, ``Byte*``), other types by their full names (``System.String[]``), generic instantiations as
``System.Span`1<Byte>``, by-reference parameters with `` ByRef``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..types import signatures as S

if TYPE_CHECKING:
    from ..session import Session
    from ..types.metadata import Metadata

#: primitives in a signature, as TypeString names them (the short name; String, Object and TypedReference keep
#: their namespace)
SHORT = {S.VOID: "Void", S.BOOLEAN: "Boolean", S.CHAR: "Char", S.I1: "SByte", S.U1: "Byte", S.I2: "Int16",
         S.U2: "UInt16", S.I4: "Int32", S.U4: "UInt32", S.I8: "Int64", S.U8: "UInt64", S.R4: "Single",
         S.R8: "Double", S.I: "IntPtr", S.U: "UIntPtr", S.STRING: "System.String", S.OBJECT: "System.Object",
         S.TYPEDBYREF: "System.TypedReference"}
PRIMITIVE_SHORT = {f"System.{v}": v for v in SHORT.values() if "." not in v}
MAX_DEPTH = 16
#: MethodDesc::GetClassification() of an InstantiatedMethodDesc (mcInstantiated); its type arguments at the most
MC_INSTANTIATED, MAX_ARGS = 5, 64
#: a DynamicMethodDesc's classification (mcDynamic); its name and signature read at the most
MC_DYNAMIC, MAX_NAME = 7, 4096


def _parameters(metadata: Metadata, rid: int, context: _Context | None = None) -> str:
    blob = metadata.method_signature(rid)
    if blob is None:
        return "?"
    try:
        _, params = S.method_signature(blob)
    except S.SignatureError:
        return "?"
    return ", ".join(_type(metadata, p, 0, context) for p in params)


def _type(metadata: Metadata, sig: S.Sig | None, depth: int, context: _Context | None = None) -> str:
    if sig is None or depth > MAX_DEPTH:
        return "?"
    e = sig.element
    if e in SHORT:
        return SHORT[e]
    if e in (S.CLASS, S.VALUETYPE):
        return _token(metadata, sig.token, depth, context)
    if e == S.SZARRAY:
        return _type(metadata, sig.inner, depth + 1, context) + "[]"
    if e == S.ARRAY:
        return _type(metadata, sig.inner, depth + 1, context) + "[" + "," * max(0, sig.rank - 1) + "]"
    if e == S.PTR:
        return _type(metadata, sig.inner, depth + 1, context) + "*"
    if e == S.BYREF:
        return _type(metadata, sig.inner, depth + 1, context) + " ByRef"
    if e == S.GENERICINST:
        args = ",".join(_type(metadata, a, depth + 1, context) for a in sig.args)
        return f"{_token(metadata, sig.token, depth, context)}<{args}>"
    if e in (S.VAR, S.MVAR):
        return context.argument(e == S.MVAR, sig.number) if context is not None \
            else ("!!" if e == S.MVAR else "!") + str(sig.number)
    if e == S.FNPTR:
        return "FNPTR"
    return "?"


def _token(metadata: Metadata, token: int, depth: int, context: _Context | None = None) -> str:
    """A type by its token; a nested type by its own name only (as TypeString prints it in a signature)."""
    table, rid = token >> 24, token & 0xFFFFFF
    if table == 0x02:
        return (metadata.type_name(rid) or "?").rsplit("+", 1)[-1]
    if table == 0x01:
        ref = metadata.type_ref(rid)
        return ref[0].rsplit("+", 1)[-1] if ref is not None else "?"
    blob = metadata.type_spec(rid)
    try:
        return _type(metadata, S.type_spec(blob), depth + 1, context) if blob is not None else "?"
    except S.SignatureError:
        return "?"


class MethodNamer:
    """``Type.Method(Parameters)`` of a MethodDesc as the DAC's GetMethodDescName prints it: its chunk's
    MethodTable and its MethodDef token, where the MethodDesc's layout is known — the runtime's contract
    descriptor (.NET 9+), else formats/type-system.toml's ``method_desc`` for the version (a RID taken only where
    the type owns that method) — and the method's signature in its module's metadata."""

    def __init__(self, session: Session) -> None:
        self.session = session
        #: the dump's memory, then its modules' files (made when a dynamic method is first named)
        self._files: Any = None
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
                inst = c.types.get("InstantiatedMethodDesc", {})
                stored, dynamic = c.types.get("StoredSigMethodDesc", {}), c.types.get("DynamicMethodDesc", {})
                return ({"chunk_index": desc["ChunkIndex"], "token_remainder": desc["Flags3AndTokenRemainder"],
                         "alignment": int(c.globals["MethodDescAlignment"]), "chunk_size": chunk_t["!"],
                         "chunk_method_table": chunk_t["MethodTable"],
                         "chunk_token_range": chunk_t["FlagsAndTokenRange"], "flags": desc["Flags"],
                         "per_inst_info": inst.get("PerInstInfo"), "num_generic_args": inst.get("NumGenericArgs"),
                         "stored_sig": stored.get("Sig"), "stored_sig_size": stored.get("cSig"),
                         "dynamic_name": dynamic.get("MethodName")},
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
        if metadata is None:
            return None
        typedef = self.session.names.token_of(mt) & 0xFFFFFF
        dynamic = self._dynamic(md, lay, metadata)
        if dynamic is not None:  # an IL stub or a DynamicMethod: its name and signature are its own, its type
            if type_name is None and not typedef:  # one the runtime made without metadata, named as SOS names it
                type_name = "ILStubClass" if dynamic.startswith("IL_STUB") else "DynamicClass"
            return f"{type_name}.{dynamic}" if type_name is not None else None
        if type_name is None:
            return None
        for bits in widths:
            rid = ((rng & ((1 << (24 - bits)) - 1)) << bits) | (flags3 & ((1 << bits) - 1))  # range, remainder
            if self.contract is None and metadata.method_owner(rid) != typedef:
                continue  # not this width: the type does not own that method
            method = metadata.method_name(rid)
            if method is not None:
                context = _Context(self, self.session.names.type_arguments(mt) or [],
                                   self._method_arguments(md, lay) or [])
                inst = "[" + ",".join(f"[{context.full(h)}]" for h in context.method_args) + "]" \
                    if context.method_args else ""
                return f"{type_name}.{method}{inst}({_parameters(metadata, rid, context)})"
        return None

    def _dynamic(self, md: int, lay: dict[str, Any], metadata: Metadata) -> str | None:
        """``Name(Parameters)`` of a dynamic method (classification 7): the name the runtime keeps (a C string) and
        the signature it stored, whose tokens are its type's module's; None for another kind of method."""
        space = self.session.dump.memory
        flags = space.try_read(md + lay["flags"], 2) if lay.get("flags") is not None else None
        if flags is None or int.from_bytes(flags, "little") & 7 != MC_DYNAMIC or lay.get("dynamic_name") is None:
            return None
        name_at = space.try_read_pointer(md + lay["dynamic_name"])
        # an IL stub's name is a literal of the runtime's module: in its file where a heap dump leaves it out
        if self._files is None:
            from ..runtime.imagememory import ImageBackedMemory

            self._files = ImageBackedMemory(space, self.session.dump.file_mappings, self.session.names.images.file)
        files = self._files
        raw = next((r for n in (MAX_NAME, 256, 64) if name_at and (r := files.try_read(name_at, n))), None)
        sig_at = space.try_read_pointer(md + lay["stored_sig"])
        size = space.try_read(md + lay["stored_sig_size"], 4)
        if raw is None or not sig_at or size is None:
            return None
        name = raw.split(b"\0", 1)[0].decode("utf-8", "replace")
        blob = files.try_read(sig_at, min(int.from_bytes(size, "little"), MAX_NAME))
        params = "?"
        if blob is not None:
            try:
                _, sig = S.method_signature(blob)
                params = ", ".join(_type(metadata, p, 0) for p in sig)
            except S.SignatureError:
                pass
        return f"{name}({params})"

    def _method_arguments(self, md: int, lay: dict[str, Any]) -> list[int] | None:
        """The type handles a generic method's instantiation (an InstantiatedMethodDesc: classification 5) is of."""
        space = self.session.dump.memory
        flags = space.try_read(md + lay["flags"], 2) if lay.get("flags") is not None else None
        if flags is None or int.from_bytes(flags, "little") & 7 != MC_INSTANTIATED or lay.get("per_inst_info") is None:
            return None
        per_inst = space.try_read_pointer(md + lay["per_inst_info"])
        count = space.try_read(md + lay["num_generic_args"], 2)
        if not per_inst or count is None or not 0 < int.from_bytes(count, "little") <= MAX_ARGS:
            return None
        data = space.try_read(per_inst, 8 * int.from_bytes(count, "little"))
        return None if data is None else [int.from_bytes(data[k : k + 8], "little") for k in range(0, len(data), 8)]


class _Context:
    """The type arguments a signature's type parameters (``!n``, ``!!n``) stand for."""

    def __init__(self, namer: MethodNamer, type_args: list[int], method_args: list[int]):
        self.namer = namer
        self.type_args = type_args
        self.method_args = method_args

    def full(self, handle: int) -> str:
        names = self.namer.session.names
        return f"{names.name(handle) or '?'}, {names.assembly_name(handle) or '?'}"

    def argument(self, method: bool, number: int) -> str:
        args = self.method_args if method else self.type_args
        if number >= len(args):
            return ("!!" if method else "!") + str(number)
        name = self.namer.session.names.name(args[number]) or "?"
        return PRIMITIVE_SHORT.get(name, name)
