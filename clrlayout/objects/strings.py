"""System.String objects: decoding one object's bytes with the profile's construct struct."""

from __future__ import annotations

from dataclasses import dataclass

from construct import ConstructError

from ..dump.addrspace import AddressSpace
from ..errors import DecodeError
from ..findings import FindingKind, Findings
from ..runtime.profiles import Profile
from ..runtime.structs import ClrStructs
from .header import HeaderState, decode_header


@dataclass(frozen=True)
class StringObject:
    """A string as SOS ``!dumpheap``/``!DumpObj`` shows it, plus its header word."""

    address: int  # the object pointer (address of the MethodTable pointer), as SOS prints it
    method_table: int
    length: int
    size: int  # SOS size: BaseSize + 2 * length, unaligned
    aligned_size: int  # bytes it occupies on the GC heap
    header: int  # the 32-bit sync block word (Mono: the pointer-sized lock word)
    value: str | None  # None when the command does not need the characters
    large: bool = False  # on the large object heap (or the pinned one): 8-byte alignment
    terminated: bool = True
    header_padding: int = 0  # the DWORD below the sync block word on 64-bit (0 by design)
    #: the heap it is on: gen0, gen1, gen2, loh, poh, frozen; soh where the generation is not known
    heap: str = "soh"

    @property
    def gen(self) -> int | None:
        """SOS's generation number: 0, 1, 2; 3 for the LOH, 4 for the POH; None (frozen, or not known)."""
        from ..heap.segments import HEAP_CODES, generation_number

        return generation_number(HEAP_CODES[self.heap])

    def header_state(self, profile: Profile) -> HeaderState:
        return decode_header(self.header, profile.header, is_string=True)


def object_span(profile: Profile, address: int, length: int, large: bool) -> tuple[int, int]:
    """(start, size) of a string's bytes: from its header through its alignment padding."""
    return address - profile.object.header_size, profile.string_aligned_size(length, large)


def decode_string_bytes(profile: Profile, address: int, data: bytes, large: bool = False,
                        findings: Findings | None = None) -> StringObject:
    """Decode a string from ``data`` = its bytes from header through padding (see :func:`object_span`)."""
    structs = ClrStructs.of(profile)
    try:
        obj = structs.string_object(large).parse(data)
    except (ConstructError, UnicodeDecodeError) as e:
        raise DecodeError(f"cannot decode System.String ({type(e).__name__}: {e})", address) from e
    prefix = obj.prefix
    if profile.object.header_size:
        header = prefix.header.m_SyncBlockValue
    else:  # Mono: the lock word is the object's second field
        header = prefix.get("synchronisation", 0)
    pad = prefix.header.get("m_alignpad", b"") if profile.object.header_size else b""
    pad_value = int.from_bytes(pad, "little") if pad else 0
    terminated = obj.terminator == 0
    if findings is not None:
        if not terminated:
            findings.add(FindingKind.STRING_NOT_TERMINATED, address,
                         f"terminator is {obj.terminator:#06x}, not 0 (length {prefix.m_StringLength})")
        if pad_value:
            findings.add(FindingKind.STRING_BAD_HEADER_PADDING, address,
                         f"header padding DWORD is {pad_value:#x}, not 0")
    return StringObject(
        address=address,
        method_table=prefix.m_pMethTab & ~profile.object.method_table_unmask,
        length=prefix.m_StringLength,
        size=obj.sos_size,
        aligned_size=obj.aligned_size,
        header=header,
        value=obj.m_FirstChar,
        large=large,
        terminated=terminated,
        header_padding=pad_value,
    )


def read_string(space: AddressSpace, profile: Profile, address: int, large: bool = False,
                findings: Findings | None = None) -> StringObject:
    """Read and decode the string at ``address``; the length is checked against the limits first."""
    length = space.read_u32(address + profile.string.length_offset)
    space.limits.check("string length", length, "max_string_length")
    start, size = object_span(profile, address, length, large)
    return decode_string_bytes(profile, address, space.read(start, size), large, findings)


def read_strings(space: AddressSpace, profile: Profile, addresses, large, findings: Findings | None = None) -> list:
    """The strings at ``addresses`` that can be read; each one that cannot is a finding, not an error
    (a partial or damaged dump still gives everything else)."""
    from ..errors import AddressError, DecodeError, LimitExceeded

    out = []
    for address in addresses:
        try:
            out.append(read_string(space, profile, address, large(address) if callable(large) else large, findings))
        except AddressError as e:
            if findings is not None:
                findings.add(FindingKind.MEMORY_MISSING, address, f"string bytes missing: {e}")
        except LimitExceeded as e:
            if findings is not None:
                findings.add(FindingKind.STRING_TOO_LONG, address, str(e))
        except DecodeError as e:
            if findings is not None:
                findings.add(FindingKind.STRING_NOT_TERMINATED, address, str(e))
    return out
