"""Two processes sharing the heap walk (clrlayout/parallel.py) give the serial output byte for byte: stdout
and stderr (findings in heap order), for dump in every format and for stats, on the real samples and on
a synthetic heap full of anomalies; also when the second process dies half-way.  Runs as subprocesses,
since sharing needs a real stdout."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.support.samples import SAMPLES, manifest
from tests.support.synth import SynthHeap
from tests.support.synth_dump import build_minidump

from clrlayout.session import open_session
from clrlayout.limits import limits_from_env
from clrlayout.runtime.profiles import select_profile

#: the tests here run shared walks in several processes: slow (tier 3), but for the findings' order on a
#: synthetic heap, the quick loop's check of the shared walk
slow = pytest.mark.slow


SMALL_WINDOWS = "scan_window=4K"  # many steps even in a small dump, so that both processes take several


def run(args, jobs, extra_env=None, code=None):
    env = {**os.environ, "CLRLAYOUT_LIMITS": SMALL_WINDOWS, **(extra_env or {})}
    cmd = [sys.executable, "-c", code, *args] if code else [sys.executable, "-m", "clrlayout", *args]
    p = subprocess.run(cmd + ["--jobs", str(jobs)], capture_output=True, env=env, timeout=120)
    return p.returncode, p.stdout, p.stderr


def steps(path) -> int:
    os.environ["CLRLAYOUT_LIMITS"] = SMALL_WINDOWS
    try:
        with open_session(str(path), limits=limits_from_env()) as a:
            s = a.heap_steps()
            cursor, n = s.first(), 0
            while cursor is not None:
                _, cursor = s.run(cursor)
                n += 1
            return n
    finally:
        del os.environ["CLRLAYOUT_LIMITS"]


def windows(path) -> int:
    """How many windows of the heap hold dump memory (the plan the two processes share)."""
    os.environ["CLRLAYOUT_LIMITS"] = SMALL_WINDOWS
    try:
        with open_session(str(path), limits=limits_from_env()) as a:
            return len(list(a.heap_steps().plan()))
    finally:
        del os.environ["CLRLAYOUT_LIMITS"]


def anomalous_dump(tmp_path):
    """A synthetic heap with findings of every kind the walk and the strings give, spread over many steps."""
    p = select_profile("coreclr", "x64", "3.1.23")
    h = SynthHeap(p)
    for i in range(400):
        h.add_string(f"value {i} " + "x" * (i % 37), sync=(i * 7) % 5, terminator=1 if i % 53 == 7 else 0)
        if i % 41 == 3:
            h.add_raw(b"\x11" * 16)  # not an object: a finding, then a resync
        if i % 29 == 5:
            h.add_gap(64)
        if i % 31 == 9:
            h.add_free(96)
    path = tmp_path / "anomalies.dmp"
    path.write_bytes(build_minidump(p, h))
    return path


DUMP_FORMATS = [["--format", "table"], ["--format", "jsonl"], ["--format", "csv"], ["--format", "jsonl", "--min-length", "9"]]


@slow
@pytest.mark.parametrize("sample", [m["file"] for m in manifest()])
@pytest.mark.parametrize("fmt", DUMP_FORMATS, ids=lambda f: " ".join(f))
def test_dump_shared_equals_serial(sample, fmt):
    path = SAMPLES / sample
    assert steps(path) >= 8
    serial = run(["dump", str(path), *fmt], 1)
    shared = run(["dump", str(path), *fmt], 2)
    assert serial[0] == 0 and serial[1].count(b"\n") > 30
    assert shared == serial


@slow
@pytest.mark.parametrize("sample", [m["file"] for m in manifest()][::3])
@pytest.mark.parametrize("jobs", [3, 8])
def test_many_processes_equal_serial(sample, jobs):
    """More processes than cores (this machine has two): the same bytes, only sooner where cores allow."""
    path = SAMPLES / sample
    for args in (["dump", str(path), "--format", "jsonl"], ["stats", str(path), "--type", "System.String", "--duplicates", "--top", "0"]):
        serial = run(args, 1)
        assert serial[0] == 0
        assert run(args, jobs) == serial


@slow
@pytest.mark.parametrize("sample", [m["file"] for m in manifest()])
def test_stats_shared_equals_serial(sample):
    path = SAMPLES / sample
    for args in (["stats", str(path), "--type", "System.String", "--format", "json"], ["stats", str(path), "--type", "System.String", "--duplicates", "--top", "0"]):
        serial = run(args, 1)
        assert serial[0] == 0
        assert run(args, 2) == serial
    # the duplicates' entries written to files as the child's windows come in
    args = ["stats", str(path), "--type", "System.String", "--duplicates", "--top", "0"]
    written = {"CLRLAYOUT_LIMITS": SMALL_WINDOWS + ",duplicate_memory=2K"}
    assert run(args, 2, written) == run(args, 1, written) == run(args, 1)


def test_findings_keep_heap_order(tmp_path):
    path = anomalous_dump(tmp_path)
    assert steps(path) >= 8
    for args in (["dump", str(path), "--format", "jsonl"], ["stats", str(path), "--type", "System.String", "--format", "json"]):
        serial = run(args, 1)
        kinds = {line.split(b" at ")[0] for line in serial[2].splitlines()}
        assert {b"clrlayout: warning: bad-method-table", b"clrlayout: warning: string-not-terminated"} <= kinds
        assert run(args, 2) == serial
    assert run(["dump", str(path), "--strict"], 2) == run(["dump", str(path), "--strict"], 1)


def clean_dump_with_stale_tail(tmp_path):
    """A clean synthetic heap of many steps whose segment ends exactly where stale strings begin (the gen0
    tail past alloc_allocated), with a MethodTable first seen in the last step."""
    p = select_profile("coreclr", "x64", "3.1.23")
    h = SynthHeap(p)
    for i in range(600):
        h.add_string(f"live {i} " + "y" * (i % 43))
        if i % 97 == 5:
            h.add_free(96)
    h.add_object()  # the class MethodTable: learned in the last window
    h.add_string("the last live string")
    path = tmp_path / "stale-tail.dmp"
    path.write_bytes(build_minidump(p, h, stale=[f"stale {i}, past the end" for i in range(40)]))
    return path


@slow
def test_clean_heap_gives_no_warning_with_one_or_two_processes(tmp_path):
    """No finding on a clean heap whose segment is followed by stale objects, with --strict, and the same
    bytes on stdout and stderr whatever the number of processes, run after run."""
    path = clean_dump_with_stale_tail(tmp_path)
    assert steps(path) >= 8
    for args in (["dump", str(path), "--format", "jsonl", "--strict"], ["stats", str(path), "--type", "System.String", "--strict"]):
        serial = run(args, 1)
        assert serial[0] == 0 and serial[2] == b"", serial[2]
        for jobs in (2, 2, 2, 4):
            assert run(args, jobs) == serial


CHILD_DIES = """
import os, sys
import clrlayout.parallel.steps as parallel
from clrlayout.cli import main

