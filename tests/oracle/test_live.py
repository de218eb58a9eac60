"""The live harness against real runtimes (each run in its own process: one runtime per process).

CoreCLR is the embedded runtime (the [live] extra): always required.  Mono is skipped where it is not
installed, except in CI, where .ci/run installs it and sets CLRLAYOUT_REQUIRE_MONO=1 so that a missing
Mono fails instead of skipping.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from tests.support.scripts import script

from clrlayout.runtime.profiles import formats_dir

pytestmark = pytest.mark.live


def live(*args, env=None, timeout=600):
    r = subprocess.run([sys.executable, "-m", "clrlayout", "live", *map(str, args)], capture_output=True,
                       text=True, env={**os.environ, **(env or {})}, timeout=timeout)
    assert "Traceback" not in r.stderr, r.stderr
    return r


def report(*args, **kw) -> tuple[int, dict]:
    r = live("--format", "json", *args, **kw)
    assert r.stdout, r.stderr
    return r.returncode, json.loads(r.stdout)


def mono_missing() -> str | None:
    """Why Mono cannot be hosted here (the product's own message, naming the missing library), or None."""
    from clrlayout.errors import LiveRuntimeUnavailable
    from clrlayout.live.host import find_mono

    try:
        find_mono()
        return None
    except LiveRuntimeUnavailable as e:
        if os.environ.get("CLRLAYOUT_REQUIRE_MONO"):
            pytest.fail(f"Mono is required here (CLRLAYOUT_REQUIRE_MONO): {e}")
        return f"{e} (CI installs it)"


_MONO_MISSING = mono_missing()
needs_mono = pytest.mark.skipif(_MONO_MISSING is not None, reason=_MONO_MISSING or "")


def _case(data, name):
    return next(c for c in data["cases"] if c["name"] == name)


def test_coreclr_all_checks_pass(tmp_path):
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    code, data = report("--max-length", "64", env={"TMPDIR": str(scratch)})
    assert code == 0
    assert list(scratch.iterdir()) == []  # nothing left behind in $TMPDIR
    assert data["runtime"]["flavor"] == "coreclr" and data["runtime"]["version"] == "3.1.23"
    assert data["profile"] == "coreclr-x64"
    assert data["failures"] == 0 and data["checks"] >= 500
    names = {c["name"] for c in data["cases"]}
    assert {f"length {n}" for n in range(65)} <= names
    for case in data["cases"]:
        assert all(c["ok"] for c in case["checks"]), case
    assert _case(data, "thin lock")["header"] == 1  # thin lock, managed thread 1
    assert _case(data, "nested lock")["header"] == 0x401  # recursion 1 << 10
    assert _case(data, "identity hash")["header"] & 0x0C000000 == 0x0C000000
    assert _case(data, "hash, then lock")["header"] & 0x0C000000 == 0x08000000
    large = _case(data, "large object heap")
    assert large["size"] == 22 + 100000 and large["aligned_size"] == 100024
    # every case checked its aligned size against a real neighbour, except the shared and LOH objects
    walked = [c for c in data["cases"] if any(k["name"].startswith("aligned size") for k in c["checks"])]
    assert len(walked) >= 70


def test_a_wrong_profile_value_fails(tmp_path):
    bad = tmp_path / "formats"
    shutil.copytree(formats_dir(), bad)
    text = (bad / "coreclr-x64.toml").read_text()
    assert "base_size = 22\n" in text
    (bad / "coreclr-x64.toml").write_text(text.replace("base_size = 22\n", "base_size = 24\n"))
    code, data = report("--max-length", "16", env={"CLRLAYOUT_FORMATS": str(bad)})
    assert code == 1
    assert data["failures"] > 0
    failed = {c["name"] for case in data["cases"] for c in case["checks"] if not c["ok"]}
    failed |= {c["name"] for c in data["runtime_checks"] if not c["ok"]}
    assert "SOS size = MethodTable BaseSize + 2n" in failed
    assert "String MethodTable BaseSize" in failed


def test_coreclr_capture_round_trip(tmp_path):
    out = tmp_path / "live.core"
    code, data = report("--max-length", "16", "--capture", out)
    assert code == 0, [c for case in data["cases"] for c in case["checks"] if not c["ok"]]
    assert out.exists()
    capture = [c for case in data["cases"] for c in case["checks"] if c["name"].startswith("capture")]
    assert len(capture) == len(data["cases"]) and all(c["ok"] for c in capture)
    assert any(c["name"] == "capture: exact heap walk" and c["ok"] for c in data["runtime_checks"])


def test_table_output():
    r = live("--max-length", "2")
    assert r.returncode == 0
    assert "0 failures: every case matches the profile coreclr-x64" in r.stdout
    assert "thin lock: thread 1, recursion 1" in r.stdout


@needs_mono
def test_mono_all_checks_pass():
    code, data = report("--runtime", "mono", "--max-length", "64")
    assert code == 0, [c for case in data["cases"] for c in case["checks"] if not c["ok"]]
    assert data["runtime"]["flavor"] == "mono" and data["profile"] == "mono-x64"
    assert data["failures"] == 0 and data["checks"] >= 500
    assert _case(data, "nested lock")["header"] - _case(data, "thin lock")["header"] == 4  # nest count << 2
    assert _case(data, "identity hash")["header"] & 3 == 1  # LOCK_WORD_HAS_HASH
    assert _case(data, "hash, then lock")["header"] & 3 == 3  # inflated, with the hash


@needs_mono
def test_mono_capture_round_trip(tmp_path):
    out = tmp_path / "mono.dmp"
    code, data = report("--runtime", "mono", "--max-length", "16", "--capture", out)
    assert code == 0, [c for case in data["cases"] for c in case["checks"] if not c["ok"]]
    capture = [c for case in data["cases"] for c in case["checks"] if c["name"].startswith("capture")]
    assert capture and all(c["ok"] for c in capture)


def test_missing_mono_is_a_clear_error(tmp_path):
    r = live("--runtime", "mono", env={"CLRLAYOUT_MONO_LIB": str(tmp_path / "libmonosgen-2.0.so.1")})
    assert r.returncode == 7
    assert r.stderr.startswith("clrlayout: error:") and "apt-get install libmonosgen-2.0-1" in r.stderr


def test_mono_without_its_embedding_library_names_it(tmp_path, monkeypatch):
    """mono-runtime without mono-devel: the mono program is there, libmonosgen-2.0.so.1 is not."""
    import clrlayout.live.host as host
    from clrlayout.errors import LiveRuntimeUnavailable

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "mono").write_text("#!/bin/sh\n")
    (bin_dir / "mono").chmod(0o755)
    monkeypatch.setattr(host, "MONO_LIBRARIES", [str(tmp_path / "absent.so.1")])
    monkeypatch.setattr(host.ctypes.util, "find_library", lambda name: None)
    monkeypatch.delenv("CLRLAYOUT_MONO_LIB", raising=False)
    monkeypatch.setenv("PATH", str(bin_dir))
    with pytest.raises(LiveRuntimeUnavailable) as e:
        host.find_mono()
    message = str(e.value)
    assert f"Mono is installed ({bin_dir / 'mono'}) but not its embedding library" in message
    assert "libmonosgen-2.0.so.1" in message and "libmonosgen-2.0-1" in message


