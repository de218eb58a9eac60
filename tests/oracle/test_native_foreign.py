"""What is not glibc's malloc is named (issue 48, item 6), on real processes dumped by gdb's gcore: a program
(sample_dumps/targets/native/plain.c) built with musl's compiler wrapper (Debian's musl-tools), and the same
program built for glibc run with jemalloc preloaded (Debian's libjemalloc2), each exit 4 naming the allocator;
the same program on glibc alone is read (the control)."""

from __future__ import annotations

import glob
import os
import shutil
import signal
import subprocess
from pathlib import Path

import pytest

from tests.support.cli import run as run_cli

pytestmark = pytest.mark.oracle

SOURCE = Path(__file__).resolve().parents[2] / "sample_dumps" / "targets" / "native" / "plain.c"


def _dump(work: Path, name: str, command: list, env: dict | None = None) -> Path:
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, env={**os.environ, **(env or {})})
    try:
        line = proc.stdout.readline()
        assert line.startswith("ready "), line
        pid = int(line.split()[1])
        subprocess.run(["gcore", "-o", str(work / name), str(pid)], check=True, capture_output=True, timeout=120)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    return work / f"{name}.{pid}"


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    work = tmp_path_factory.mktemp("foreign")
    assert shutil.which("musl-gcc"), "apt-get install musl-tools (.ci/run installs it)"
    subprocess.run(["gcc", "-O1", "-o", str(work / "plain"), str(SOURCE)], check=True)
    subprocess.run(["musl-gcc", "-O1", "-o", str(work / "plain-musl"), str(SOURCE)], check=True)
    return work


def test_musl_is_named(built, capsys):
    core = _dump(built, "musl", [str(built / "plain-musl")])
    code, _, stderr = run_cli(capsys, "native", str(core))
    assert code == 4 and "musl's malloc" in stderr and "which is not read" in stderr
    assert stderr.count("\n") == 1


def test_preloaded_jemalloc_is_named(built, capsys):
    found = glob.glob("/usr/lib/*/libjemalloc.so.2") + glob.glob("/usr/lib/libjemalloc.so.2")
    assert found, "apt-get install libjemalloc2 (.ci/run installs it)"
    core = _dump(built, "jemalloc", [str(built / "plain")], {"LD_PRELOAD": found[0]})
    code, _, stderr = run_cli(capsys, "native", str(core))
    assert code == 4 and "jemalloc (libjemalloc.so.2), which is not read" in stderr
    assert stderr.count("\n") == 1


def test_glibc_alone_is_read(built, capsys):
    core = _dump(built, "glibc", [str(built / "plain")])
    code, stdout, stderr = run_cli(capsys, "native", str(core), "--format", "json")
    assert code == 0 and stderr == ""
    import json

    data = json.loads(stdout)
    assert data["totals"]["in_use"]["count"] >= 1000 and data["findings"] == []
