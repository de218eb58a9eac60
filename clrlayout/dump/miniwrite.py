"""Writing a trimmed minidump: the describing streams rewritten with new RVAs, memory in a Memory64List."""

from __future__ import annotations

import io

from construct import Array, ConstructError

from ..errors import MalformedDump
from .copying import clip, copy_range, merge
from .minidump import (
    COMMENT_A,
    MEMORY64_LIST,
    MINIDUMP_DIRECTORY,
    MINIDUMP_HEADER,
    MINIDUMP_MEMORY64_LIST_HEADER,
    MINIDUMP_MEMORY_DESCRIPTOR64,
    MINIDUMP_MODULE,
    MINIDUMP_THREAD,
    MINIDUMP_WITH_FULL_MEMORY,
    MISC_INFO,
    MODULE_LIST,
    MODULE_SIZE,
    SYSTEM_INFO,
    THREAD_LIST,
    THREAD_SIZE,
)
from .redaction import COMMENT_PREFIX, encode

# streams copied byte for byte (they hold no RVAs): MiscInfo (but for trim --redact), MemoryInfoList, ThreadInfoList
VERBATIM = {MISC_INFO, 16, 17}
SYSTEM_INFO_CSD_RVA = 24  # offset of CSDVersionRva in MINIDUMP_SYSTEM_INFO
STACK_RVA_OFFSET = 36  # offset of Stack.Memory.Rva in MINIDUMP_THREAD


class _Blob:
    """The non-memory part of the new file, built in memory (it is small)."""

    def __init__(self, start: int):
        self.start = start
        self.buf = io.BytesIO()

    def add(self, data: bytes, align: int = 4) -> int:
        pad = (-(self.start + self.buf.tell())) % align
        self.buf.write(b"\0" * pad)
        rva = self.start + self.buf.tell()
        self.buf.write(data)
        return rva

    @property
    def end(self) -> int:
        return self.start + self.buf.tell()


MAX_STREAM = 64 * 1024 * 1024


def _read(source, rva: int, size: int) -> bytes:
    if size > MAX_STREAM:
        raise MalformedDump(f"a stream of {size:,} bytes is over the limit", source.path)
    data = source.pread(rva, size)
    if len(data) != size:
        raise MalformedDump(f"stream data at {rva:#x} is cut short", source.path)
    return data


def _string(source, rva: int) -> bytes:
    """A MINIDUMP_STRING (length, UTF-16 text, NUL) copied from the source."""
    n = int.from_bytes(_read(source, rva, 4), "little")
    n = min(n, 64 * 1024)
    return n.to_bytes(4, "little") + _read(source, rva + 4, n) + b"\0\0"


