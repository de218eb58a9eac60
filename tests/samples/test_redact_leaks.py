"""``trim --redact``, place by place where a secret can sit outside what the heap walk zeroes (issue 45): the bytes
past a segment's allocated end, a free object's header word, an image's literals (#US, #Blob values) and the code
in its first page, the command line of an ELF core, a minidump's XSTATE area and MiscInfo; the mark a redacted
dump carries and the questions it refuses; inputs that are refused (a file cut short) or read (extended
numbering), and an output that is checked before it is put in place."""

from __future__ import annotations

import json
import struct

import numpy as np
import pytest

from clrlayout.dump import open_dump
from clrlayout.heap.fastwalk import TAIL
from clrlayout.session import open_session
from tests.support.cli import run
from tests.support.redaction import Redacted, json_of
from tests.support.samples import SAMPLES

pytestmark = pytest.mark.samples

GRAPH = "graph.coreclr-10.0.0.linux-x64.core"
X86 = "strings.coreclr-3.1.23.win-x86.dmp"
SERVER = "strings.coreclr-2.2.5.linux-x64-svr.core"
WINDOWS = "types.coreclr-8.0.4.win-x64.dmp"
SINGLE_FILE = "strings.coreclr-10.0.13.linux-x64-singlefile.core"


@pytest.fixture(scope="module")
def redacted(tmp_path_factory):
    return Redacted(tmp_path_factory.mktemp("redacted-leaks"))


def _free_objects(path):
    """(address, header word's bytes, the bytes after its length up to the next object) of each free object."""
    out = []
    with open_session(str(path)) as s:
        header, ptr, mem = s.profile.object.header_size, s.profile.pointer_size, s.dump.memory
        for win in s.heap_steps().windows():
            for off, mt, size in zip(win.offsets.tolist(), win.method_tables.tolist(), win.aligned.tolist()):
                t = s.mts.get(mt)
                if t is not None and t.kind == "free":
                    a = win.base + off
                    out.append((a, mem.read_available(a - header, header),
                                mem.read_available(a + ptr + 4, size - header - ptr - 4)))
    return out


@pytest.mark.parametrize("name", [SERVER, "strings.coreclr-2.1.8.win-x86.dmp"])
def test_nothing_past_a_segments_allocated_end(redacted, name):
    """The walk reads ahead past each segment's allocated end (old copies of moved objects, dead ones lie there):
    the original holds bytes there, the redacted copy none."""
    def past_ends(path):
        with open_session(str(path)) as s:
            return [s.dump.memory.read_available(seg.end, TAIL) for seg in s.heap.segments]

    original, copy = past_ends(SAMPLES / name), past_ends(redacted[name])
    assert sum(np.count_nonzero(np.frombuffer(b, np.uint8)) for b in original) > 1000
    assert [np.count_nonzero(np.frombuffer(b, np.uint8)) for b in copy] == [0] * len(copy)


@pytest.mark.parametrize("name", [GRAPH, X86, SERVER])
def test_free_objects_keep_only_their_method_table_and_length(redacted, name):
    original, copy = _free_objects(SAMPLES / name), _free_objects(redacted[name])
    assert [a for a, _, _ in copy] == [a for a, _, _ in original] and len(original) > 50
    assert sum(1 for _, head, _ in original if any(head)) > 10  # stale pointers, values
    assert [a for a, head, rest in copy if any(head) or any(rest)] == []


def _images(path):
    """Per managed image read from the dump's memory: the Constant and CustomAttribute values of its #Blob, its
    #US heap's bytes."""
    out = {}
    with open_session(str(path)) as s:
        for mt in list(s.layouts.universe()):
            s.type_name(mt)
        for image in s.names.images.loaded():
            if "dump" not in image.source:
                continue
            md = image.metadata._pe.net
            values = [bytes(r.Value.value or b"") for t in ("Constant", "CustomAttribute")
                      for r in (getattr(getattr(md.mdtables, t, None), "rows", None) or []) if r.Value is not None]
            signatures = {bytes(r.Signature.value or b"") for t in ("Field", "TypeSpec")
                          for r in (getattr(getattr(md.mdtables, t, None), "rows", None) or []) if r.Signature is not None}
            values = [v for v in values if v not in signatures]  # #Blob keeps one entry for equal bytes
            us = next((bytes(st.__data__) for st in md.metadata.streams_list if st.struct.Name == b"#US"), b"")
            out[image.path] = {"values": values, "us": us}
    return out


