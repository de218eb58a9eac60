"""``clrlayout threads`` against the runtime's own DAC (issue 49, item 1): on .NET 10 every thread of the runtime's
list — address, managed and OS id, state bits, GC mode, Frame, the handle of the exception it last threw — is what
ISOSDacInterface::GetThreadData says, in the same order, the finalizer thread named as GetThreadStoreData names it;
a thread's name and its last exception are read from the managed objects.  Before .NET 9 the runtime publishes no
contract descriptor: on .NET Core 2.2, 3.1 and .NET 8 the Thread's offsets of formats/thread-state.toml give the
same answer (the finalizer thread found through the runtime's table of DAC globals, the locks each thread holds
where the runtime counts them: 2.2 and 3.1).  No .NET 5-7 runtime can be had here: those exit 4 (tested with a
version in tests/unit/test_thread_layouts.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.cli import run as run_cli

pytestmark = pytest.mark.oracle

DAC = Path(__file__).resolve().parents[1] / "support" / "dac_oracle.py"


def _dac_threads(core: Path, dac: Path) -> dict:
    r = subprocess.run([sys.executable, str(DAC), str(core), str(dac), "--threads"], capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    return json.loads(r.stdout)["threads"]


def test_threads_are_the_dacs(fresh_core, capsys):
    """.NET 9+: through the contract descriptor; .NET Core 2.2, 3.1 and .NET 8: at formats/thread-state.toml's
    offsets, the list found from the managed Thread objects, the finalizer from g_dacTable."""
    code, stdout, stderr = run_cli(capsys, "threads", str(fresh_core.path), "--format", "json")
    assert code == 0, stderr
    ours = json.loads(stdout)["threads"]
    dac = _dac_threads(fresh_core.path, fresh_core.dac)
    assert len(ours) == len(dac["threads"]) > 1
    for mine, theirs in zip(ours, dac["threads"]):
        assert int(mine["address"], 16) == theirs["address"]
        assert (mine["managed_id"], mine["os_id"], mine["state"]) == \
            (theirs["managed_id"], theirs["os_id"], theirs["state"] & 0xFFFFFFFF)
        assert (mine["gc_mode"] == "cooperative") == bool(theirs["preemptive_gc_disabled"])
        assert int(mine["frame"], 16) == theirs["frame"] & 0xFFFFFFFFFFFFFFFF
        # the locks it holds where the runtime counts them (3.1); where it does not (8+), the DAC says 0xFFFFFFFF
        assert mine["lock_count"] == (None if theirs["lock_count"] == 0xFFFFFFFF else theirs["lock_count"])
    from clrlayout.dump import open_dump

    with open_dump(str(fresh_core.path)) as dump:  # every thread of the core: the runtime's, or native only
        every = [t.id for t in dump.threads]
    native = json.loads(stdout)["native_threads"]
    assert sorted(native + [t["os_id"] for t in ours if t["os_id"]]) == sorted(every)
    # through the contract descriptor (9+), or the runtime's table of DAC globals (3.1, 8)
    finalizer = [t for t in ours if t["special"] == "finalizer"]
    assert [int(t["address"], 16) for t in finalizer] == [dac["finalizer"]]
    assert sum("Background" in t["flags"] for t in ours) == dac["background"]


def _owners(target_build, tmp_path_factory, version: str, full: bool):
    """The nativeowners target's core on ``version`` (its main thread waiting in a catch, five frames deep),
    removed after the module's tests."""
    from tests.support.native import owners_core

    raw, _, _ = owners_core(target_build, tmp_path_factory.mktemp(f"threads-{version}"), version, full, tries=1)
    yield raw
    raw.unlink()


@pytest.fixture(scope="module")
def named_core(target_build, tmp_path_factory):
    yield from _owners(target_build, tmp_path_factory, "10.0.0", True)


def test_names_and_exceptions_come_from_the_managed_objects(named_core, capsys):
    import runtimes

    code, stdout, stderr = run_cli(capsys, "threads", str(named_core), "--format", "json")
    assert code == 0, stderr
    ours = json.loads(stdout)["threads"]
    assert [t["name"] for t in ours].count("native-leaker") == 1
    dac = _dac_threads(named_core, runtimes.get("10.0.0").dac)
    thrown = [(mine, theirs) for mine, theirs in zip(ours, dac["threads"]) if theirs["last_thrown_handle"]]
    assert len(thrown) == 1 and thrown[0][0]["managed_id"] == 1  # the main thread, waiting in its catch
    assert thrown[0][0]["exception"]["type"] == "System.InvalidOperationException"
    assert thrown[0][0]["exception"]["message"] == "nativeowners: in flight"
    assert all(mine["exception"] is None
               for mine, theirs in zip(ours, dac["threads"]) if not theirs["last_thrown_handle"])
    code, stdout, _ = run_cli(capsys, "threads", str(named_core))
    assert code == 0 and "native-leaker" in stdout and stdout.startswith("ThreadCount: ")