def write_minidump(dump, ranges, f, comment: str, keep=None, keep_stacks: bool = True, mark: dict | None = None) -> int:
    """``keep``: only its bytes are written as they are (``trim --redact``), the threads' floating-point and
    vector registers zeroed and their extended state cut off, MiscInfo reduced to the process id; without
    ``keep_stacks`` the threads' stacks are left out; ``mark``: what a redacted dump lacks, as its comment."""
    source = dump.memory.source
    entries = {}
    for stype, size, rva in dump.container.directory:
        if stype not in entries and stype in {SYSTEM_INFO, MODULE_LIST, THREAD_LIST} | VERBATIM:
            entries[stype] = (size, rva)

    threads = []
    if THREAD_LIST in entries:
        size, rva = entries[THREAD_LIST]
        n = min(int.from_bytes(_read(source, rva, 4), "little"), (size - 4) // THREAD_SIZE)
        try:
            threads = list(Array(n, MINIDUMP_THREAD).parse(_read(source, rva + 4, n * THREAD_SIZE)))
        except ConstructError as e:
            raise MalformedDump(f"bad ThreadList: {e}", source.path) from e
    if not keep_stacks:
        for t in threads:
            t.Stack.Memory.DataSize = 0
    stacks = [(t.Stack.StartOfMemoryRange, t.Stack.StartOfMemoryRange + t.Stack.Memory.DataSize)
              for t in threads if t.Stack.Memory.DataSize]
    pieces = clip(merge(list(ranges) + stacks), dump.memory)

    kinds = [k for k in (SYSTEM_INFO, MISC_INFO, MODULE_LIST, THREAD_LIST, 16, 17) if k in entries]
    n_streams = len(kinds) + 2  # + CommentStreamA + Memory64List
    blob = _Blob(MINIDUMP_HEADER.sizeof() + n_streams * MINIDUMP_DIRECTORY.sizeof())
    directory = []

    thread_list_rva = None
    for kind in kinds:
        size, rva = entries[kind]
        data = _read(source, rva, size)
        if kind == SYSTEM_INFO and size >= SYSTEM_INFO_CSD_RVA + 4:
            csd = int.from_bytes(data[SYSTEM_INFO_CSD_RVA:SYSTEM_INFO_CSD_RVA + 4], "little")
            new_csd = blob.add(_string(source, csd)) if csd else 0
            data = data[:SYSTEM_INFO_CSD_RVA] + new_csd.to_bytes(4, "little") + data[SYSTEM_INFO_CSD_RVA + 4:]
        elif kind == MISC_INFO and keep is not None:
            data = redacted_misc_info(data)
        elif kind == MODULE_LIST:
            data = _modules(source, data, blob)
        elif kind == THREAD_LIST:
            data = _threads(source, threads, blob, pieces, dump.arch if keep is not None else None)
        directory.append((kind, len(data), blob.add(data)))
        if kind == THREAD_LIST:
            thread_list_rva = directory[-1][2]
    # a redacted dump's comment is its mark (what it lacks: clrlayout.dump.redaction), else the comment given
    text = (COMMENT_PREFIX.encode("ascii") + encode(mark) if mark is not None else comment.encode("ascii",
                                                                                                  "replace")) + b"\0"
    directory.append((COMMENT_A, len(text), blob.add(text)))

    mem_header_size = MINIDUMP_MEMORY64_LIST_HEADER.sizeof() + len(pieces) * MINIDUMP_MEMORY_DESCRIPTOR64.sizeof()
    mem_rva = blob.add(b"\0" * mem_header_size, 8)
    base_rva = blob.end + (-blob.end) % 16
    mem = MINIDUMP_MEMORY64_LIST_HEADER.build(dict(NumberOfMemoryRanges=len(pieces), BaseRva=base_rva))
    for start, size, _ in pieces:
        mem += MINIDUMP_MEMORY64_LIST_DESCRIPTOR(start, size)
    directory.append((MEMORY64_LIST, mem_header_size, mem_rva))

    header = dump.container.header
    f.write(MINIDUMP_HEADER.build(dict(Version=header.Version, ImplementationVersion=header.ImplementationVersion,
                                       NumberOfStreams=n_streams, StreamDirectoryRva=MINIDUMP_HEADER.sizeof(),
                                       CheckSum=0, TimeDateStamp=header.TimeDateStamp,
                                       Flags=header.Flags & ~MINIDUMP_WITH_FULL_MEMORY)))  # not all of it now
    for kind, size, rva in directory:
        f.write(MINIDUMP_DIRECTORY.build(dict(StreamType=kind, Location=dict(DataSize=size, Rva=rva))))
    body = bytearray(blob.buf.getvalue())
    at = mem_rva - blob.start
    body[at : at + mem_header_size] = mem
    if thread_list_rva is not None:
        # each thread's Stack.Memory.Rva now points at its stack in the new memory data
        for i, t in enumerate(threads):
            rva = _memory_rva(pieces, base_rva, t.Stack.StartOfMemoryRange) if t.Stack.Memory.DataSize else 0
            at = thread_list_rva - blob.start + 4 + i * THREAD_SIZE + STACK_RVA_OFFSET
            body[at : at + 4] = rva.to_bytes(4, "little")
    f.write(body)
    f.write(b"\0" * (base_rva - blob.end))
    for start, size, _ in pieces:
        copy_range(dump, f, start, size, keep)
    return sum(size for _, size, _ in pieces)


def _memory_rva(pieces, base_rva: int, address: int) -> int:
    """File offset of target ``address`` in memory data written piece after piece from ``base_rva``."""
    offset = base_rva
    for start, size, _ in pieces:
        if start <= address < start + size:
            rva = offset + (address - start)
            return rva if rva < 1 << 32 else 0
        offset += size
    return 0


def MINIDUMP_MEMORY64_LIST_DESCRIPTOR(start: int, size: int) -> bytes:
    return MINIDUMP_MEMORY_DESCRIPTOR64.build(dict(StartOfMemoryRange=start, DataSize=size))


def _modules(source, data: bytes, blob: _Blob) -> bytes:
    n = min(int.from_bytes(data[:4], "little"), (len(data) - 4) // MODULE_SIZE)
    out = bytearray(n.to_bytes(4, "little"))
    for i in range(n):
        m = MINIDUMP_MODULE.parse(data[4 + i * MODULE_SIZE : 4 + (i + 1) * MODULE_SIZE])
        m.ModuleNameRva = blob.add(_string(source, m.ModuleNameRva)) if m.ModuleNameRva else 0
        for rec in (m.CvRecord, m.MiscRecord):
            if rec.DataSize and rec.DataSize <= 64 * 1024:
                rec.Rva = blob.add(_read(source, rec.Rva, rec.DataSize))
            else:
                rec.DataSize = rec.Rva = 0
        out += MINIDUMP_MODULE.build(m)
    return bytes(out)


#: where a thread CONTEXT keeps its floating-point and vector registers: (offset, size) by architecture
#: (AMD64: FltSave and VectorRegister..LastExceptionFromRip's start; x86: FloatSave, ExtendedRegisters)
VECTOR_REGISTERS = {"x64": ((0x100, 0x3A0),), "x86": ((0x1C, 112), (0xCC, 512))}
#: a CONTEXT without its extended state (winnt.h): its size, where its ContextFlags are, and the flag that says an
#: XSTATE area (a CONTEXT_EX and the XSAVE area: the AVX/AVX-512 upper halves, SIMD copies of data) follows it
CONTEXT_BASE = {"x64": (0x4D0, 0x30, 0x40), "x86": (0x2CC, 0x0, 0x40)}
#: MINIDUMP_MISC_INFO's size and its flag for the process id: all a redacted dump keeps of MiscInfo (the other
#: fields, of MINIDUMP_MISC_INFO_2..5, hold the process cookie that encodes pointers, build strings, time zones)
MISC_INFO_SIZE = 24
MISC1_PROCESS_ID = 1


def redacted_context(data: bytes, arch: str) -> bytes:
    """A thread CONTEXT with its floating-point and vector registers zeroed and its extended state cut off (the
    CONTEXT_XSTATE flag cleared); the integer registers, which the stacks' roots and the answers read, kept."""
    data = bytearray(data)
    for at, size in VECTOR_REGISTERS.get(arch, ()):
        data[at:at + size] = bytes(len(data[at:at + size]))  # (a context shorter than that: its end)
    if arch in CONTEXT_BASE:
        base, flags_at, xstate = CONTEXT_BASE[arch]
        del data[base:]
        if len(data) >= flags_at + 4:
            flags = int.from_bytes(data[flags_at:flags_at + 4], "little") & ~xstate
            data[flags_at:flags_at + 4] = flags.to_bytes(4, "little")
    else:  # an architecture whose layout is not known here: no context rather than one with its vector registers
        return b""
    return bytes(data)


def redacted_misc_info(data: bytes) -> bytes:
    """MiscInfo as a redacted dump keeps it: the process id alone (with its flag), in the stream's first version."""
    flags = int.from_bytes(data[4:8], "little") & MISC1_PROCESS_ID if len(data) >= 12 else 0
    pid = int.from_bytes(data[8:12], "little") if flags else 0
    return MISC_INFO_SIZE.to_bytes(4, "little") + flags.to_bytes(4, "little") + pid.to_bytes(4, "little") \
        + bytes(MISC_INFO_SIZE - 12)


def _threads(source, threads, blob: _Blob, pieces, redact_arch: str | None = None) -> bytes:
    """ThreadList with contexts copied and each stack's RVA pointing into the new memory data; with
    ``redact_arch``, each context's floating-point and vector registers zeroed."""
    out = bytearray(len(threads).to_bytes(4, "little"))
    for t in threads:
        ctx = t.ThreadContext
        data = _read(source, ctx.Rva, ctx.DataSize) if ctx.DataSize and ctx.DataSize <= 64 * 1024 else b""
        if redact_arch is not None and data:
            data = redacted_context(data, redact_arch)
        if data:
            ctx.DataSize = len(data)
            ctx.Rva = blob.add(data, 16)
        else:
            ctx.DataSize = ctx.Rva = 0
        t.Stack.Memory.Rva = 0  # patched by write_minidump once the memory data's position is known
        out += MINIDUMP_THREAD.build(t)
    return bytes(out)
