"""``clrlayout native`` on arm64 and i386 cores, against glibc itself (issue 48, item 1): the native-heap target
(sample_dumps/targets/native/mallocs.c) built for each architecture — arm64 by the cross compiler, run by QEMU's
user-mode emulator with Debian's arm64 glibc and dumped by QEMU when it gets SIGQUIT; i386 by ``gcc -m32``, run
natively and dumped by the kernel (SIGQUIT) and by gdb's gcore.  What the allocator said at that moment
(``mallinfo2()``, ``malloc_info()``, the ledger of blocks) is the truth, as for x86-64 (test_native.py).  QEMU's
core has no NT_FILE note (libc's data is found in the dump's memory by its shape) and no thread's TLS pointer,
nor has gcore's of i386 (each thread's tcache is found by its own shape); the kernel's i386 core has them
(NT_386_TLS: each tcache and arena is tied to its threads)."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest

from clrlayout.dump import open_dump
from clrlayout.model.native import native_heap
from clrlayout.native.arenas import ARCHES
from clrlayout.native.chunks import STATES
from tests.support.cli import run as run_cli
from tests.support.native import build, make_core, make_kernel_core, make_qemu_core

pytestmark = pytest.mark.oracle

THREADS = 4


@pytest.fixture(scope="module", params=["arm64", "x86-kernel", "x86-gcore"])
def core(request, tmp_path_factory):
    arch, _, how = request.param.partition("-")
    work = tmp_path_factory.mktemp(f"native-{arch}")
    exe = build(work, arch)
    made = make_qemu_core(exe, work, arch, THREADS) if arch == "arm64" else \
        make_kernel_core(exe, work, THREADS) if how == "kernel" else make_core(exe, work, THREADS)
    made.arch, made.tls = arch, how == "kernel"
    yield made
    made.path.unlink()


@pytest.fixture(scope="module")
def view(core):
    dump = open_dump(str(core.path))
    assert dump.arch == core.arch and len(dump.threads) == THREADS + 1
    yield native_heap(dump)
    dump.close()


def test_mallinfo_is_glibcs_field_by_field(view, core):
    assert view.mallinfo == core.mallinfo
    assert list(view.heap.findings) == []
    assert view.heap.main_arena is not None and view.heap.mp is not None
    assert view.heap.layout.word == (8 if core.arch == "arm64" else 4)
    if core.arch == "arm64":  # no NT_FILE: libc is no mapped file, its version not known, its layout the shape's
        assert view.heap.libc.path == "" and view.heap.layout_from == "shape"
    else:  # the library on disk is the one the process had (its build id): its version
        assert view.heap.libc.version_source == "file" and view.heap.layout_from == "version"


def test_each_arena_is_malloc_infos(view, core):
    ours = [{"fast": (a["fastbins"]["count"], a["fastbins"]["bytes"]), "rest": (a["bins"]["count"], a["bins"]["bytes"]),
             "system": a["system_bytes"]} for a in view.arenas]
    assert ours == core.heaps
    assert len(ours) >= 3  # the main arena and threads' own (i386's glibc allows 2 a core)


def _chunks(view) -> dict:
    h = view.heap
    header = h.layout.chunk["header"]
    return {int(a) + header: (int(s), STATES[st]) for a, s, st in zip(h.address, h.size, h.state)}


def test_every_block_is_a_chunk_of_its_size_and_state(view, core):
    chunks, word = _chunks(view), view.heap.layout.word
    later: dict = {}
    for i, b in enumerate(core.blocks):
        later.setdefault(b["block"], []).append(i)
    live = freed = 0
    for i, b in enumerate(core.blocks):
        if b["state"] == "freed":
            if later[b["block"]][-1] == i:
                assert chunks.get(b["block"], (0, "free"))[1] != "in-use", b
                freed += 1
            continue
        size, state = chunks[b["block"]]
        assert state in ("in-use", "mmapped"), b
        assert b["usable"] == size - (2 * word if state == "mmapped" else word), b
        live += 1
    assert live > 600 and freed > 150


def test_tcaches_fastbins_bins_and_mmapped_chunks(view, core):
    """One tcache per thread, each holding chunks: the thread's own where the core has its TLS pointer (and each
    arena's threads, every thread in one), else found by its shape (the struct's chunk and its lists); the
    fastbins, bins and the 12 mmapped chunks hold what the target left there, and their bytes are glibc's."""
    h = view.heap
    states = {STATES[s]: int(n) for s, n in enumerate(np.bincount(h.state, minlength=len(STATES)))}
    assert states["tcache"] > 0 and states["fastbin"] > 0 and states["bin"] > 0 and states["mmapped"] == 12
    assert len(h.tcaches) == THREADS + 1 and all(t.chunks for t in h.tcaches)
    if core.tls:
        ids = sorted(t.id for t in open_dump(str(core.path)).threads)
        assert sorted(t.thread for t in h.tcaches) == ids
        assert sorted(i for a in h.arenas for i in a.threads) == ids and all(a.threads for a in h.arenas)
    else:
        assert all(t.thread is None for t in h.tcaches)
    m = view.summary()["mmapped"]
    assert (m["count"], m["bytes"]) == (m["glibc_count"], m["glibc_bytes"])