def test_layout_command_matches_the_live_runtime(capsys):
    from clrlayout.cli import main

    code, data = report("--max-length", "40")
    assert code == 0
    assert main(["layout", "--format", "json", "--length", "0..40", "--runtime", "coreclr", "--arch", "x64",
                 "--runtime-version", data["runtime"]["version"]]) == 0
    table = {r["length"]: r for r in json.loads(capsys.readouterr().out)}
    for n in range(41):
        case = _case(data, f"length {n}")
        assert (case["size"], case["aligned_size"]) == (table[n]["sos_size"], table[n]["aligned_size"])


# --- a user's own .NET installation (--dotnet-root): the test-time .NET 8 and 10 runtimes ---------------


@pytest.mark.parametrize("version", ["8.0.4", "10.0.0"])
def test_dotnet_root_hosts_that_runtime_and_all_checks_pass(tmp_path, version):
    runtimes = script("runtimes")

    root = runtimes.get(version).root
    capture = tmp_path / f"live-{version}.core"
    code, data = report("--dotnet-root", root, "--framework", version.rsplit(".", 1)[0], "--max-length", "64",
                        "--capture", capture)
    assert code == 0
    assert data["runtime"]["flavor"] == "coreclr" and data["runtime"]["version"] == version
    assert data["failures"] == 0 and data["checks"] >= 700
    assert all(c["ok"] for case in data["cases"] for c in case["checks"])
    assert any(c["name"].startswith("capture:") for c in data["runtime_checks"])
    assert capture.exists() and capture.stat().st_size > 1_000_000


def test_dotnet_root_errors(tmp_path):
    r = live("--dotnet-root", tmp_path)
    assert r.returncode == 7 and "not a .NET installation folder" in r.stderr
    r = live("--framework", "8")
    assert r.returncode == 2 and "--dotnet-root" in r.stderr
    r = live("--runtime", "mono", "--dotnet-root", tmp_path)
    assert r.returncode == 2
