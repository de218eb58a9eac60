"""Hostile, truncated and damaged dumps: a documented exit code and one line on stderr, never a traceback
(exit 70), never a hang.  Structure-aware mutations of real and synthetic dumps (Hypothesis, bounded for
CI), byte flips, truncations, and a sweep of 4 KB truncation points of every sample.  The long coverage-guided
campaign is fuzz/fuzz_clrlayout.py; its crashers become files in tests/corpus/regressions/.  Each damaged dump goes
through info, dump, memory, native, threads, report, retained and pe."""

from __future__ import annotations

import io
import multiprocessing
import os
import struct
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.guards import ALLOWED, hang_guard
from tests.support.samples import REPO, SAMPLES, manifest
from tests.support.synth_dump import mixed_minidump
from tests.support.scripts import script

from clrlayout.cli import main

#: the work a command may do, counted instead of timed: bytes read from the dump (reads and maps of the
#: file) per byte of it, plus a constant for the readers' read-ahead, and MethodTables validated per word
READ_FACTOR, READ_SLACK = 16, 4 << 20
PROBES_PER_WORD = 2
CORPUS = REPO / "tests" / "corpus"
REGRESSIONS = CORPUS / "regressions"


SEEDS = {f"synth-{a}.dmp": mixed_minidump(a) for a in ("x64", "x86")}
SEEDS.update({f.name: f.read_bytes() for f in sorted(CORPUS.glob("seed-*"))})


class Work:
    """What a command did, counted rather than timed: bytes it read from the dump file and MethodTables it
    validated.  Linear in the dump's size, whatever the machine's load."""

    def __init__(self):
        from clrlayout.dump.addrspace import FileSource
        from clrlayout.runtime.methodtable import MethodTables

        self.read = self.probes = 0
        self._patched = [(FileSource, "pread"), (MethodTables, "_validate")]
        self._saved = [getattr(cls, name) for cls, name in self._patched]
        pread, validate = self._saved

        def counted_pread(source, offset, size):
            data = pread(source, offset, size)
            self.read += len(data)
            return data

        def counted_validate(mts, address):
            self.probes += 1
            return validate(mts, address)

        self._counting = [counted_pread, counted_validate]

    def __enter__(self) -> "Work":
        for (cls, name), fn in zip(self._patched, self._counting):
            setattr(cls, name, fn)
        return self

    def __exit__(self, *exc) -> None:
        for (cls, name), fn in zip(self._patched, self._saved):
            setattr(cls, name, fn)


def run_command(args: list, path: Path, capsys) -> Work:
    with hang_guard(), Work() as work:
        code = main(args)
    _, err = capsys.readouterr()
    assert code in ALLOWED, (args[0], code, err)
    assert "Traceback" not in err
    assert all(line.startswith("clrlayout: ") for line in err.splitlines()), err
    size = path.stat().st_size
    assert work.read <= READ_FACTOR * size + READ_SLACK, (args[0], work.read, size)
    assert work.probes <= PROBES_PER_WORD * (size // 4) + 1000, (args[0], work.probes, size)
    return work


def run_all(path: Path, capsys) -> None:
    for args in (["info", str(path), "--format", "json", "-q"], ["dump", str(path), "--format", "jsonl", "-q"],
                 ["memory", str(path), "--format", "json", "-q"], ["native", str(path), "--format", "json", "-q"],
                 ["threads", str(path), "--format", "json", "-q"], ["report", str(path), "--format", "json", "-q"],
                 ["retained", str(path), "--format", "json", "-q"], ["pe", str(path), "--format", "json", "-q"],
                 ["clrstack", str(path), "--format", "json", "-q"]):
        run_command(args, path, capsys)


# --- where the structures are (parsed from the seed itself) ------------------------------------------


def minidump_fields(data: bytes) -> list[tuple[int, int]]:
    """(offset, size) of the header, directory and list fields of a minidump."""
    fields = [(8, 4), (12, 4)]  # NumberOfStreams, StreamDirectoryRva
    n, rva = struct.unpack_from("<II", data, 8)
    for i in range(min(n, 64)):
        at = rva + 12 * i
        if at + 12 > len(data):
            break
        fields += [(at, 4), (at + 4, 4), (at + 8, 4)]
        kind, size, srva = struct.unpack_from("<III", data, at)
        if kind == 9 and srva + 16 <= len(data):  # Memory64List: count, BaseRva, descriptors
            fields += [(srva, 8), (srva + 8, 8)]
            count = struct.unpack_from("<Q", data, srva)[0]
            for j in range(min(count, 32)):
                fields += [(srva + 16 + 16 * j, 8), (srva + 24 + 16 * j, 8)]
        if kind in (3, 4, 5) and srva + 4 <= len(data):  # thread, module, memory lists: count, first entries
            fields.append((srva, 4))
            fields += [(srva + 4 + k, 4) for k in range(0, min(size - 4, 216), 4)]
    return [(o, s) for o, s in fields if o + s <= len(data)]


def elf_fields(data: bytes) -> list[tuple[int, int]]:
    """(offset, size) of the ELF header, program header and note header fields (64-bit cores)."""
    fields = [(0x20, 8), (0x36, 2), (0x38, 2), (0x28, 8), (0x3C, 2)]  # phoff, phentsize, phnum, shoff, shnum
    phoff, = struct.unpack_from("<Q", data, 0x20)
    phnum, = struct.unpack_from("<H", data, 0x38)
    for i in range(min(phnum, 64)):
        at = phoff + 56 * i
        if at + 56 > len(data):
            break
        fields += [(at, 4), (at + 8, 8), (at + 16, 8), (at + 32, 8), (at + 40, 8)]  # type, offset, vaddr, filesz, memsz
        p_type, _, p_offset, _, _, p_filesz = struct.unpack_from("<IIQQQQ", data, at)
        if p_type == 4:  # PT_NOTE: walk its notes
            pos, end = p_offset, min(p_offset + p_filesz, len(data))
            while pos + 12 <= end and len(fields) < 400:
                namesz, descsz, _ = struct.unpack_from("<III", data, pos)
                fields += [(pos, 4), (pos + 4, 4), (pos + 8, 4), (pos + 12 + ((namesz + 3) & ~3), 8)]
                pos += 12 + ((namesz + 3) & ~3) + ((descsz + 3) & ~3)
    return [(o, s) for o, s in fields if o + s <= len(data)]


def interesting(size: int):
    top = (1 << (8 * size)) - 1
    return st.one_of(st.sampled_from([0, 1, 2, 0x7F, 0x80, 0xFF, 0x1000, top, top >> 1, top - 1]),
                     st.integers(0, top))


def _patch(data: bytes, at: int, size: int, value: int) -> bytes:
    return data[:at] + value.to_bytes(size, "little") + data[at + size:]


SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)


