"""``clrlayout fleet``: every input has its row in ``dumps`` (broken ones as errors), each dump's ``types``
rows are its ``stats --format json``, its ``memory`` rows its ``memory --format json``, a rerun resumes, a
dump that hangs or takes too much memory costs one error row, and a Dask cluster gives the same tables."""

from __future__ import annotations

import json
import os
import shutil

import pyarrow.parquet as pq
import pytest

from clrlayout import fleet
from clrlayout.fleet.tables import FleetTables
from clrlayout.fleet.worker import WorkerLimits, run_isolated
from tests.support.cli import run
from tests.support.samples import SAMPLES

pytestmark = pytest.mark.samples

TIMEOUT = 20.0  # seconds a sample may take (the hanging input is stopped at it)
LIMITS = WorkerLimits(timeout=TIMEOUT)


def sample_dumps() -> list[str]:
    return sorted(str(p) for p in SAMPLES.iterdir() if p.suffix in (".core", ".dmp"))


@pytest.fixture(scope="module")
def broken(tmp_path_factory):
    """Inputs that are not dumps, or not whole ones: (path, the error code its row must have)."""
    d = tmp_path_factory.mktemp("broken")
    whole = (SAMPLES / "strings.coreclr-8.0.4.linux-x64.core").read_bytes()
    (d / "truncated.core").write_bytes(whole[: len(whole) // 2])
    (d / "garbage.dmp").write_bytes(bytes(range(256)) * 64)
    (d / "empty.dmp").write_bytes(b"")
    (d / "no-dumps").mkdir()
    (d / "no-dumps" / "notes.txt").write_text("not a dump")
    return [(str(d / "truncated.core"), "truncated-dump"), (str(d / "garbage.dmp"), "unsupported-dump"),
            (str(d / "empty.dmp"), "truncated-dump"), (str(d / "no-dumps"), "no-dumps"),
            (str(d / "missing.dmp"), "no-such-file")]


@pytest.fixture(scope="module")
def local_run(tmp_path_factory, broken):
    out = tmp_path_factory.mktemp("fleet") / "out"
    summary = fleet.run([str(SAMPLES)] + [p for p, _ in broken], str(out), workers=2, limits=LIMITS)
    return out, summary


def table(out, name):
    return FleetTables(str(out)).read(name).to_pylist()


def test_every_input_has_its_row(local_run, broken):
    out, summary = local_run
    rows = {r["path"]: r for r in table(out, "dumps")}
    samples = sample_dumps()
    assert set(rows) == set(samples) | {p for p, _ in broken}
    assert summary.inputs == len(rows) and summary.errors == len(broken)
    for path, code in broken:
        assert rows[path]["error_code"] == code, rows[path]
        assert rows[path]["error"]
    for path in samples:
        row = rows[path]
        assert row["error_code"] is None, row
        assert row["exact"] and row["objects"] > 500
        assert row["sha256"] == __import__("hashlib").sha256(open(path, "rb").read()).hexdigest()
        assert row["size"] == os.path.getsize(path)


def test_a_hanging_input_costs_its_row(tmp_path, broken):
    """An input that never answers is stopped at the time limit, not before, and costs its row only."""
    os.mkfifo(tmp_path / "hangs.core")  # opening it for reading blocks until a writer comes: never
    out = tmp_path / "out"
    summary = fleet.run([str(tmp_path / "hangs.core"), broken[1][0]], str(out), workers=2, limits=WorkerLimits(timeout=2.0))
    rows = {r["path"]: r for r in table(out, "dumps")}
    assert (summary.inputs, summary.errors) == (2, 2)
    assert rows[str(tmp_path / "hangs.core")]["error_code"] == "timeout"
    assert rows[str(tmp_path / "hangs.core")]["seconds"] >= 2.0  # stopped at the limit, not before
    assert rows[broken[1][0]]["error_code"] == "unsupported-dump"


def test_types_rows_are_stats(local_run, capsys, tmp_path):
    out, _ = local_run
    types = table(out, "types")
    for path in sample_dumps():
        rows = types
        if "singlefile" in path:
            # some of its types are named from the app's executable, at the path the dump names, when it is there:
            # a test of the oracle tier may download it between the fleet's run above and this stats (in CI it
            # did), so the fleet runs again on it here, next to the stats it is compared with
            again = tmp_path / "again"
            fleet.run([path], str(again), workers=1, limits=LIMITS)
            rows = table(again, "types")
        code, text, err = run(capsys, "stats", path, "--format", "json")
        assert code == 0, err
        expected = sorted((int(t["method_table"], 16), t["name"], t["count"], t["total_size"], t["total_aligned_size"])
                          for t in json.loads(text)["types"])
        got = sorted((t["method_table"], t["name"], t["count"], t["bytes"], t["aligned_bytes"])
                     for t in rows if t["path"] == path)
        assert got == expected, path


def test_memory_rows_are_memory(local_run, capsys):
    out, _ = local_run
    memory = table(out, "memory")
    for path in sample_dumps()[::4]:
        code, text, err = run(capsys, "memory", path, "--format", "json")
        assert code == 0, err
        expected = sorted((k["kind"], k["ranges"], k["bytes"]) for k in json.loads(text)["kinds"])
        assert sorted((m["kind"], m["ranges"], m["bytes"]) for m in memory if m["path"] == path) == expected


def test_retained_by_type_is_retained(local_run, capsys):
    """Where the object graph can be built (the graph and leak samples hold their handle tables), each type's
    retained bytes are ``retained --by type``'s; where it cannot, the row says why and retained is null."""
    out, _ = local_run
    types, dumps = table(out, "types"), {r["path"]: r for r in table(out, "dumps")}
    graph = str(SAMPLES / "graph.coreclr-10.0.0.linux-x64.core")
    code, text, err = run(capsys, "retained", graph, "--by", "type", "--top", "100000", "--format", "json")
    assert code == 0, err
    record = json.loads(text)
    by_name: dict = {}
    for t in types:
        if t["path"] == graph and t["retained"]:
            by_name[t["name"]] = by_name.get(t["name"], 0) + t["retained"]
    assert by_name == {t["name"]: t["retained_size"] for t in record["types"] if t["retained_size"]}
    assert dumps[graph]["live_objects"] == record["live_objects"] and dumps[graph]["graph_error"] is None
    no_graph = str(SAMPLES / "strings.coreclr-8.0.4.linux-x64.core")
    assert "handle" in dumps[no_graph]["graph_error"] and dumps[no_graph]["live_objects"] is None
    assert all(t["retained"] is None for t in types if t["path"] == no_graph)


def test_rerun_resumes(tmp_path):
    dumps = [SAMPLES / "strings.coreclr-3.1.23.win-x86.dmp", SAMPLES / "strings.coreclr-2.2.5.linux-x64.core"]
    copies = []
    for d in dumps:
        shutil.copy(d, tmp_path / d.name)
        copies.append(str(tmp_path / d.name))
    out = str(tmp_path / "out")
    first = fleet.run(copies, out, workers=1, limits=LIMITS)
    assert (first.analysed, first.skipped) == (2, 0)
    written = {p: os.stat(os.path.join(out, "dumps", p)).st_mtime_ns for p in os.listdir(os.path.join(out, "dumps"))}
    again = fleet.run(copies, out, workers=1, limits=LIMITS)
    assert (again.analysed, again.skipped) == (0, 2)
    os.utime(copies[0], (1, 1))  # the file changed: its rows are made again
    third = fleet.run(copies, out, workers=1, limits=LIMITS)
    assert (third.analysed, third.skipped) == (1, 1)
    forced = fleet.run(copies, out, workers=1, limits=LIMITS, force=True)
    assert (forced.analysed, forced.skipped) == (2, 0)
    assert {p for p in os.listdir(os.path.join(out, "dumps"))} == set(written)
    assert not os.listdir(os.path.join(out, ".partial"))
    assert [r["modified"] for r in table(out, "dumps") if r["path"] == copies[0]] == [1.0]


def test_memory_limit_is_an_error_row():
    """A dump whose analysis needs more memory than allowed costs its row, not the run (the limit here is
    below what the analysis of any dump takes)."""
    result = run_isolated(str(SAMPLES / "graph.coreclr-10.0.0.linux-x64.core"), WorkerLimits(timeout=TIMEOUT, memory=64 << 20))
    assert result["dump"]["error_code"] == "memory-limit", result["dump"]
    assert result["types"] == []
    for megabytes in (110, 120, 130):  # near the analysis's need: numpy's, numba's or LLVM's allocation fails
        result = run_isolated(str(SAMPLES / "graph.coreclr-10.0.0.linux-x64.core"),
                              WorkerLimits(timeout=TIMEOUT, memory=megabytes << 20))
        assert result["dump"]["error_code"] in ("memory-limit", None), result["dump"]


def test_command_line(tmp_path, capsys, broken):
    out = tmp_path / "out"
    code, text, err = run(capsys, "fleet", SAMPLES / "types.coreclr-8.0.4.win-x64.dmp", broken[1][0],
                          "--out", out, "--no-retained", "--workers", "1")
    assert code == 0 and err == ""
    assert text.splitlines()[0].startswith("2 inputs: 1 analysed, 1 error, 0 done before")
    assert "unsupported-dump: 1" in text
    assert pq.read_table(out / "types").num_rows > 100
    code, text, err = run(capsys, "fleet", broken[1][0], "--out", out, "--strict", "--force")
    assert code == 1 and "could not be analysed" in err
    for args, message in ((["--scheduler", "tcp://127.0.0.1:1", "--workers", "2"], "--workers"),
                          (["--no-retained", "--roots", "handles"], "--roots")):
        code, text, err = run(capsys, "fleet", broken[1][0], "--out", out, *args)
        assert code == 2 and message in err and err.count("\n") == 1


def test_scheduler_without_dask_is_a_usage_error(tmp_path, capsys, monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "distributed", None)  # as where the fleet extra is not installed
    code, _, err = run(capsys, "fleet", SAMPLES, "--out", tmp_path / "out", "--scheduler", "tcp://127.0.0.1:1")
    assert code == 2 and "pip install 'clrlayout[fleet]'" in err and not (tmp_path / "out").exists()


@pytest.mark.slow
def test_dask_cluster_gives_the_same_tables(local_run, broken, tmp_path):
    """The same inputs on a real dask.distributed LocalCluster (two worker processes): the same tables, row
    for row, but for the seconds taken."""
    import distributed  # the test extra installs dask[distributed]
    out, _ = local_run
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        summary = fleet.run([str(SAMPLES)] + [p for p, _ in broken], str(tmp_path / "dask"),
                            scheduler=cluster.scheduler_address, limits=LIMITS)
    assert summary.errors == len(broken)
    for name in ("dumps", "types", "memory"):
        local, remote = table(out, name), table(tmp_path / "dask", name)
        for r in local + remote:
            r.pop("seconds", None)
        assert remote == local, name
