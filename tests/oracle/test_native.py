"""``clrlayout native`` against glibc itself (issue 48): the target (sample_dumps/targets/native/mallocs.c) records,
at the moment gdb's gcore dumps it, ``mallinfo2()``, ``malloc_info()`` and a ledger of its blocks — in use in five
arenas, in the tcache and fastbins, in the unsorted, small and large bins, mmapped, leaked (no pointer left, some
reached only from another leaked block), held only through other blocks or only from a stack.  Every figure is
compared with what glibc said; gdb with Debian's libc6-dbg is the second oracle (the arenas and mp_)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from clrlayout.dump import open_dump
from clrlayout.model.native import native_heap
from clrlayout.native.chunks import IN_USE, MMAPPED, STATES
from tests.support.cli import run as run_cli
from tests.support.native import build, gdb_oracle, make_core

pytestmark = pytest.mark.oracle


@pytest.fixture(scope="module")
def core(tmp_path_factory):
    work = tmp_path_factory.mktemp("native")
    made = make_core(build(work), work)
    yield made
    made.path.unlink()


@pytest.fixture(scope="module")
def view(core):
    dump = open_dump(str(core.path))
    yield native_heap(dump)
    dump.close()


def test_mallinfo_is_glibcs_field_by_field(view, core):
    assert view.mallinfo == core.mallinfo
    assert list(view.heap.findings) == [] and view.heap.missing == []


def test_each_arena_is_malloc_infos(view, core):
    ours = [{"fast": (a["fastbins"]["count"], a["fastbins"]["bytes"]), "rest": (a["bins"]["count"], a["bins"]["bytes"]),
             "system": a["system_bytes"]} for a in view.arenas]
    assert ours == core.heaps
    assert len(ours) == 5  # the main arena and one per thread


def test_gdb_reads_the_same_arenas(view, core, tmp_path):
    truth = gdb_oracle(core, tmp_path)
    assert [[a.address, a.system_mem, a.top] for a in view.heap.arenas] == truth["arenas"]
    assert view.heap.mp == truth["mp"]
    assert (view.heap.par["n_mmaps"], view.heap.par["mmapped_mem"], view.heap.par["sbrk_base"]) == \
        (truth["n_mmaps"], truth["mmapped_mem"], truth["sbrk_base"])


def _chunks(view) -> dict:
    h = view.heap
    return {int(a) + 16: (int(s), STATES[st]) for a, s, st in zip(h.address, h.size, h.state)}


def test_every_block_is_a_chunk_of_its_size_and_state(view, core):
    chunks = _chunks(view)
    later = {}
    for i, b in enumerate(core.blocks):
        later.setdefault(b["block"], []).append(i)
    checked = {"live": 0, "freed": 0}
    for i, b in enumerate(core.blocks):
        if b["state"] == "freed":
            if later[b["block"]][-1] == i:  # not taken again by a later block
                assert chunks.get(b["block"], (0, "free"))[1] != "in-use", b
                checked["freed"] += 1
            continue
        size, state = chunks[b["block"]]
        assert state in ("in-use", "mmapped"), b
        assert b["usable"] == size - (16 if state == "mmapped" else 8), b
        checked["live"] += 1
    assert checked["live"] > 600 and checked["freed"] > 150


def test_tcache_fastbins_and_bins_hold_every_kind(view, core):
    states = {STATES[s]: int(n) for s, n in enumerate(np.bincount(view.heap.state, minlength=len(STATES)))}
    assert states["tcache"] > 0 and states["fastbin"] > 0 and states["bin"] > 0 and states["mmapped"] == 12
    threads = sorted(t.thread for t in view.heap.tcaches)
    dump = open_dump(str(core.path))
    assert threads == sorted(t.id for t in dump.threads)  # one tcache per thread, each named
    assert {t.id: t.register("x64", "fs_base") for t in dump.threads} == core.thread_pointers  # as each read it
    assert all(len(a.threads) == 1 for a in view.heap.arenas)


def test_leaks_are_exactly_the_leaked_blocks(view, core):
    leaked = {c["address"] + 16 for c in view.leaks()}
    planted = {b["block"] for b in core.blocks if b["state"] == "leaked"}
    held = {b["block"] for b in core.blocks if b["state"] in ("live", "held", "stack")}
    assert planted and planted <= leaked
    assert not (leaked & held)
    index, level = view._reach
    by_user = {int(view.heap.address[r]) + 16: int(level[k]) for k, r in enumerate(index.rows)}
    # a list's nodes but its head are reached only through other chunks; a block only its stack holds, from there
    assert sorted({by_user[b["block"]] for b in core.blocks if b["state"] == "held"}) == [1, 2]
    assert sum(by_user[b["block"]] == 2 for b in core.blocks if b["state"] == "held") == 9 * 4
    assert {by_user[b["block"]] for b in core.blocks if b["state"] == "stack"} == {1}
    assert view.reach_counts()["through_chunks"]["count"] >= 9 * 4


def test_the_walk_in_small_batches_reaches_the_same(view, core, monkeypatch):
    """The breadth-first walk follows a bounded number of edges at a time: in parts of 3 edges and 3 chunks it
    reaches exactly what it reaches at once."""
    from clrlayout.native import leaks

    _, level = view._reach
    monkeypatch.setattr(leaks, "BATCH_EDGES", 3)
    monkeypatch.setattr(leaks, "BATCH_CHUNKS", 3)
    _, small = leaks.reached(view._dump, view.heap, index=view._index)
    assert (small == level).all() and (level == 2).sum() >= 9 * 4


def test_command_json_and_chunks(core, capsys):
    code, stdout, stderr = run_cli(capsys, "native", str(core.path), "--format", "json")
    assert code == 0 and stderr == ""
    data = json.loads(stdout)
    assert data["mallinfo"] == core.mallinfo and data["version"].startswith("2.")
    code, stdout, _ = run_cli(capsys, "native", str(core.path), "--chunks", "--format", "jsonl")
    rows = [json.loads(line) for line in stdout.splitlines()]
    assert sum(r["size"] for r in rows if r["state"] == "mmapped") == core.mallinfo["hblkhd"]
    assert {r["state"] for r in rows} <= set(STATES)
    code, stdout, _ = run_cli(capsys, "native", str(core.path), "--leaks", "--format", "jsonl")
    assert code == 0 and all(json.loads(line)["state"] in ("in-use", "mmapped") for line in stdout.splitlines())


def _patched(core, tmp_path, patches) -> str:
    """A copy of the core with ``patches`` ((address, bytes)) written over the memory they name."""
    dump = open_dump(str(core.path))
    data = bytearray(core.path.read_bytes())
    for address, value in patches:
        region = dump.memory.region_at(address)
        at = region.offset + address - region.start
        data[at : at + len(value)] = value
    dump.close()
    out = tmp_path / "patched.core"
    out.write_bytes(bytes(data))
    return str(out)


def test_damaged_malloc_state_is_a_finding_never_a_hang(view, core, tmp_path, capsys):
    h = view.heap
    arena = h.arenas[1]
    mine = np.flatnonzero((h.arena == arena.index) & (h.state == IN_USE))
    chunk = int(h.address[mine[len(mine) // 2]])
    fast = int(h.address[np.flatnonzero((h.arena == arena.index) & (h.state == STATES.index("fastbin")))[0]])
    entry = next(iter(h.tcaches[1].chunks)) + 16
    loop = ((fast + 16) >> 12) ^ fast  # the fastbin chunk's fd, safe-linked, pointing at itself
    cases = {"chunk": [(chunk + 8, (0x13).to_bytes(8, "little"))],
             "fastbin loop": [(fast + 16, loop.to_bytes(8, "little"))],
             "tcache": [(entry, (0x4141414141414141).to_bytes(8, "little"))]}
    for name, patches in cases.items():
        path = _patched(core, tmp_path, patches)
        code, stdout, stderr = run_cli(capsys, "native", path, "--format", "json")
        assert code == 0, (name, stderr)
        findings = json.loads(stdout)["findings"]
        assert findings and stderr.startswith("clrlayout: warning:"), name
        assert "Traceback" not in stderr
        code, _, stderr = run_cli(capsys, "native", path, "--leaks", "--format", "jsonl")
        assert code == 0 and "Traceback" not in stderr


def test_what_is_not_glibc_is_said(capsys, tmp_path):
    from tests.support.samples import SAMPLES

    code, _, stderr = run_cli(capsys, "native", str(SAMPLES / "strings.coreclr-10.0.0.win-x64.dmp"))
    assert code == 4 and "the Windows heap is not read yet" in stderr
    code, _, stderr = run_cli(capsys, "native", str(SAMPLES / "strings.coreclr-8.0.4.linux-x64.core"))
    assert code == 4 and "no glibc malloc state" in stderr  # a trimmed sample keeps none of it
    code, _, stderr = run_cli(capsys, "native", str(SAMPLES / "strings.coreclr-8.0.4.linux-x64.core"), "--state", "bin")
    assert code == 2


@pytest.mark.parametrize("kind", ["createdump-full", "createdump-heap"])
def test_a_dotnet_process_by_createdump(kind, target_build, tmp_path, capsys):
    """A .NET 8 process: a full dump holds all of glibc's state (nothing missing, no finding, the mmapped chunks
    glibc counts); createdump's default heap dump lacks libc's data, which is said in one line, and the other
    arenas and the brk heap are still read."""
    from tests.support.markers import make_marked_dump

    made = make_marked_dump(target_build, tmp_path, "8.0.4", kind)
    code, stdout, stderr = run_cli(capsys, "native", str(made.path), "--format", "json")
    data = json.loads(stdout)
    assert code == 0 and data["findings"] == []
    if kind == "createdump-full":
        assert stderr == "" and data["mallinfo"]["arena"] == data["totals"]["system_bytes"]
        assert (data["mmapped"]["count"], data["mmapped"]["bytes"]) == \
            (data["mmapped"]["glibc_count"], data["mmapped"]["glibc_bytes"])
        assert len(data["arenas"]) > 2 and data["arenas"][0]["main"]
    else:
        assert stderr.count("\n") == 1 and "createdump's full type" in stderr and data["mallinfo"] is None
        assert any(a["main"] and a["in_use"]["count"] > 100 for a in data["arenas"])


# --- a .NET process: the managed objects that own native blocks (sample_dumps/targets/nativeowners) -----------------

@pytest.fixture(scope="module", params=[(v, full) for v in ("3.1.23", "8.0.4", "10.0.0") for full in (True, False)],
                ids=lambda p: f"{p[0]}-{'full' if p[1] else 'heap'}")
def owners_made(request, target_build, tmp_path_factory):
    from tests.support.native import owners_core

    version, full = request.param
    raw, truth, mallinfo = owners_core(target_build, tmp_path_factory.mktemp("owners"), version, full)
    if not version.startswith("3."):  # the runtimes whose leaks the tests hold exact (docs/guide/native.md)
        _leaker_has_an_arena_of_its_own(raw, truth)
    yield raw, truth, mallinfo
    raw.unlink()


def _leaker_has_an_arena_of_its_own(raw, truth):
    """What makes the leaks exact: the target's leaked and dead-held blocks lie in one thread arena that no other
    thread uses (memory the runtime never had, so no stale address of the runtime's points into it)."""
    from clrlayout.model.native import open_native

    arenas = open_native(str(raw)).arenas
    dropped = [b["block"] for b in truth["blocks"] if b["how"] in ("leaked", "dead")]
    holding = [a for a in arenas
               if any(lo <= b < hi for b in dropped for lo, hi in a["heap_ranges"])]
    main = [hex(b) for b in dropped if any(lo <= b < hi for a in holding if a["main"] for lo, hi in a["heap_ranges"])]
    assert len(holding) == 1 and not holding[0]["main"] and len(holding[0]["threads"]) == 1, (holding, main)


@pytest.fixture
def owners_core(owners_made):
    return owners_made[:2]


def test_a_dotnet_process_s_mallinfo_is_glibcs(owners_made, capsys):
    """mallinfo2() asked of the .NET process just before and just after its dump (and the same both times): the
    full dump's mallinfo is it, field by field; a heap dump has none (no main_arena) and says so."""
    raw, _, mallinfo = owners_made
    assert mallinfo is not None, "the process's mallinfo2() changed across every one of the dumps"
    code, stdout, stderr = run_cli(capsys, "native", str(raw), "--format", "json")
    data = json.loads(stdout)
    if "-full" in raw.name:
        assert data["mallinfo"] == mallinfo and stderr == ""
    else:
        assert data["mallinfo"] is None and "createdump's full type" in stderr


def test_pe_names_every_frame_as_the_dac_does(owners_made, capsys):
    """The exception the main thread holds in flight, thrown five calls deep: `pe ADDRESS` names every frame of
    its stack trace through the frame's MethodDesc (the layout of the runtime's contract descriptor on .NET 10,
    formats/type-system.toml's before), as the DAC's GetMethodDescName names it up to the parameter list."""
    import subprocess
    import sys
    from pathlib import Path

    import runtimes

    import clrlayout

    raw = owners_made[0]
    with clrlayout.open(str(raw)) as dump:
        version = dump.runtime.version  # the runtime whose DAC names the frames
    code, stdout, stderr = run_cli(capsys, "dump", str(raw), "--type", "System.InvalidOperationException",
                                   "--format", "jsonl", "-q")
    assert code == 0, stderr
    (thrown,) = [json.loads(line)["address"] for line in stdout.splitlines()]
    code, stdout, stderr = run_cli(capsys, "pe", str(raw), thrown, "--format", "json")
    assert code == 0, stderr
    (e,) = json.loads(stdout)["exceptions"]
    frames = e["frames"]
    assert [f["method"] for f in frames] == \
        ["Program.Raise(System.String)"] + ["Program.Through(Int32)"] * 3 + ["Program.Main(System.String[])"]
    oracle = Path(__file__).resolve().parents[1] / "support" / "dac_oracle.py"
    r = subprocess.run([sys.executable, str(oracle), str(raw), str(runtimes.get(version).dac), "--method-names",
                        ",".join(f["method_desc"] for f in frames)], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    names = json.loads(r.stdout)["method_names"]
    assert [f["method"] for f in frames] == [names[f["method_desc"]] for f in frames]
    code, stdout, stderr = run_cli(capsys, "pe", str(raw), "--format", "json")  # the exception in flight
    assert code == 0, stderr
    assert [e["address"] for e in json.loads(stdout)["exceptions"]] == [thrown]


def test_owners_are_the_objects_that_hold_each_block(owners_core, capsys):
    from clrlayout.model.native import open_native

    raw, truth = owners_core
    view = open_native(str(raw))
    assert view.owners is not None
    h = view.heap
    row_of = {int(a) + 16: i for i, a in enumerate(h.address)}
    held = [b for b in truth["blocks"] if b["how"] not in ("leaked", "dead")]
    kinds = {"field", "uintptr", "pointer", "struct", "safehandle", "array", "boxed", "interior"}
    assert {b["how"] for b in held} == kinds | ({"nativememory"} if truth["runtime"][0] != "3" else set())
    for b in held:
        row = row_of[b["block"]]
        assert view.owners.live.get(row, (None,))[0] == b["holder"], b
        size = int(h.size[row])
        assert b["usable"] == size - (16 if h.state[row] == MMAPPED else 8)
    leaks = {c["address"] + 16: c for c in view.leaks()}
    assert not set(leaks) & {b["block"] for b in held}
    # .NET Core 3.1's own blocks point at some of the target's (docs/guide/native.md): the leaks are exact on 8, 10
    exact_leaks = not truth["runtime"].startswith("3.")
    for b in truth["blocks"]:
        if b["how"] == "leaked" and exact_leaks:
            assert leaks[b["block"]]["held_by_dead"] is None, b
        elif b["how"] == "dead" and exact_leaks:  # held only by a dead object: leaked, and the object named
            assert leaks[b["block"]]["held_by_dead"]["address"] == b["holder"], b
            assert leaks[b["block"]]["held_by_dead"]["type"] == "Holder"
    by_type = {r["type"]: r for r in view.by_owner()}
    holder_bytes = sum(int(h.size[row_of[b["block"]]]) for b in held
                       if b["how"] in ("field", "uintptr", "pointer", "interior", "nativememory"))
    assert by_type["Holder"]["bytes"] == holder_bytes and by_type["System.IntPtr[]"]["chunks"] == 10
    code, stdout, _ = run_cli(capsys, "native", str(raw), "--by", "owner", "--format", "json")
    assert code == 0 and json.loads(stdout)["owners"][0]["type"] == "Holder"
    code, stdout, _ = run_cli(capsys, "native", str(raw), "--chunks", "--format", "jsonl")
    owned = {json.loads(line)["address"]: json.loads(line)["owner"] for line in stdout.splitlines()}
    assert owned[f"{held[0]['block'] - 16:#x}"] == f"{held[0]['holder']:#x}"


def test_retained_counts_the_native_bytes_an_object_holds(owners_core, capsys):
    """The static List that keeps every holder alive retains the native blocks they own: its statics array's
    native_bytes is their chunks' bytes, plus at most those of the runtime's own objects that own blocks (a wait
    handle's) where the same array holds them."""
    raw, truth = owners_core
    code, stdout, _ = run_cli(capsys, "native", str(raw), "--chunks", "--format", "jsonl")
    rows = [json.loads(line) for line in stdout.splitlines()]
    size = {int(r["address"], 16) + 16: r["size"] for r in rows}
    held = sum(size[b["block"]] for b in truth["blocks"] if b["how"] not in ("leaked", "dead"))
    mine = {"Holder", "StructHolder", "BlockHandle", "System.IntPtr[]", "System.IntPtr"}
    runtime_owned = sum(r["size"] for r in rows if r.get("owner_type") and r["owner_type"] not in mine)
    code, stdout, _ = run_cli(capsys, "retained", str(raw), "--top", "200", "--format", "json")
    assert code == 0
    top = max(o["native_bytes"] for o in json.loads(stdout)["objects"])
    assert held <= top <= held + runtime_owned


def test_memory_splits_the_native_memory_as_malloc_does(owners_core, capsys):
    raw, _ = owners_core
    code, stdout, _ = run_cli(capsys, "memory", str(raw), "--format", "json")
    data = json.loads(stdout)
    split = data["native_heap"]
    native = next(k["bytes"] for k in data["kinds"] if k["kind"] == "native")
    code, stdout, _ = run_cli(capsys, "native", str(raw), "--format", "json")
    totals = json.loads(stdout)["totals"]
    assert split["in_use"] == totals["in_use"]["bytes"] and split["mmapped_chunks"] == totals["mmapped"]["bytes"]
    parts = ("in_use", "free_in_arenas", "arena_overhead", "mmapped_chunks", "other_native")
    assert sum(split[k] for k in parts) == native and split["other_native"] >= 0
    assert (split["missing"] is None) == ("-full" in raw.name)


def test_report_names_the_native_leaks_and_arenas(owners_core, capsys, tmp_path):
    """The report's native inspection is `native --leaks` and `native`'s arenas: the leaks' count and bytes, the
    largest leaks among them, and on .NET 8 and 10 the target's leaked blocks in it (and none it holds)."""
    raw, truth = owners_core
    code, stdout, _ = run_cli(capsys, "native", str(raw), "--leaks", "--format", "jsonl")
    leaks = [json.loads(line) for line in stdout.splitlines()]
    code, stdout, _ = run_cli(capsys, "native", str(raw), "--format", "json")
    arenas = json.loads(stdout)["arenas"]
    code, stdout, _ = run_cli(capsys, "report", str(raw), "--format", "json", "--threshold", "1")
    assert code == 0  # a small heap: a low threshold, that the list holding the blocks' owners is a suspect
    ins = json.loads(stdout)["inspections"]
    found = ins["native_leaks"]
    assert (found["count"], found["bytes"]) == (len(leaks), sum(r["size"] for r in leaks)) and found["count"]
    assert found["held_by_dead"] == sum(1 for r in leaks if r.get("held_by_dead"))
    biggest = sorted((r["size"] for r in leaks), reverse=True)[:len(found["largest"])]
    assert [r["size"] for r in found["largest"]] == biggest
    by_address = {r["address"]: r for r in leaks}
    for r in found["largest"]:
        assert r["preview"] == by_address[r["address"]]["preview"]
    assert ins["native_arenas"]["count"] == len(arenas)
    assert ins["native_arenas"]["system_bytes"] == sum(a["system_bytes"] for a in arenas)
    # each suspect's native bytes: what `retained` says the same object's dominated objects own
    report = json.loads(stdout)
    code, stdout, _ = run_cli(capsys, "retained", str(raw), "--top", "300", "--format", "json")
    native_of = {o["address"]: o["native_bytes"] for o in json.loads(stdout)["objects"]}
    assert report["suspects"] and any(s["native_bytes"] for s in report["suspects"])
    for s in report["suspects"]:
        assert s["native_bytes"] == native_of[s["address"]], s["type"]
    page = tmp_path / "report.html"
    assert run_cli(capsys, "report", str(raw), "-o", str(page))[0] == 0
    text = page.read_text(encoding="utf-8")
    assert f"<b>{found['count']:,}</b> in-use chunks, <b>{found['bytes']:,}</b> bytes" in text
    assert found["largest"][0]["address"] in text and "malloc arenas" in text
    if not truth["runtime"].startswith("3."):  # .NET Core 3.1's own blocks point at some of the target's
        reported = {int(r["address"], 16) + 16 for r in leaks}
        assert {b["block"] for b in truth["blocks"] if b["how"] in ("leaked", "dead")} <= reported
        assert not reported & {b["block"] for b in truth["blocks"] if b["how"] not in ("leaked", "dead")}


def test_fleet_writes_the_native_table(owners_core, capsys, tmp_path):
    """fleet's ``native`` table: a row per arena (as `native` reports it) and per size class."""
    import pyarrow.parquet as pq

    raw, _ = owners_core
    code, _, _ = run_cli(capsys, "fleet", str(raw), "--out", str(tmp_path / "t"), "--workers", "1", "--no-retained")
    assert code == 0
    table = pq.read_table(tmp_path / "t" / "native").to_pylist()
    code, stdout, _ = run_cli(capsys, "native", str(raw), "--format", "json")
    arenas = json.loads(stdout)["arenas"]
    rows = [r for r in table if r["row"] == "arena"]
    assert [(r["system_bytes"], r["in_use_bytes"], r["main"]) for r in rows] == \
        [(a["system_bytes"], a["in_use"]["bytes"], a["main"]) for a in arenas]
    classes = [r for r in table if r["row"] == "size_class"]
    assert sum(r["in_use_bytes"] for r in classes) > sum(a["in_use"]["bytes"] for a in arenas)  # mmapped too


def test_diff_compares_native_size_classes_and_owners(owners_core, capsys):
    raw, _ = owners_core
    code, stdout, _ = run_cli(capsys, "native", str(raw), "--by", "owner", "--format", "json")
    owners = {r["type"]: r["bytes"] for r in json.loads(stdout)["owners"]}
    code, stdout, _ = run_cli(capsys, "diff", str(raw), str(raw), "--native", "--format", "json")
    assert code == 0
    rows = json.loads(stdout)["native"]
    assert {r["key"]: r["bytes"] for r in rows if r["kind"] == "owner"} == {k: [v, v] for k, v in owners.items()}
    assert all(r["delta_bytes"] == 0 for r in rows) and any(r["kind"] == "size class" for r in rows)
    code, _, stderr = run_cli(capsys, "diff", str(raw), str(raw), "--native", "--format", "csv")
    assert code == 2


from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


@settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(st.data())
def test_random_damage_to_the_malloc_state(view, core, capsys, data):
    """Words of glibc's own state overwritten at random — chunk headers, free-list pointers, tcache counts and
    entries, the arenas' fields — in the core itself (restored after): `native` and `native --leaks` end with an
    answer or an error line, never a traceback or a hang (the hang guard of the robustness tests)."""
    from tests.support.guards import hang_guard

    h = view.heap
    targets = [int(a) + 8 for a in h.address[::7]] + [int(a) + 16 for a in h.address[::11]]
    targets += [a.address + off for a in h.arenas for off in range(0, 2200, 8)][::5]
    targets += [t.address + off for t in h.tcaches for off in (0, 8, 64, 128, 136, 200)]
    dump = open_dump(str(core.path))
    patches = []
    for _ in range(data.draw(st.integers(1, 4))):
        address = data.draw(st.sampled_from(targets))
        region = dump.memory.region_at(address)
        if region is not None:
            value = data.draw(st.sampled_from([0, 1, 0x11, 0xFFFFFFFFFFFFFFFF, address, address - 16, 1 << 47,
                                               data.draw(st.integers(0, (1 << 64) - 1))]))
            patches.append((region.offset + address - region.start, value.to_bytes(8, "little")))
    dump.close()
    with open(core.path, "r+b") as f:
        saved = []
        for at, value in patches:
            f.seek(at)
            saved.append((at, f.read(8)))
            f.seek(at)
            f.write(value)
    try:
        for args in (["native", str(core.path), "--format", "json"], ["native", str(core.path), "--leaks", "-q"]):
            with hang_guard():
                code, _, stderr = run_cli(capsys, *args)
            assert code in (0, 3, 4), (args, code, stderr)
            assert "Traceback" not in stderr and all(line.startswith("clrlayout: ") for line in stderr.splitlines())
    finally:
        with open(core.path, "r+b") as f:
            for at, value in reversed(saved):
                f.seek(at)
                f.write(value)