real = getattr(parallel, WHERE)
done = [0]

def dies(*args):  # the child dies in its third step: walking it, or formatting it (after passing the cursor on)
    if os.getpid() != PARENT:
        done[0] += 1
        if done[0] == 3:
            os._exit(9)
    return real(*args)

PARENT = os.getpid()
setattr(parallel, WHERE, dies)
sys.exit(main(sys.argv[1:]))
"""


@slow
@pytest.mark.parametrize("jobs", [2, 4])
@pytest.mark.parametrize("where", ["_walk", "_render"])
@pytest.mark.parametrize("fmt", ["jsonl", "table"])
def test_child_that_dies_is_replaced(fmt, where, jobs, tmp_path):
    """The parent does the steps the children owed (every child dies at its third step): the output stays
    whole and in order."""
    code = f"WHERE = {where!r}\n" + CHILD_DIES
    path = anomalous_dump(tmp_path)
    args = ["dump", str(path), "--format", fmt]
    assert run(args, jobs, code=code) == run(args, 1)
    sample = SAMPLES / manifest()[0]["file"]
    args = ["stats", str(sample), "--type", "System.String", "--duplicates"]
    assert run(args, jobs, code=code) == run(args, 1)


WRONG_GUESSES = """
import sys
from clrlayout.heap.fastwalk import FastWalker
from clrlayout.cli import main

real = FastWalker.guess
calls = [0]

def guess(self, seg, lo):  # of every three guesses: one off by a word, one none, one right
    calls[0] += 1
    right = real(self, seg, lo)
    if calls[0] % 3 == 0 and right is not None:
        return right + self.profile.pointer_size
    return None if calls[0] % 3 == 1 else right

FastWalker.guess = guess
sys.exit(main(sys.argv[1:]))
"""


@slow
@pytest.mark.parametrize("jobs", [2, 4])
@pytest.mark.parametrize("fmt", ["jsonl", "table"])
def test_wrong_guesses_are_walked_again(fmt, jobs, tmp_path):
    """A window walked from a wrong guess (or with none) is not taken: the parent walks it again from the
    real cursor, so the output is still the serial one."""
    path = anomalous_dump(tmp_path)
    args = ["dump", str(path), "--format", fmt]
    assert run(args, jobs, code=WRONG_GUESSES) == run(args, 1)
    sample = SAMPLES / manifest()[1]["file"]
    for args in (["dump", str(sample), "--format", fmt], ["stats", str(sample), "--type", "System.String", "--format", "json"]):
        assert run(args, jobs, code=WRONG_GUESSES) == run(args, 1)


@slow
@pytest.mark.parametrize("sample", [m["file"] for m in manifest()])
def test_guesses_on_real_heaps(sample):
    """Where a window's walk is guessed to start is nearly always where the real walk enters it (a guess
    that is wrong costs a second walk, not exactness); the plan lists every window the real walk enters."""
    os.environ["CLRLAYOUT_LIMITS"] = SMALL_WINDOWS
    try:
        with open_session(str(SAMPLES / sample), limits=limits_from_env()) as a:
            s = a.heap_steps()
            entered = {}
            cursor = s.first()
            while cursor is not None:
                entered.setdefault(s.key(cursor), cursor)
                _, cursor = s.run(cursor)
            plan = list(s.plan())
            right = sum(s.guess(key) == cursor for key, cursor in entered.items())
    finally:
        del os.environ["CLRLAYOUT_LIMITS"]
    assert plan == sorted(set(plan)) and set(entered) <= set(plan)
    assert len(entered) >= 60 and right >= 0.95 * len(entered)


BLIND_CHILD = """
import os
import sys
import clrlayout.parallel.steps as parallel
from clrlayout.cli import main

