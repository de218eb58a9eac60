"""ECMA-335 type signatures (II.23.2): the declared type of a field, decoded from its signature blob.

dnfile gives a field's signature as raw bytes; this is the small decoder the metadata library does not
have.  A :class:`Sig` is a tree: an element type with, as it needs, a TypeDef/TypeRef/TypeSpec token, an
inner type (arrays, pointers, by-refs), the arguments of a generic instantiation, an array's rank, or the
number of a generic parameter.  Bad bytes raise :class:`SignatureError`; depth is bounded.
"""

from __future__ import annotations

from dataclasses import dataclass

#: element types (ECMA-335 II.23.1.16)
VOID, BOOLEAN, CHAR, I1, U1, I2, U2, I4, U4, I8, U8, R4, R8, STRING = range(0x01, 0x0F)
PTR, BYREF, VALUETYPE, CLASS, VAR, ARRAY, GENERICINST, TYPEDBYREF = range(0x0F, 0x17)
I, U, FNPTR, OBJECT, SZARRAY, MVAR, CMOD_REQD, CMOD_OPT = 0x18, 0x19, 0x1B, 0x1C, 0x1D, 0x1E, 0x1F, 0x20  # noqa: E741
SENTINEL, PINNED = 0x41, 0x45
FIELD = 0x06

#: the metadata tables a TypeDefOrRef coded index points into, by its tag (II.24.2.6)
TYPE_DEF_OR_REF = (0x02, 0x01, 0x1B)  # TypeDef, TypeRef, TypeSpec

PRIMITIVE_NAMES = {
    VOID: "System.Void", BOOLEAN: "System.Boolean", CHAR: "System.Char", I1: "System.SByte", U1: "System.Byte",
    I2: "System.Int16", U2: "System.UInt16", I4: "System.Int32", U4: "System.UInt32", I8: "System.Int64",
    U8: "System.UInt64", R4: "System.Single", R8: "System.Double", STRING: "System.String",
    TYPEDBYREF: "System.TypedReference", I: "System.IntPtr", U: "System.UIntPtr", OBJECT: "System.Object",
}

MAX_DEPTH = 32


class SignatureError(Exception):
    """The bytes are not a valid signature."""


@dataclass(frozen=True)
class Sig:
    element: int
    #: CLASS, VALUETYPE, GENERICINST: the type's token (table << 24 | row)
    token: int = 0
    #: SZARRAY, ARRAY, PTR, BYREF: the element (pointed-at) type
    inner: Sig | None = None
    #: GENERICINST: the type arguments
    args: tuple = ()
    #: ARRAY: the rank
    rank: int = 0
    #: VAR, MVAR: the parameter's number
    number: int = 0
    #: GENERICINST: whether the generic type is a value type
    value_type: bool = False


class _Reader:
    def __init__(self, data: bytes):
        self.data = data
        self.pos = 0

    def byte(self) -> int:
        if self.pos >= len(self.data):
            raise SignatureError("signature ends early")
        b = self.data[self.pos]
        self.pos += 1
        return b

    def compressed(self) -> int:
        """An unsigned compressed integer (II.23.2)."""
        b = self.byte()
        if b & 0x80 == 0:
            return b
        if b & 0xC0 == 0x80:
            return (b & 0x3F) << 8 | self.byte()
        if b & 0xE0 == 0xC0:
            return (b & 0x1F) << 24 | self.byte() << 16 | self.byte() << 8 | self.byte()
        raise SignatureError(f"bad compressed integer lead byte {b:#x}")

    def token(self) -> int:
        coded = self.compressed()
        tag = coded & 3
        if tag > 2:
            raise SignatureError("bad TypeDefOrRef tag")
        return TYPE_DEF_OR_REF[tag] << 24 | coded >> 2


def field_signature(data: bytes) -> Sig:
    """The type of a field from its signature blob (``FIELD CustomMod* Type``)."""
    r = _Reader(bytes(data))
    if r.byte() & 0x0F != FIELD:
        raise SignatureError("not a field signature")
    return _type(r, 0)


def method_signature(data: bytes) -> tuple[Sig, tuple[Sig, ...]]:
    """The return type and the parameters' types of a MethodDef's signature blob (II.23.2.1)."""
    r = _Reader(bytes(data))
    call = r.byte()
    if call & 0x10:  # generic: its number of type parameters
        r.compressed()
    count = r.compressed()
    if count > 1024:
        raise SignatureError("implausible number of parameters")
    returns = _type(r, 0)
    return returns, tuple(_type(r, 0) for _ in range(count))


def type_spec(data: bytes) -> Sig:
    """The type of a TypeSpec blob."""
    return _type(_Reader(bytes(data)), 0)


def _type(r: _Reader, depth: int) -> Sig:
    if depth > MAX_DEPTH:
        raise SignatureError("signature nested too deep")
    e = r.byte()
    while e in (CMOD_REQD, CMOD_OPT, PINNED, SENTINEL):  # modifiers do not change the layout
        if e in (CMOD_REQD, CMOD_OPT):
            r.token()
        e = r.byte()
    if e in PRIMITIVE_NAMES:
        return Sig(e)
    if e in (CLASS, VALUETYPE):
        return Sig(e, token=r.token())
    if e in (PTR, BYREF, SZARRAY):
        return Sig(e, inner=_type(r, depth + 1))
    if e in (VAR, MVAR):
        return Sig(e, number=r.compressed())
    if e == ARRAY:
        inner = _type(r, depth + 1)
        rank = r.compressed()
        for _ in range(r.compressed()):  # sizes
            r.compressed()
        for _ in range(r.compressed()):  # lower bounds (signed, compressed the same way)
            r.compressed()
        return Sig(ARRAY, inner=inner, rank=rank)
    if e == GENERICINST:
        kind = r.byte()
        if kind not in (CLASS, VALUETYPE):
            raise SignatureError("generic instantiation of neither a class nor a value type")
        token = r.token()
        count = r.compressed()
        if count > 256:
            raise SignatureError("implausible number of type arguments")
        return Sig(GENERICINST, token=token, args=tuple(_type(r, depth + 1) for _ in range(count)),
                   value_type=kind == VALUETYPE)
    if e == FNPTR:
        _method(r, depth + 1)
        return Sig(FNPTR)
    raise SignatureError(f"unknown element type {e:#x}")


def _method(r: _Reader, depth: int) -> None:
    """Skips a method signature (a function pointer's)."""
    call = r.byte()
    if call & 0x10:  # generic
        r.compressed()
    params = r.compressed()
    if params > 1024:
        raise SignatureError("implausible number of parameters")
    for _ in range(params + 1):  # the return type, then the parameters
        _type(r, depth)