def test_thread_pointers_are_what_each_thread_read(core):
    """The TLS pointer the reader takes from the core (i386: the base of the GDT entry ``gs`` selects, from
    NT_386_TLS) is the one each thread read itself (``__builtin_thread_pointer()``); gcore's and QEMU's cores have
    none."""
    dump = open_dump(str(core.path))
    name = ARCHES[core.arch]
    found = {t.id: t.register(core.arch, name) for t in dump.threads}
    assert found == (core.thread_pointers if core.tls else dict.fromkeys(core.thread_pointers))


@pytest.mark.parametrize("core", ["arm64"], indirect=True)
def test_arm64_tls_above_the_thread_pointer(core):
    """arm64's static TLS lies above its thread pointer (TLS variant I): given each thread's TPIDR_EL0 as a
    kernel's core holds it in NT_ARM_TLS (here the value each thread read itself: QEMU writes no such note), every
    tcache is its thread's and every arena is tied to the threads that use it."""
    dump = open_dump(str(core.path))
    dump.threads = [replace(t, registers=t.registers + (core.thread_pointers[t.id],)) for t in dump.threads]
    heap = native_heap(dump).heap
    ids = sorted(t.id for t in dump.threads)
    assert sorted(t.thread for t in heap.tcaches) == ids and heap.missing == []
    assert sorted(i for a in heap.arenas for i in a.threads) == ids and all(len(a.threads) == 1 for a in heap.arenas)


def test_leaks_are_the_leaked_blocks(view, core):
    """Exactly the planted ones, none of the held blocks; but in gcore's i386 core, which holds mappings of the
    libraries that the kernel's core leaves out, the 300,000-byte ones may be reached by a 4-byte value there that
    falls inside them (a 32-bit address space is dense)."""
    leaked = {c["address"] + view.heap.layout.chunk["header"] for c in view.leaks()}
    planted = {b["block"]: b["usable"] for b in core.blocks if b["state"] == "leaked"}
    held = {b["block"] for b in core.blocks if b["state"] in ("live", "held", "stack")}
    assert leaked <= set(planted) and not (leaked & held)
    missed = {p: usable for p, usable in planted.items() if p not in leaked}
    if core.arch == "arm64" or core.tls:
        assert missed == {}
    else:
        assert all(usable > 300_000 for usable in missed.values()) and len(planted) - len(missed) >= 50


def test_the_command_says_what_the_core_lacks(core, capsys):
    code, stdout, stderr = run_cli(capsys, "native", str(core.path), "--format", "json")
    data = json.loads(stdout)
    assert code == 0 and data["findings"] == []
    if core.tls:
        assert stderr == ""
    else:
        assert stderr.count("\n") == 1 and "the dump has no thread's TLS pointer" in stderr
    if core.arch == "arm64":
        assert data["libc"] is None and data["version_source"] == "shape"
        code, stdout, _ = run_cli(capsys, "native", str(core.path))
        assert code == 0 and "no mapped file is libc" in stdout.splitlines()[0]
    else:
        assert data["libc"].endswith("libc.so.6") and data["version_source"] == "file"
