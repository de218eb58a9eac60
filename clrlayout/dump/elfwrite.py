"""Writing a trimmed ELF core: notes kept whole, PT_LOAD segments cut to the kept memory.

Every mapping of the original stays described: the kept parts of a PT_LOAD get file data, the rest keeps
its address range with ``p_filesz = 0`` (as cores describe pages they did not save).  Headers are built
with pyelftools' own structs.
"""

from __future__ import annotations

from elftools.construct.lib import Container
from elftools.elf.structs import ELFStructs

from .copying import copy_range
from .elfcore import PN_XNUM
from .redaction import elf_note


def _split(seg: dict, kept: list[tuple[int, int]]) -> list[tuple[int, int, bool]]:
    """(vaddr, size, has_data) pieces of a PT_LOAD: kept ranges with data, the gaps without."""
    lo, hi = seg["p_vaddr"], seg["p_vaddr"] + seg["p_memsz"]
    data_hi = seg["p_vaddr"] + seg["p_filesz"]
    pieces, pos = [], lo
    for a, b in kept:
        a, b = max(a, lo), min(b, data_hi)
        if a >= b:
            continue
        if a > pos:
            pieces.append((pos, a - pos, False))
        pieces.append((a, b - a, True))
        pos = b
    if pos < hi:
        pieces.append((pos, hi - pos, False))
    return pieces


def write_elf_core(dump, ranges, f, comment: str, keep=None, keep_stacks: bool = True, mark: dict | None = None) -> int:
    """``comment`` is not stored: an ELF core has no place for it (the sample manifest records it).  ``keep``:
    only its bytes are written as they are (``trim --redact``), and the floating-point and vector registers of
    the notes are zeroed.  The stacks are in ``ranges`` or not (``keep_stacks`` is for the minidump writer)."""
    c = dump.container
    structs = ELFStructs(little_endian=c.little_endian, elfclass=c.elfclass)
    structs.create_basic_structs()
    structs.create_advanced_structs(c.header["e_type"], c.header["e_machine"], c.header["e_ident"]["EI_OSABI"])
    ehdr_size = structs.Elf_Ehdr.sizeof()
    phdr_size = structs.Elf_Phdr.sizeof()
    source = dump.memory.source
    kept = sorted(ranges)

    out_segments = []  # (header dict, data source: ("file", offset, size) | ("memory", vaddr, size) | None)
    for seg in c.segments:
        if seg["p_type"] == "PT_LOAD":
            for vaddr, size, has_data in _split(seg, kept):
                h = dict(seg, p_vaddr=vaddr, p_paddr=0, p_memsz=size, p_filesz=size if has_data else 0, p_offset=0)
                out_segments.append((h, ("memory", vaddr, size) if has_data else None))
        elif seg["p_type"] == "PT_NOTE":
            out_segments.append((dict(seg), ("file", seg["p_offset"], seg["p_filesz"])))
        else:
            out_segments.append((dict(seg, p_offset=0, p_filesz=0), None))
    if mark is not None:
        note = elf_note(mark, c.little_endian)
        out_segments.append((dict(p_type="PT_NOTE", p_flags=0, p_offset=0, p_vaddr=0, p_paddr=0, p_filesz=len(note),
                                  p_memsz=0, p_align=4), ("bytes", note, len(note))))

    count = len(out_segments)
    # extended numbering (elf(5), as the kernel writes it): e_phnum PN_XNUM, the count in section header 0's sh_info
    shdr_size = structs.Elf_Shdr.sizeof() if count >= PN_XNUM else 0
    offset = ehdr_size + count * phdr_size + shdr_size
    for h, data in out_segments:
        if data is not None:
            if h["p_type"] == "PT_LOAD":
                offset += (-offset) % 4096
            else:
                offset += (-offset) % 8
            h["p_offset"] = offset
            offset += data[2]

    header = dict(c.header, e_phoff=ehdr_size, e_phnum=min(count, PN_XNUM), e_shoff=0, e_shnum=0, e_shstrndx=0,
                  e_phentsize=phdr_size)
    if shdr_size:
        header.update(e_shoff=ehdr_size + count * phdr_size, e_shnum=1, e_shentsize=shdr_size)
    f.write(structs.Elf_Ehdr.build(Container(**header)))
    for h, _ in out_segments:
        f.write(structs.Elf_Phdr.build(Container(**h)))
    if shdr_size:
        f.write(structs.Elf_Shdr.build(Container(sh_name=0, sh_type="SHT_NULL", sh_flags=0, sh_addr=0, sh_offset=0,
                                                 sh_size=0, sh_link=0, sh_info=count, sh_addralign=0, sh_entsize=0)))
    pos = ehdr_size + count * phdr_size + shdr_size
    kept_bytes = 0
    for h, data in out_segments:
        if data is None:
            continue
        f.write(b"\0" * (h["p_offset"] - pos))
        kind, at, size = data
        if kind == "bytes":
            f.write(at)
        elif kind == "file":
            notes = source.pread(at, size)
            f.write(notes if keep is None else _redacted_notes(notes, c.little_endian))
        else:
            copy_range(dump, f, at, size, keep)
            kept_bytes += size
        pos = h["p_offset"] + size
    return kept_bytes


#: notes of the floating-point and vector registers (NT_PRFPREG, NT_PRXFPREG, NT_X86_XSTATE, NT_ARM_VFP,
#: NT_ARM_SVE): SIMD copies of strings pass through them, and no analysis reads them
VECTOR_NOTES = {2, 0x46E62B7F, 0x202, 0x400, 0x405}
#: NT_PRPSINFO, whose last member is pr_psargs (ELF_PRARGSZ bytes): the start of the command line, which a kernel
#: writes (createdump and gdb too) and which holds what a program was given (``--password=...``)
NT_PRPSINFO, PSARGS_BYTES = 3, 80


def _redacted_notes(notes: bytes, little: bool) -> bytes:
    """A PT_NOTE segment's notes as a redacted dump keeps them: the descriptors of :data:`VECTOR_NOTES` zeroed, and
    NT_PRPSINFO's command line (the notes stay, sized as they were)."""
    order = "little" if little else "big"
    out = bytearray(notes)
    pos = 0
    while pos + 12 <= len(out):
        namesz, descsz, ntype = (int.from_bytes(out[pos + i:pos + i + 4], order) for i in (0, 4, 8))
        desc = pos + 12 + ((namesz + 3) & ~3)
        end = desc + ((descsz + 3) & ~3)
        if end > len(out):
            break
        if ntype in VECTOR_NOTES:
            out[desc:desc + descsz] = bytes(descsz)
        elif ntype == NT_PRPSINFO and descsz >= PSARGS_BYTES:
            out[desc + descsz - PSARGS_BYTES:desc + descsz] = bytes(PSARGS_BYTES)
        pos = end
    return bytes(out)
