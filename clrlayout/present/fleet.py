"""``fleet``'s progress bar (dumps done, errors, rate; on a terminal only) and its summary."""

from __future__ import annotations

import sys


class FleetProgress:
    def __init__(self, enabled: bool = True):
        self.enabled = enabled and sys.stderr.isatty()
        self.errors = 0
        self._bar = None
        self._task = None

    def start(self, total: int) -> None:
        if not self.enabled or not total:
            return
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        self._bar = Progress(TextColumn("dumps"), BarColumn(), MofNCompleteColumn(),
                             TextColumn("{task.fields[errors]:,} errors"),
                             TextColumn("{task.fields[rate]}"), TimeElapsedColumn(), TimeRemainingColumn(),
                             console=Console(stderr=True), transient=True)
        self._bar.start()
        self._task = self._bar.add_task("fleet", total=total, errors=0, rate="")

    def done(self, path: str, result: dict) -> None:
        if result["dump"].get("error_code") is not None:
            self.errors += 1
        if self._bar is not None:
            self._bar.advance(self._task)
            task = self._bar.tasks[0]
            rate = f"{task.completed / task.elapsed:.2f} dumps/s" if task.elapsed else ""
            self._bar.update(self._task, errors=self.errors, rate=rate)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None

    def __enter__(self) -> FleetProgress:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def summary_lines(summary, out: str) -> list[str]:
    """What a run did, where its tables are, and its errors by code."""
    lines = [f"{summary.inputs:,} {'input' if summary.inputs == 1 else 'inputs'}: {summary.analysed:,} analysed, "
             f"{summary.errors:,} {'error' if summary.errors == 1 else 'errors'}, {summary.skipped:,} done before "
             f"(skipped), in {summary.seconds:.1f} s"]
    for code, n in sorted(summary.error_codes.items()):
        lines.append(f"  {code}: {n:,}")
    lines.append(f"tables: {out}/dumps, {out}/types, {out}/memory (Parquet)")
    return lines