@SETTINGS
@given(st.sampled_from(sorted(SEEDS)), st.data())
def test_structure_fields(tmp_path_factory, capsys, seed, draw):
    data = SEEDS[seed]
    fields = minidump_fields(data) if data[:4] == b"MDMP" else elf_fields(data)
    patched = data
    for _ in range(draw.draw(st.integers(1, 3))):
        at, size = draw.draw(st.sampled_from(fields))
        patched = _patch(patched, at, size, draw.draw(interesting(size)))
    path = tmp_path_factory.mktemp("fuzz") / seed
    path.write_bytes(patched)
    run_all(path, capsys)


@SETTINGS
@given(st.sampled_from(sorted(SEEDS)), st.data())
def test_object_bytes(tmp_path_factory, capsys, seed, draw):
    """Damage the heap itself: MethodTable words, lengths, headers and terminators of string objects."""
    data = SEEDS[seed]
    # strings' MethodTable pointer is the most frequent aligned 8-byte value in the heap pages
    positions = [i for i in range(0, len(data) - 16, 8) if data[i + 6 : i + 8] == b"\0\0" and data[i + 5] != 0]
    if not positions:
        return
    patched = bytearray(data)
    for _ in range(draw.draw(st.integers(1, 8))):
        at = draw.draw(st.sampled_from(positions)) + draw.draw(st.sampled_from([0, 8, 12, -4, 16, 20]))
        if 0 <= at < len(patched) - 4:
            patched[at : at + 4] = draw.draw(interesting(4)).to_bytes(4, "little")
    path = tmp_path_factory.mktemp("fuzz") / seed
    path.write_bytes(bytes(patched))
    run_all(path, capsys)


@SETTINGS
@given(st.sampled_from(sorted(SEEDS)), st.lists(st.tuples(st.integers(0, 1 << 30), st.integers(1, 255)),
                                                min_size=1, max_size=30), st.floats(0.0, 1.0))
def test_byte_flips_and_truncation(tmp_path_factory, capsys, seed, flips, cut):
    data = bytearray(SEEDS[seed])
    for at, x in flips:
        data[at % len(data)] ^= x
    data = data[: max(1, int(len(data) * cut))] if cut < 0.95 else data
    path = tmp_path_factory.mktemp("fuzz") / seed
    path.write_bytes(bytes(data))
    run_all(path, capsys)