@pytest.mark.parametrize("name", [WINDOWS, GRAPH, SINGLE_FILE])
def test_images_keep_only_what_naming_reads(redacted, name):
    """const values, default parameter values and custom attribute arguments (#Blob) and the code's string literals
    (#US) are in the original's images; in the redacted copy's images they are zeros, while every type is named
    as before."""
    original, copy = _images(SAMPLES / name), _images(redacted[name])
    assert set(copy) == set(original) and original
    assert sum(1 for i in original.values() for v in i["values"] if any(v)) > 5
    assert sum(np.count_nonzero(np.frombuffer(i["us"], np.uint8)) for i in original.values()) > 1000
    assert [v for i in copy.values() for v in i["values"] if any(v)] == []
    assert [p for p, i in copy.items() if any(i["us"])] == []


def test_an_images_code_and_field_data_are_zeroed(redacted):
    """In an image mapped as its file (.NET maps IL-only assemblies so on Linux) the first page holds the start of
    .text: IL method bodies with their immediates, field RVA data (array initializers).  The original holds them,
    the redacted copy none of them; its PE headers are the original's."""
    import dnfile

    from clrlayout.session.imagekeep import _header_length

    def code(path):
        """Per image mapped flat: its headers' bytes, and the bytes of its method bodies and field data."""
        out = {}
        with open_dump(str(path)) as d:
            for m in d.file_mappings:
                head = d.memory.try_read(m.start, 4096) if m.offset == 0 else None
                if head is None or head[:2] != b"MZ" or not m.path.endswith(".dll"):
                    continue
                flat = d.memory.read_available(m.start, m.end - m.start)
                try:
                    pe = dnfile.dnPE(data=flat)
                except Exception:
                    continue
                if getattr(pe, "net", None) is None or pe.get_offset_from_rva(pe.net.struct.MetaDataRva) >= len(flat):
                    continue
                spans = []
                for t, column in (("MethodDef", "Rva"), ("FieldRva", "Rva")):
                    for row in getattr(getattr(pe.net.mdtables, t, None), "rows", None) or []:
                        rva = getattr(row.struct, column, 0)
                        if rva:
                            at = pe.get_offset_from_rva(rva)
                            spans.append((at, at + 8))
                out[m.path] = (head[:_header_length(head)], b"".join(flat[a:b] for a, b in spans if b <= len(flat)))
        return out

    original = code(SAMPLES / GRAPH)
    with open_dump(str(redacted[GRAPH])) as d:
        mappings = {m.path: m for m in d.file_mappings if m.offset == 0}
        copy = {p: d.memory.read_available(mappings[p].start, 4096) for p in original}
    assert original and sum(np.count_nonzero(np.frombuffer(c, np.uint8)) for _, c in original.values()) > 50
    for path, (head, _) in original.items():
        assert copy[path][:len(head)] == head
    left = {p: np.count_nonzero(np.frombuffer(c, np.uint8)) for p, (_, c) in code(redacted[GRAPH]).items()}
    assert sum(left.values()) == 0, left


def _notes(path):
    from elftools.elf.elffile import ELFFile

    with open(path, "rb") as f:
        elf = ELFFile(f)
        return [(n["n_name"], n["n_type"], n["n_desc"]) for seg in elf.iter_segments() if seg["p_type"] == "PT_NOTE"
                for n in seg.iter_notes()]


