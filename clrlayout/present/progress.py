"""A progress bar on stderr for long scans: bytes scanned, strings found, rate.

Shown only when stderr is a terminal, only for the human formats (never with JSON, JSON Lines or CSV on
stdout), only once a scan has run for PROGRESS_DELAY seconds, and never while the rows it counts go to the
same terminal (a row written under a live bar would be glued to it; the rows themselves show progress).
"""

from __future__ import annotations

import os
import sys
import time

PROGRESS_DELAY = 2.0


def same_terminal(a, b) -> bool:
    """True when the two streams (or file descriptors) are the same terminal device."""
    try:
        fa = a if isinstance(a, int) else a.fileno()
        fb = b if isinstance(b, int) else b.fileno()
        if not (os.isatty(fa) and os.isatty(fb)):
            return False
        sa, sb = os.fstat(fa), os.fstat(fb)
    except (AttributeError, OSError, ValueError):
        return False
    return (sa.st_rdev, sa.st_ino) == (sb.st_rdev, sb.st_ino)


class ScanProgress:
    def __init__(self, total_bytes: int, enabled: bool, rows_to=None):
        """``rows_to``: the stream the scan writes rows to while it runs (None: it prints at the end)."""
        self.total = max(total_bytes, 1)
        self.enabled = enabled and sys.stderr.isatty() and not (rows_to is not None
                                                               and same_terminal(rows_to, sys.stderr))
        self.done = 0
        self.strings = 0
        self.started = time.monotonic()
        self._bar = None
        self._task = None

    def advance(self, nbytes: int) -> None:
        self.done += nbytes
        self._refresh()

    def found(self, count: int) -> None:
        self.strings += count

    def _refresh(self) -> None:
        if not self.enabled:
            return
        if self._bar is None:
            if time.monotonic() - self.started < PROGRESS_DELAY:
                return
            from rich.console import Console
            from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TransferSpeedColumn

            self._bar = Progress(TextColumn("scanning"), BarColumn(), DownloadColumn(), TransferSpeedColumn(),
                                 TextColumn("{task.fields[strings]:,} strings"),
                                 console=Console(stderr=True), transient=True)
            self._bar.start()
            self._task = self._bar.add_task("scan", total=self.total, strings=0)
        self._bar.update(self._task, completed=min(self.done, self.total), strings=self.strings)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None

    def __enter__(self) -> ScanProgress:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