def _cut_runs(source: Path, cuts: list, work_dir: Path) -> list:
    """(cut, exit code, stderr, bytes read) of ``dump --format jsonl -q`` on the file ``source`` cut at each of
    ``cuts`` (a process's share of the sweep: its own file, its own output streams)."""
    path = work_dir / f"cut-{os.getpid()}-{source.name}"
    path.write_bytes(source.read_bytes())
    saved = sys.stdout, sys.stderr
    out = []
    try:
        for cut in sorted(cuts, reverse=True):  # the copy cut shorter each time: no cut is written afresh
            os.truncate(path, cut)
            sys.stdout = io.TextIOWrapper(io.BytesIO(), encoding="utf-8")
            sys.stderr = err = io.StringIO()
            with hang_guard(), Work() as work:
                code = main(["dump", str(path), "--format", "jsonl", "-q"])
            out.append((cut, code, err.getvalue(), work.read))
    finally:
        sys.stdout, sys.stderr = saved
        path.unlink(missing_ok=True)
    return out


def _sweep(source: Path, parity: int) -> list[int]:
    """The truncation points of a sample: every 4 KB point up to the first byte of memory the dump holds (the
    headers, directories, notes and streams that describe the process) and after its last, every other one
    (those of ``parity``) in between, where a cut only decides how much of the memory is left; and the last
    byte."""
    from clrlayout.dump import open_dump
    from clrlayout.limits import DEFAULT_LIMITS

    size = source.stat().st_size
    with open_dump(str(source), DEFAULT_LIMITS) as dump:
        regions = dump.memory.regions
        first = min(r.offset for r in regions)
        last = max(r.offset + r.size for r in regions)
    return [c for c in range(4096, size, 4096) if not first < c < last or (c // 4096) % 2 == parity] + [size - 1]


@pytest.mark.parametrize("entry", manifest(), ids=lambda e: e["file"])
@pytest.mark.slow
def test_every_truncation_point(entry, tmp_path):
    """The truncation points of every sample (``_sweep``: every 4 KB point of what describes the process, every
    other one in its memory data, the two halves on alternate samples): exit 0 or a documented error code,
    with linear work. The cuts are shared by two processes (forked: each a copy of this one), every other cut
    each."""
    from concurrent.futures import ProcessPoolExecutor

    source = SAMPLES / entry["file"]
    size = source.stat().st_size
    cuts = _sweep(source, [e["file"] for e in manifest()].index(entry["file"]) % 2)
    assert len(cuts) > size // 8192  # a sweep, not a sample of it
    with ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("fork")) as pool:
        runs = [r for part in pool.map(_cut_runs, [source] * 2, [cuts[0::2], cuts[1::2]], [tmp_path] * 2)
                for r in part]
    assert sorted(r[0] for r in runs) == cuts  # every cut ran
    outcomes = {}
    for cut, code, err, read in runs:
        assert code in ALLOWED and "Traceback" not in err, (cut, code, err)
        assert read <= READ_FACTOR * cut + READ_SLACK, (cut, read)
        outcomes[code] = outcomes.get(code, 0) + 1
    # most cuts keep the metadata and part of the memory: partial results, not errors
    assert outcomes.get(0, 0) > 0 and set(outcomes) <= ALLOWED


def _make_hostile():
    """fuzz/make_hostile.py, the generators of the hostile dumps and of the reduced fuzz crashers."""
    return script("make_hostile")


@pytest.mark.parametrize("name", sorted(_make_hostile().HOSTILE))
def test_hostile_inputs(name, tmp_path, capsys):
    """One hand-made dump per hazard the code guards against (fuzz/make_hostile.py)."""
    path = tmp_path / name
    path.write_bytes(_make_hostile().HOSTILE[name]())
    run_all(path, capsys)


@pytest.mark.parametrize("name", sorted(p.name for p in REGRESSIONS.glob("*.*")))
def test_fuzz_regressions(name, capsys):
    """Inputs the long fuzz campaign (fuzz/fuzz_clrlayout.py) once crashed on, kept in tests/corpus/regressions/."""
    run_all(REGRESSIONS / name, capsys)


def test_reduced_regressions_are_kept():
    """The reduced crashers are in tests/corpus/regressions/, byte for byte what their generators give."""
    reduced = _make_hostile().REGRESSIONS
    assert reduced
    for name, make in reduced.items():
        assert (REGRESSIONS / name).read_bytes() == make(), name


def test_garbage_costs_linear_work(tmp_path, capsys):
    """A heap that starts with garbage costs work in proportion to the garbage: ten times the garbage, about
    ten times the reads and probes (counted, not timed: the same on a busy machine)."""
    make = _make_hostile().synthetic_garbage_heap
    work = {}
    for size in (256 << 10, 2560 << 10):
        path = tmp_path / f"garbage-{size}.dmp"
        path.write_bytes(make(size))
        work[size] = run_command(["dump", str(path), "--format", "jsonl", "-q"], path, capsys)
    small, big = work[256 << 10], work[2560 << 10]
    assert 5 <= big.probes / small.probes <= 15
    assert big.read / small.read <= 15