def test_an_elf_cores_command_line_is_zeroed(tmp_path, capsys):
    """A kernel (and gdb) writes the start of the command line into NT_PRPSINFO's pr_psargs (createdump leaves it
    empty: the sample's is filled here, as a kernel fills it): it is zeroed, the process's name kept."""
    from elftools.elf.elffile import ELFFile

    args = b"/usr/bin/dotnet app.dll --password=PsArGsMaRkEr0123456789"
    data = bytearray((SAMPLES / GRAPH).read_bytes())
    with open(SAMPLES / GRAPH, "rb") as f:
        note = next(n for seg in ELFFile(f).iter_segments() if seg["p_type"] == "PT_NOTE" for n in seg.iter_notes()
                    if n["n_type"] == "NT_PRPSINFO")
    end = note["n_offset"] + 12 + ((note["n_namesz"] + 3) & ~3) + note["n_descsz"]
    data[end - 80:end] = args.ljust(80, b"\0")
    source = tmp_path / "psargs.core"
    source.write_bytes(bytes(data))
    assert [d["pr_psargs"] for _, t, d in _notes(source) if t == "NT_PRPSINFO"] == [args.ljust(80, b"\0")]
    out = tmp_path / "redacted.core"
    assert run(capsys, "trim", source, out, "--redact", "-q")[0] == 0
    after = [d for _, t, d in _notes(out) if t == "NT_PRPSINFO"]
    assert [d["pr_psargs"] for d in after] == [bytes(80)] and b"PsArGsMaRkEr" not in out.read_bytes()
    assert after[0]["pr_fname"] == note["n_desc"]["pr_fname"] and after[0]["pr_fname"].strip(b"\0")


def _with_xstate_and_misc_info(source, out, marker: bytes):
    """A copy of a Windows minidump whose thread contexts carry an XSTATE area (CONTEXT_XSTATE set, 2 KB) and whose
    MiscInfo is of the largest version (MINIDUMP_MISC_INFO_5), both full of ``marker``: the new data appended to
    the file and the thread list's and directory's locations pointed at it."""
    from clrlayout.dump.minidump import MINIDUMP_DIRECTORY, MINIDUMP_HEADER, MINIDUMP_THREAD, MISC_INFO, THREAD_LIST

    data = bytearray(source.read_bytes())
    header = MINIDUMP_HEADER.parse(data)
    size = MINIDUMP_DIRECTORY.sizeof()
    for i in range(header.NumberOfStreams):
        at = header.StreamDirectoryRva + i * size
        entry = MINIDUMP_DIRECTORY.parse(data[at:at + size])
        if entry.StreamType == THREAD_LIST:
            n = int.from_bytes(data[entry.Location.Rva:entry.Location.Rva + 4], "little")
            for t in range(n):
                pos = entry.Location.Rva + 4 + t * MINIDUMP_THREAD.sizeof()
                thread = MINIDUMP_THREAD.parse(data[pos:pos + MINIDUMP_THREAD.sizeof()])
                ctx = data[thread.ThreadContext.Rva:thread.ThreadContext.Rva + 0x4D0]
                ctx[0x30:0x34] = (int.from_bytes(ctx[0x30:0x34], "little") | 0x40).to_bytes(4, "little")
                ctx += (marker * 64)[:0x800 - 0x4D0]
                rva = len(data) + (-len(data)) % 16
                data += bytes(rva - len(data)) + ctx
                thread.ThreadContext.Rva, thread.ThreadContext.DataSize = rva, len(ctx)
                data[pos:pos + MINIDUMP_THREAD.sizeof()] = MINIDUMP_THREAD.build(thread)
        elif entry.StreamType == MISC_INFO:
            old = data[entry.Location.Rva:entry.Location.Rva + entry.Location.DataSize]
            misc = bytearray((marker * 128)[:0x548])
            misc[0:12] = (0x548).to_bytes(4, "little") + (int.from_bytes(old[4:8], "little") | 0x3FF).to_bytes(4, "little") \
                + old[8:12]
            rva = len(data)
            data += misc
            data[at:at + size] = MINIDUMP_DIRECTORY.build(dict(StreamType=MISC_INFO,
                                                               Location=dict(DataSize=len(misc), Rva=rva)))
    out.write_bytes(bytes(data))