def test_pe_is_the_exception_in_flight_with_its_frames_named_as_the_dac_names_them(named_core, capsys):
    import runtimes

    code, stdout, stderr = run_cli(capsys, "pe", str(named_core), "--format", "json")
    assert code == 0, stderr
    (e,) = json.loads(stdout)["exceptions"]  # the main thread's, waiting in its catch
    assert (e["type"], e["message"], e["hresult"]) == ("System.InvalidOperationException", "nativeowners: in flight",
                                                       0x80131509)
    assert e["inner"] is None and e["frames"]
    mds = ",".join(f["method_desc"] for f in e["frames"])
    r = subprocess.run([sys.executable, str(DAC), str(named_core), str(runtimes.get("10.0.0").dac),
                        "--method-names", mds], capture_output=True, text=True, timeout=600)
    names = json.loads(r.stdout)["method_names"]
    assert [f["method"] for f in e["frames"]] == [names[f["method_desc"]] for f in e["frames"]]
    assert e["frames"][-1]["method"] == "Program.Main(System.String[])"
    code, stdout, _ = run_cli(capsys, "pe", str(named_core), e["address"])
    assert code == 0 and "Exception type:   System.InvalidOperationException" in stdout and "Program.Main" in stdout
    code, _, stderr = run_cli(capsys, "pe", str(named_core), hex(int(e["address"], 16) + 8))
    assert code == 4 and "not the start of an object" in stderr


@pytest.mark.parametrize("version", ["8.0.4", "10.0.0"])
def test_info_names_the_crash_and_its_exception(version, target_build, tmp_path, capsys):
    """A dump the runtime wrote as the process died of an unhandled exception (DOTNET_DbgEnableMiniDump): `info`
    names the thread and signal the core says (NT_PRSTATUS's pr_cursig) and the exception in flight on it, as the
    DAC's thread data holds it; a dump of a running process names no crash."""
    from tests.support.markers import make_marked_dump

    made = make_marked_dump(target_build, tmp_path, version, "crash")
    code, stdout, stderr = run_cli(capsys, "info", str(made.path), "--format", "json")
    assert code == 0, stderr
    crash = json.loads(stdout)["crash"]
    assert crash["signal"] == 6 and crash["signal_name"] == "SIGABRT"
    code, stdout, _ = run_cli(capsys, "threads", str(made.path), "--format", "json")
    assert code == 0
    (main,) = [t for t in json.loads(stdout)["threads"] if t["os_id"] == crash["thread"]]
    assert crash["managed_id"] == main["managed_id"] == 1
    assert crash["exception"]["type"] == "System.InvalidOperationException"
    assert crash["exception"]["message"].startswith("crash requested ")
    import runtimes

    dac = {t["os_id"]: t for t in _dac_threads(made.path, runtimes.get(version).dac)["threads"]}
    assert dac[crash["thread"]]["last_thrown_handle"]
    code, stdout, _ = run_cli(capsys, "pe", str(made.path))
    assert code == 0 and "System.InvalidOperationException" in stdout and "crash requested" in stdout
    made.path.unlink()


def test_a_running_process_dump_names_no_crash(named_core, capsys):
    code, stdout, _ = run_cli(capsys, "info", str(named_core), "--format", "json")
    assert code == 0 and json.loads(stdout)["crash"] is None


@pytest.fixture(scope="module")
def core_2_2(target_build, tmp_path_factory):
    yield from _owners(target_build, tmp_path_factory, "2.2.5", False)


def test_net_core_2_2_s_exception_in_flight_and_frames_are_the_dacs(core_2_2, capsys):
    """2.2 keeps the Thread's last thrown object 0x28 past its exposed object, as 3.1 does, and a MethodDescChunk's
    MethodTable as an offset from the field: the exception in flight is the one whose handle GetThreadData gives,
    and every frame of its stack trace is named as GetMethodDescName names it."""
    import runtimes

    dac = _dac_threads(core_2_2, runtimes.get("2.2.5").dac)
    code, stdout, stderr = run_cli(capsys, "threads", str(core_2_2), "--format", "json")
    assert code == 0, stderr
    ours = json.loads(stdout)["threads"]
    from clrlayout.dump import open_dump

    with open_dump(str(core_2_2)) as dump:
        for mine, theirs in zip(ours, dac["threads"], strict=True):
            handle = theirs["last_thrown_handle"]
            assert (mine["exception"] is None) == (not handle)
            if handle:
                assert int(mine["exception"]["address"], 16) == dump.memory.try_read_pointer(handle)
                assert mine["exception"]["type"] == "System.InvalidOperationException"
    code, stdout, stderr = run_cli(capsys, "pe", str(core_2_2), "--format", "json")
    assert code == 0, stderr
    (e,) = json.loads(stdout)["exceptions"]
    mds = ",".join(f["method_desc"] for f in e["frames"])
    r = subprocess.run([sys.executable, str(DAC), str(core_2_2), str(runtimes.get("2.2.5").dac), "--method-names", mds],
                       capture_output=True, text=True, timeout=600)
    names = json.loads(r.stdout)["method_names"]
    assert [f["method"] for f in e["frames"]] == \
        ["Program.Raise(System.String)"] + ["Program.Through(Int32)"] * 3 + ["Program.Main(System.String[])"]
    assert [f["method"] for f in e["frames"]] == [names[f["method_desc"]] for f in e["frames"]]