real = parallel._child


class Blind:  # the child sees every window as unclaimed: both processes walk the same windows
    def __init__(self, claims):
        self.claims = claims

    def __getitem__(self, i):
        return parallel._FREE

    def __setitem__(self, i, v):
        self.claims[i] = v
        with open(os.environ["BLIND_LOG"], "a") as f:  # the test checks that the child took part
            f.write(f"{i} ")


parallel._child = lambda analysis, steps, render, channel, plan, claims, who: real(
    analysis, steps, render, channel, plan, Blind(claims), who)
sys.exit(main(sys.argv[1:]))
"""


@slow
@pytest.mark.parametrize("jobs", [2, 3])
@pytest.mark.parametrize("fmt", ["jsonl", "table"])
def test_windows_walked_twice_are_taken_once(fmt, jobs, tmp_path):
    """When several processes claim the same window (a race on the claim table), one result is taken and
    the others dropped: the output is still the serial one."""
    path = anomalous_dump(tmp_path)
    log = tmp_path / "claims"
    for args in (["dump", str(path), "--format", fmt], ["stats", str(path), "--type", "System.String", "--format", "json"]):
        log.write_text("")
        assert run(args, jobs, {"BLIND_LOG": str(log)}, code=BLIND_CHILD) == run(args, 1)
        claimed = sorted(set(map(int, log.read_text().split())))
        # the child claimed windows in order (as many as it could before the parent was done), and did
        # not fail at its first claim
        assert 2 <= len(claimed) <= windows(path) and claimed == list(range(len(claimed)))


@slow
@pytest.mark.parametrize("sample", [m["file"] for m in manifest()][:2])
def test_progress_counts_the_heap_once(sample):
    """The progress bar's bytes: each window's walk is counted once, whichever process walked it, so two
    processes report what one does."""
    from clrlayout import parallel

    os.environ["CLRLAYOUT_LIMITS"] = SMALL_WINDOWS
    try:
        totals = []
        for share in (1, 2, 4):
            with open_session(str(SAMPLES / sample), limits=limits_from_env()) as a:
                seen = []
                parallel.run_steps(a, lambda win: parallel.StepOutput(count=len(win.offsets)), share=share,
                                   progress=seen.append)
                totals.append((sum(seen), len(seen)))
                heap = sum(seg.size for seg in a.heap.segments)
    finally:
        del os.environ["CLRLAYOUT_LIMITS"]
    assert totals[0] == totals[1] == totals[2]
    assert 0.9 * heap <= totals[0][0] <= heap and totals[0][1] >= 8


BAR = """
import sys
import clrlayout.present.progress as progress
from clrlayout.cli import main

progress.PROGRESS_DELAY = 0
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.parametrize("fmt, tty, rows_on_tty, extra, shown", [
    ("table", True, False, [], True), ("jsonl", True, False, [], False), ("table", False, False, [], False),
    ("table", True, True, [], False), ("table", True, True, ["--limit", "500"], False)])
@slow
def test_progress_bar_only_on_a_terminal_and_for_tables(fmt, tty, rows_on_tty, extra, shown):
    """The bar (bytes, strings, rate) goes to stderr when it is a terminal and the output is a table;
    never with JSON Lines, never into a pipe, and never while the rows go to the same terminal (a row
    would be glued to the bar)."""
    sample = SAMPLES / manifest()[0]["file"]
    master, slave = os.openpty() if tty else os.pipe()  # (reader, writer)
    try:
        p = subprocess.Popen([sys.executable, "-c", BAR, "dump", str(sample), "--format", fmt, "--jobs", "2",
                              *extra], stdout=slave if rows_on_tty else subprocess.DEVNULL, stderr=slave,
                             env=dict(os.environ, CLRLAYOUT_LIMITS=SMALL_WINDOWS, COLUMNS="120"))
        os.close(slave)
        err = b""
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # a pty's reader gets EIO once the writer has gone
                break
            if not chunk:
                break
            err += chunk
        p.wait(timeout=120)
    finally:
        os.close(master)
    if rows_on_tty:
        assert b"Total" in err  # the rows did reach the terminal
    assert p.returncode == 0
    assert (b"scanning" in err) == shown
    if shown:
        assert b"strings" in err