def test_a_minidumps_xstate_and_misc_info(tmp_path, capsys):
    """Each thread's XSTATE area (the AVX upper halves, past offset 0x4D0 of a context) and MiscInfo's fields but
    the process id (the process cookie that encodes pointers, build strings) are left out."""
    from clrlayout.dump.minidump import MINIDUMP_THREAD

    marker = b"XsTaTeMiScInFo!!"
    source = tmp_path / "xstate.dmp"
    _with_xstate_and_misc_info(SAMPLES / WINDOWS, source, marker)
    assert source.read_bytes().count(marker) > 100
    out = tmp_path / "redacted.dmp"
    code, _, err = run(capsys, "trim", source, out, "--redact", "-q")
    assert code == 0, err
    data = out.read_bytes()
    assert marker[:8] not in data and marker[8:] not in data
    with open_dump(str(out)) as d, open_dump(str(source)) as o:
        assert d.pid == o.pid and d.pid
        assert [t.sp for t in d.threads] == [t.sp for t in o.threads]
    assert json_of(capsys, "stats", out, "--format", "json") == json_of(capsys, "stats", SAMPLES / WINDOWS, "--format", "json")


def test_a_redacted_dump_says_so_and_refuses_what_it_lacks(redacted, tmp_path, capsys):
    copy = redacted[GRAPH]
    info = json.loads(json_of(capsys, "info", copy, "--format", "json"))
    assert info["redaction"]["stacks"] == "removed" and "thread stacks" in info["redaction"]["removed"]
    assert json.loads(json_of(capsys, "info", SAMPLES / GRAPH, "--format", "json"))["redaction"] is None
    code, text, err = run(capsys, "retained", copy, "--top", "1")  # the default roots include the stacks
    assert code == 4 and text == "" and err.count("\n") == 1
    assert "redacted" in err and "--roots handles,finalizer,statics" in err and "--keep-stacks" in err
    for args in (["roots", copy, "0x7f6ddf000028"], ["stats", copy, "--live"], ["dump", copy, "--dead"]):
        assert run(capsys, *args)[0] == 4
    assert run(capsys, "retained", copy, "--top", "1", "--roots", "handles,finalizer,statics")[0] == 0
    code, _, err = run(capsys, "dump", copy, "--contains", "a")
    assert code == 4 and "--contains" in err and "redacted" in err
    code, _, err = run(capsys, "dump", copy, "--limit", "1")
    assert code == 0 and "values shown are zeros" in err
    kept = tmp_path / "stacks.core"
    assert run(capsys, "trim", SAMPLES / GRAPH, kept, "--redact", "--keep-stacks", "-q")[0] == 0
    assert json.loads(json_of(capsys, "info", kept, "--format", "json"))["redaction"]["stacks"] == "kept"
    assert run(capsys, "retained", kept, "--top", "1", "-q")[0] == 0


def test_a_redacted_minidump_is_marked(redacted, capsys):
    info = json.loads(json_of(capsys, "info", redacted[X86], "--format", "json"))
    assert info["redaction"]["redacted_by"].startswith("clrlayout ")


@pytest.mark.parametrize("name,cut", [(GRAPH, 12 * 1024), (WINDOWS, 5000)])
def test_a_dump_cut_short_is_not_redacted(tmp_path, capsys, name, cut):
    source = tmp_path / ("cut" + (SAMPLES / name).suffix)
    source.write_bytes((SAMPLES / name).read_bytes()[:-cut])
    out = tmp_path / "out"
    code, text, err = run(capsys, "trim", source, out, "--redact")
    assert code == 3 and "truncated" in err and err.count("\n") == 1 and not out.exists()


def test_the_output_is_checked_before_it_is_put_in_place(tmp_path, capsys, monkeypatch):
    import clrlayout.trim as trim_module

    out = tmp_path / "out.core"
    out.write_bytes(b"what was there before")
    monkeypatch.setattr(trim_module, "what_it_holds", lambda *a, **k: (1, 0, 0))  # a copy that reads as nothing
    code, _, err = run(capsys, "trim", SAMPLES / GRAPH, out, "--redact")
    assert code == 6 and "does not read as the original" in err
    assert out.read_bytes() == b"what was there before"
    assert [p.name for p in tmp_path.iterdir()] == ["out.core"]  # no temporary file left


