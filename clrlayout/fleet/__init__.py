"""Thousands of dumps into one dataset: :func:`run` analyses every dump of a set of files, directories and
globs, each in a process of its own with a time and memory limit, on this machine or on a Dask cluster, and
writes the Parquet tables ``dumps``, ``types`` and ``memory`` (:mod:`clrlayout.fleet.tables`)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from .worker import WorkerLimits


@dataclass
class FleetSummary:
    inputs: int = 0
    analysed: int = 0
    errors: int = 0
    skipped: int = 0  # done by an earlier run
    seconds: float = 0.0
    error_codes: dict = field(default_factory=dict)

    def as_dict(self) -> dict:
        return {"inputs": self.inputs, "analysed": self.analysed, "errors": self.errors, "skipped": self.skipped,
                "seconds": round(self.seconds, 3), "error_codes": dict(sorted(self.error_codes.items()))}


def run(items, out: str, *, scheduler: str | None = None, workers: int | None = None,
        limits: WorkerLimits | None = None, force: bool = False, on_start: Callable[[int], None] = lambda total: None,
        on_done: Callable[[str, dict], None] = lambda path, result: None) -> FleetSummary:
    """Analyses the dumps of ``items`` into the tables under ``out``; returns what was done.  ``on_start``
    gets the number of dumps to analyse, ``on_done`` each dump's result as it is written; ``limits``: each
    worker's (default :class:`WorkerLimits`)."""
    limits = limits if limits is not None else WorkerLimits()
    from . import engines
    from .inputs import expand
    from .tables import FleetTables, file_identity

    started = time.monotonic()
    if scheduler is not None:
        engines.require_dask()  # before anything is written
    tables = FleetTables(out)
    inputs = expand(items)
    summary = FleetSummary(inputs=len(inputs))

    def record(path: str, result: dict) -> None:
        tables.write(path, result)
        code = result["dump"].get("error_code")
        if code is None:
            summary.analysed += 1
        else:
            summary.errors += 1
            summary.error_codes[code] = summary.error_codes.get(code, 0) + 1
        on_done(path, result)

    todo = [entry for entry in inputs if force or not tables.done(entry.path)]
    summary.skipped = len(inputs) - len(todo)
    on_start(len(todo))
    for entry in [e for e in todo if e.error_code is not None]:
        record(entry.path, {"dump": {"error_code": entry.error_code, "exit_code": 3, "error": entry.error,
                                     "warnings": []}, "types": [], "memory": []})
    # the largest first (a pool's last dumps are then small ones: no worker waits for one long analysis at the end)
    paths = sorted((e.path for e in todo if e.error_code is None), key=lambda p: -(file_identity(p)[0] or 0))
    if paths:
        results = (engines.dask(paths, limits, scheduler) if scheduler is not None
                   else engines.local(paths, limits, workers or engines.cores()))
        for path, result in results:
            record(path, result)
    summary.seconds = time.monotonic() - started
    return summary
