"""One dump, analysed in a process of its own with a time and a memory limit, so that a hostile dump that
hangs or takes all memory costs one error row, never the run (crash pipelines run their stack walkers as
subprocesses for this reason).

:func:`run_isolated` starts ``python -m clrlayout.fleet`` (:func:`main`) for a dump and returns its rows; it runs
where the work is scheduled (a thread of the local pool, or a task on a Dask worker).  The child caps its
own data segment (``RLIMIT_DATA``: the heap and private mappings, not the dump's file pages) and writes two
JSON lines: the dump's SHA-256 (so that a dump that times out still has it), then its rows."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass

from ..model.heap import ROOT_KINDS

#: the output a child may write (its rows as JSON): more is an error, not a huge allocation
MAX_OUTPUT = 256 << 20
#: what a child that ran out of memory where Python could not raise MemoryError writes last (LLVM's, numpy's)
#: the children running now: a run that is stopped (Ctrl-C) kills them (their own sessions do not get the signal)
RUNNING: set = set()
OUT_OF_MEMORY = ("MemoryError", "std::bad_alloc", "Cannot allocate memory")


@dataclass(frozen=True)
class WorkerLimits:
    """What one fleet worker may take: seconds, data-segment bytes; and what it computes (roots, retained)."""

    timeout: float = 600.0  # seconds
    memory: int | None = None  # bytes of data segment; None: this machine's memory / its cores
    roots: tuple = ROOT_KINDS
    retained: bool = True


def default_memory() -> int:
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 4 << 30
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1 << 30, total // max(1, cores))


def run_isolated(path: str, limits: WorkerLimits = WorkerLimits()) -> dict:
    """The rows of the dump at ``path`` (as :func:`clrlayout.fleet.analyse.analyse` gives them), from a child
    process; a child that runs past ``limits.timeout``, dies or writes no answer gives an error row."""
    memory = limits.memory or default_memory()
    command = [sys.executable, "-m", "clrlayout.fleet", path, "--memory", str(memory),
               "--roots", ",".join(limits.roots)] + ([] if limits.retained else ["--no-retained"])
    started = time.monotonic()
    env = {**os.environ, "NUMBA_CPU_NAME": "generic", "PYTHONFAULTHANDLER": "1"}
    proc = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True, env=env)
    RUNNING.add(proc)
    timed_out = False
    try:
        out, err = proc.communicate(timeout=limits.timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        _kill(proc)
        out, err = proc.communicate()
    finally:
        RUNNING.discard(proc)
    lines = [line for line in out[:MAX_OUTPUT].decode("utf-8", "replace").splitlines() if line.startswith("{")]
    parts = []
    for line in lines:
        try:
            parts.append(json.loads(line))
        except ValueError:
            break
    sha = next((p["sha256"] for p in parts if "sha256" in p), None)
    result = next((p for p in parts if "dump" in p), None)
    if result is None or timed_out:
        if timed_out:
            code, message = "timeout", f"the analysis ran past the time limit of {limits.timeout:g} s: stopped"
        elif proc.returncode < 0:
            code = "worker-crashed"
            message = f"the analysis process died of signal {signal.Signals(-proc.returncode).name}"
        else:
            code, message = "worker-crashed", f"the analysis process exited with {proc.returncode} and no answer"
        tail = err[-4096:].decode("utf-8", "replace").strip().splitlines() if not timed_out else []
        if any(sign in line for line in tail for sign in OUT_OF_MEMORY):
            code, message = "memory-limit", f"the analysis went over the memory limit of {memory >> 20:,} MiB"
        elif tail:
            message += f": {tail[-1][:300]}"
        result = {"dump": {"error_code": code, "exit_code": None, "error": message, "warnings": []},
                  "types": [], "memory": []}
    result["dump"]["sha256"] = sha
    result["dump"]["seconds"] = round(time.monotonic() - started, 3)
    return result


def kill_running() -> None:
    for proc in list(RUNNING):
        _kill(proc)


def _kill(proc: subprocess.Popen) -> None:
    try:
        if hasattr(os, "killpg"):
            os.killpg(proc.pid, signal.SIGKILL)  # the child and anything it started
        else:  # Windows: the child alone
            proc.kill()
    except (ProcessLookupError, PermissionError):
        proc.kill()


def _cap_memory(limit: int) -> None:
    try:
        import resource
    except ImportError:  # Windows: no such limit (the time limit still holds)
        return

    for which, value in ((resource.RLIMIT_DATA, limit), (resource.RLIMIT_CORE, 0)):
        try:
            _, hard = resource.getrlimit(which)
            resource.setrlimit(which, (value if hard == resource.RLIM_INFINITY else min(value, hard), hard))
        except (ValueError, OSError):
            pass


def main(argv=None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m clrlayout.fleet")
    parser.add_argument("path")
    parser.add_argument("--memory", type=int, required=True)
    parser.add_argument("--roots", default=",".join(ROOT_KINDS))
    parser.add_argument("--no-retained", action="store_true")
    args = parser.parse_args(argv)
    from .analyse import analyse, sha256_of  # imported first: the limit is for the analysis, not for the imports

    _cap_memory(args.memory)
    roots = tuple(k for k in args.roots.split(",") if k)
    try:
        try:
            sha = sha256_of(args.path)
        except OSError as e:
            print(_error_rows("unreadable", f"{args.path}: cannot read the file: {e.strerror or e}", 3))
            return 0
        print(json.dumps({"sha256": sha}), flush=True)
        result = json.dumps(analyse(args.path, roots, not args.no_retained))
    except MemoryError:
        result = _error_rows("memory-limit", f"the analysis went over the memory limit of {args.memory >> 20:,} MiB")
    except Exception as e:
        used = _data_bytes()
        if used is not None and used > 0.8 * args.memory:
            result = _error_rows("memory-limit", f"the analysis went over the memory limit of {args.memory >> 20:,} "
                                                 f"MiB ({type(e).__name__} at {used >> 20:,} MiB)")
        else:
            result = _error_rows("internal-error", f"a bug in clrlayout: {type(e).__name__}: {e}", 70)
    print(result, flush=True)
    return 0


def _error_rows(code: str, message: str, exit_code: int | None = None) -> str:
    return json.dumps({"dump": {"error_code": code, "exit_code": exit_code, "error": message, "warnings": []},
                       "types": [], "memory": []})


def _data_bytes() -> int | None:
    """This process's data segment now (what RLIMIT_DATA counts), on Linux."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmData:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        pass
    return None


