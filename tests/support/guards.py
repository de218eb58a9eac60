"""What a damaged dump may make a command do: the exit codes it may give, and a guard that fails a hang."""

from __future__ import annotations

import contextlib
import signal

#: exit codes a damaged dump may give (docs/reference.md: exit codes); 70 (a bug) is never allowed
ALLOWED = {0, 1, 3, 4, 5}
#: a hang guard, not a stopwatch: what these dumps take is a fraction of a second even on a busy machine
#: (bench/ and docs/reliability.md hold the timings); only a hang reaches this
HANG_SECONDS = 60


class Hang(Exception):
    pass


@contextlib.contextmanager
def hang_guard(seconds: int = HANG_SECONDS):
    """Fail a command that does not finish in ``seconds`` (POSIX; elsewhere the counts below still guard)."""
    if not hasattr(signal, "setitimer"):
        yield
        return

    def alarm(signum, frame):
        raise Hang(f"no answer in {seconds} s")

    previous = signal.signal(signal.SIGALRM, alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
