"""Where the dumps are analysed: a local pool of worker threads, each running one isolated process at a
time (nothing to install or start), or the workers of an existing Dask cluster (``dask.distributed``,
imported only then).  Both run :func:`clrlayout.fleet.worker.run_isolated` per dump and yield each result
as it comes; the caller writes the tables, so the output is the same either way."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

from ..errors import ClrLayoutError, ExitCode
from .worker import WorkerLimits, kill_running, run_isolated


class SchedulerError(ClrLayoutError):
    """The Dask scheduler cannot be reached, or Dask is not installed."""

    code = "scheduler"
    exit_code = ExitCode.USAGE


def cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def local(paths: list[str], limits: WorkerLimits, workers: int) -> Iterator[tuple[str, dict]]:
    """(path, rows) of each dump, as they finish, from ``workers`` processes at a time on this machine."""
    from concurrent.futures import ThreadPoolExecutor, as_completed

    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        futures = {pool.submit(run_isolated, path, limits): path for path in paths}
        try:
            for future in as_completed(futures):
                yield futures[future], future.result()
        finally:  # stopped (Ctrl-C, an output error): nothing more starts, and what runs is killed
            for future in futures:
                future.cancel()
            kill_running()


def require_dask() -> None:
    """Dask's distributed scheduler is installed (``--scheduler`` needs it), or a usage error saying how."""
    import importlib.util

    if importlib.util.find_spec("distributed") is None:
        raise SchedulerError("--scheduler needs Dask's distributed scheduler: pip install 'clrlayout[fleet]'")


def dask(paths: list[str], limits: WorkerLimits, scheduler: str) -> Iterator[tuple[str, dict]]:
    """(path, rows) of each dump, as they finish, from the workers of the Dask cluster at ``scheduler``
    (they need clrlayout installed, and the dumps at the same paths).  A task whose worker was lost is the
    dump's error row."""
    require_dask()
    from distributed import Client, as_completed

    try:
        client = Client(scheduler, timeout="20s")
    except (OSError, TimeoutError, ValueError) as e:
        raise SchedulerError(f"--scheduler {scheduler}: cannot connect to the Dask scheduler: {e}") from None
    try:
        run = uuid.uuid4().hex  # this run's task names: another client's tasks are never taken for ours
        futures = client.map(run_isolated, paths, limits=limits, pure=False, retries=0,
                             key=[f"clrlayout-fleet-{run}-{i}" for i in range(len(paths))])
        index = {f.key: path for f, path in zip(futures, paths)}
        for future in as_completed(futures):
            path = index[future.key]
            if future.status == "finished":
                yield path, future.result()
            else:
                error = future.exception()
                yield path, {"dump": {"error_code": "worker-lost", "exit_code": None, "warnings": [],
                                      "error": f"the Dask task failed: {type(error).__name__}: {error}"},
                             "types": [], "memory": []}
            future.release()
    finally:
        client.close()