def _extended(source, out, extra: int = 0):
    """A copy of an ELF core with extended numbering: e_phnum PN_XNUM, the count in section header 0's sh_info
    (appended); ``extra`` more program headers, empty PT_LOADs (mappings the core did not save), after the others."""
    from elftools.elf.elffile import ELFFile

    data = bytearray(source.read_bytes())
    with open(source, "rb") as f:
        elf = ELFFile(f)
        phoff, phnum, phsize = elf["e_phoff"], elf["e_phnum"], elf["e_phentsize"]
        last = max(s["p_vaddr"] + s["p_memsz"] for s in elf.iter_segments() if s["p_type"] == "PT_LOAD")
    table = bytes(data[phoff:phoff + phnum * phsize])
    for i in range(extra):  # Elf64_Phdr: type, flags, offset, vaddr, paddr, filesz, memsz, align
        table += struct.pack("<IIQQQQQQ", 1, 4, 0, last + 0x1000 * (2 * i + 1), 0, 0, 0x1000, 0x1000)
    count = phnum + extra
    new_phoff = phoff  # in place, as the kernel writes it; the section header after the data
    if extra:  # a longer table: after the data
        new_phoff = len(data) + (-len(data)) % 8
        data += bytes(new_phoff - len(data)) + table
    shoff = len(data)
    data += struct.pack("<IIQQQQIIQQ", 0, 0, 0, 0, 0, 0, 0, count, 0, 0)  # section header 0: sh_info = count
    struct.pack_into("<Q", data, 0x20, new_phoff)  # e_phoff
    struct.pack_into("<Q", data, 0x28, shoff)  # e_shoff
    struct.pack_into("<HHH", data, 0x3A, 64, 1, 0)  # e_shentsize, e_shnum, e_shstrndx
    struct.pack_into("<H", data, 0x38, 0xFFFF)  # e_phnum = PN_XNUM
    out.write_bytes(bytes(data))


def test_extended_numbering_is_read(tmp_path, capsys):
    """A core whose e_phnum is PN_XNUM (as the kernel writes for 65,535 mappings or more) answers as the original."""
    xnum = tmp_path / "xnum.core"
    _extended(SAMPLES / GRAPH, xnum)
    for command in ("stats", "memory"):
        assert json_of(capsys, command, xnum, "--format", "json") == json_of(capsys, command, SAMPLES / GRAPH, "--format", "json")
    info = json.loads(json_of(capsys, "info", xnum, "--format", "json"))
    assert info["memory"] == json.loads(json_of(capsys, "info", SAMPLES / GRAPH, "--format", "json"))["memory"]


@pytest.mark.slow
def test_more_than_65535_program_headers_are_read_and_written(tmp_path, capsys):
    """70,000 more mappings (not saved): the core is read, and its trimmed and redacted copies are written with
    extended numbering and answer as it does."""
    many = tmp_path / "many.core"
    _extended(SAMPLES / GRAPH, many, extra=70_000)
    stats = json_of(capsys, "stats", SAMPLES / GRAPH, "--format", "json")
    assert json_of(capsys, "stats", many, "--format", "json") == stats
    for args in (("--types",), ("--redact",)):
        out = tmp_path / f"out{args[0]}.core"
        code, _, err = run(capsys, "trim", many, out, *args, "-q")
        assert code == 0, err
        head = out.read_bytes()[:64]
        assert struct.unpack_from("<H", head, 0x38)[0] == 0xFFFF
        assert json_of(capsys, "stats", out, "--format", "json") == stats


def test_no_marker_of_a_windows_minidump_survives(tmp_path, capsys):
    """The markers target under Wine (.NET 10, x64; make_dumps.py keeps every page that holds a marker): each of its
    markers, and each literal of its code, is in the sample; after --redact none is, in any form or any 8-byte
    window, and the structural answers are the original's."""
    from tests.support.markers import literal_markers, survivors
    from tests.support.redaction import structure

    sample = SAMPLES / "markers.coreclr-10.0.0.win-x64.dmp"
    truth = json.loads(sample.with_name("markers.coreclr-10.0.0.win-x64.truth.json").read_text(encoding="utf-8"))
    markers = {**truth["markers"], **literal_markers()}
    assert sorted(set(markers) - set(survivors(markers, sample.read_bytes()))) == []
    out = tmp_path / "redacted.dmp"
    assert run(capsys, "trim", sample, out, "--redact", "-q")[0] == 0
    assert survivors(markers, out.read_bytes()) == {}
    original, copy = structure(capsys, sample), structure(capsys, out)
    assert sorted(k for k in original if original[k] != copy.get(k)) == []
