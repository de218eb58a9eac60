"""The shared walk: the parent, its children, the claim table, and the windows taken in heap order (the
package's docstring says how)."""

from __future__ import annotations

import mmap
import os
import select
import signal
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .channel import Channel as _Channel
from .channel import reap as _reap

if TYPE_CHECKING:
    from ..session import Session

MIN_HEAP_BYTES = 64 << 20  # heap bytes per process: below this another process costs more than it saves
MAX_JOBS = 64  # processes at most (the claim table holds one byte per window: the process that claimed it)


@dataclass
class StepOutput:
    """What a command makes of one step's window: bytes for stdout (or a list of them), totals, and
    anything else it collects (``extra``, handed to ``absorb`` in heap order)."""

    data: bytes | list = b""
    count: int = 0
    size: int = 0
    aligned: int = 0
    extra: object = None


def can_share(analysis: Session, jobs: int | None, writes: bool = True) -> int:
    """How many processes walk the heap: ``jobs`` if asked for, else by default one per core available
    and per MIN_HEAP_BYTES of heap (1: this process alone).  More than one needs fork, the exact heap walk
    and, for output, a real stdout (not a test's capture)."""
    if jobs is not None and jobs < 2:
        return 1
    if not hasattr(os, "fork") or not analysis.windowed:
        return 1
    if writes:
        try:
            sys.stdout.fileno()
        except (AttributeError, OSError, ValueError):
            return 1
    if jobs is None:
        heap = sum(seg.size for seg in analysis.heap.segments)
        jobs = min(_cores(), heap // MIN_HEAP_BYTES, MAX_JOBS)
    return max(1, min(jobs, MAX_JOBS))


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def write_out(data) -> None:
    """Write ``data`` (bytes, or a list of bytes written one after the other) to stdout.  A write that fails
    for another reason than a reader that went away is an :class:`~clrlayout.errors.OutputError`."""
    if data:
        out = sys.stdout.buffer
        try:
            if isinstance(data, (bytes, bytearray)):
                out.write(data)
            else:
                out.writelines(data)
            out.flush()
        except BrokenPipeError:
            raise
        except OSError as e:
            from ..errors import OutputError

            raise OutputError(f"cannot write the output: {e.strerror or e}") from None


def run_steps(analysis: Session, render: Callable, *, share: int = 1, progress=None,
              on_found: Callable[[int], None] = lambda n: None,
              absorb: Callable[[Any], None] = lambda extra: None) -> tuple[int, int, int]:
    """Every step of the heap walk: ``render(window) -> StepOutput`` (its strings' findings go to
    ``analysis.findings``), its data written to stdout and its extra absorbed, in heap order.  ``share``
    processes do it (1: this one alone).  Returns the totals (count, SOS size, aligned size)."""
    merger = _Merger(analysis, on_found, absorb, progress)
    steps = analysis.heap_steps()
    plan = list(steps.plan()) if share > 1 else []
    children = min(int(share) - 1, len(plan) - 1, MAX_JOBS - 1) if share > 1 else 0
    if children < 1:
        _alone(analysis, steps, render, merger, steps.first())
        return merger.totals()
    claims = mmap.mmap(-1, len(plan))  # shared by the processes: who walks each window
    claims[0] = _PARENT  # the first window is the parent's, walked from the chain's first cursor
    sys.stdout.flush()
    sys.stderr.flush()
    channels: dict[int, _Channel] = {}
    pids = []
    try:
        for k in range(children):
            who = _CHILD + k
            to_child_r, to_child_w = os.pipe()
            to_parent_r, to_parent_w = os.pipe()
            pid = os.fork()
            if pid == 0:  # a child: never returns
                for other in channels.values():  # the parent's ends of the other children's pipes
                    other.close()
                os.close(to_child_w)
                os.close(to_parent_r)
                _child(analysis, steps, render, _Channel(to_child_r, to_parent_w), plan, claims, who)
            pids.append(pid)
            os.close(to_child_r)
            os.close(to_parent_w)
            channels[who] = _Channel(to_parent_r, to_child_w)
        _Parent(analysis, steps, render, merger, channels, plan, claims).run()
    finally:
        for channel in channels.values():
            channel.close()
        for pid in pids:
            _reap(pid)
        claims.close()
    return merger.totals()


# --- the steps ----------------------------------------------------------------------------------------


@dataclass
class _Result:
    """One window walked and rendered: from which cursor, to which (None: the walk is over)."""

    start: tuple | None
    nxt: tuple | None
    out: StepOutput
    items: list
    found: int
    kinds: object  # the step's findings counted by kind
    walked: int  # heap bytes the walk went over
    has_data: bool = False  # the child's: output kept back until the parent's verdict


def _walk(steps, cursor):
    """Walk one step, its findings kept apart: (window or None, findings, next cursor, bytes walked)."""
    from ..findings import Findings

    found = Findings(steps.walker.findings.limit)
    walked = [0]
    saved = steps.walker.progress
    steps.walker.progress = lambda n: walked.__setitem__(0, walked[0] + n)
    try:
        win, nxt = steps.run(cursor, found)
    finally:
        steps.walker.progress = saved
    return win, found, nxt, walked[0]


def _render(analysis: Session, render, win, found) -> StepOutput:
    """Render one step's window; its strings' findings go to ``found`` (after the walk's)."""
    if win is None:
        return StepOutput()
    saved = analysis.findings
    analysis.findings = found
    try:
        return render(win)
    finally:
        analysis.findings = saved


def _step(analysis: Session, steps, render, cursor) -> _Result:
    win, found, nxt, walked = _walk(steps, cursor)
    out = _render(analysis, render, win, found)
    return _Result(cursor, nxt, out, found.items, found.count, found.kinds, walked)


def _speculate(analysis: Session, steps, render, key, after: _Result | None = None) -> _Result | None:
    """Window ``key`` walked from where this process's walk of the window before it (``after``) ended, or
    else from a guess of where the chain enters it (None: no guess)."""
    cursor = after.nxt if after is not None else None
    if cursor is None or steps.key(cursor) != key:
        cursor = steps.guess(key)
    if cursor is None or steps.key(cursor) != key:
        return None
    return _step(analysis, steps, render, cursor)


class _Merger:
    """The parent's totals and findings, merged step by step in heap order."""

    def __init__(self, analysis, on_found, absorb, progress):
        self.findings = analysis.findings
        self.on_found, self.absorb, self.progress = on_found, absorb, progress
        self.sums = [0, 0, 0]

    def add(self, r: _Result) -> None:
        if r.walked and self.progress is not None:
            self.progress(r.walked)
        out = r.out
        self.on_found(out.count)
        for i, v in enumerate((out.count, out.size, out.aligned)):
            self.sums[i] += v
        room = self.findings.limit - len(self.findings.items)
        self.findings.items.extend(r.items[: max(room, 0)])
        self.findings.count += r.found
        self.findings.kinds.update(r.kinds)
        if out.extra is not None:
            self.absorb(out.extra)

    def totals(self) -> tuple[int, int, int]:
        return tuple(self.sums)


def _alone(analysis: Session, steps, render, merger: _Merger, cursor) -> None:
    """The steps from ``cursor`` to the end, in this process."""
    while cursor is not None:
        r = _step(analysis, steps, render, cursor)
        write_out(r.out.data)
        merger.add(r)
        cursor = r.nxt


AHEAD = 3  # windows a process walks ahead of the chain while it waits for the others (bounds memory)
BLOCK = 4  # windows claimed at once: all but the first are walked from where the walk before ended, not a guess
_FREE, _PARENT, _CHILD = 0, 1, 2  # a window's entry in the claim table: the first child's is _CHILD, then up


class _Parent:
    """Follows the real chain over the windows of ``plan``.  A window nobody has claimed when the chain
    gets there, the parent claims and walks from the real cursor.  A window a child claimed comes from that
    child, and one the parent claimed ahead of the chain (while it waited for a child) from there: either
    is taken if it started where the chain enters it, and walked again here if not."""

    def __init__(self, analysis, steps, render, merger: _Merger, channels: dict, plan: list, claims):
        self.analysis, self.steps, self.render, self.merger = analysis, steps, render, merger
        self.channels, self.plan, self.claims = channels, plan, claims
        self.mine: set[int] = {0} if plan else set()  # windows this process claimed
        self.ahead: dict[int, _Result | None] = {}  # own windows walked ahead, by plan index
        self.pending: list[int] = []  # own windows claimed to walk ahead, not walked yet
        self.theirs: dict[tuple[int, int], _Result | None] = {}  # children's results not yet taken: (child, index)
        self.passed = 0  # the chain is past the windows before this plan index
        self.written = dict.fromkeys(channels, 0)  # windows each child has written
        self.next_free = 1  # where to look for a window to claim

    def run(self) -> None:
        plan, idx = self.plan, 0
        cursor = self.steps.first()
        while cursor is not None:
            key = self.steps.key(cursor)
            while idx < len(plan) and plan[idx] < key:  # windows the chain went past
                self._pass(idx)
                idx += 1
            r = None
            if idx < len(plan) and plan[idx] == key:
                r = self._taken(idx, cursor)
                self._pass(idx)
                idx += 1
            if r is None:  # walked here
                r = _step(self.analysis, self.steps, self.render, cursor)
                write_out(r.out.data)
            self.merger.add(r)
            cursor = r.nxt

    def _taken(self, idx: int, cursor) -> _Result | None:
        """Window ``idx``, walked from ``cursor``, if a child or the parent has already walked it so."""
        owner = self.claims[idx]
        if idx not in self.mine and owner in self.channels and not self.channels[owner].broken:
            return self._childs(owner, idx, cursor)
        if idx not in self.mine:  # nobody's yet (or a child's that has gone): walked here
            self._claim(idx)
            return None
        r = self.ahead.pop(idx, None)
        if r is None or r.start != cursor:
            return None
        write_out(r.out.data)
        return r

    def _childs(self, owner: int, idx: int, cursor) -> _Result | None:
        if not self._wait(lambda: (owner, idx) in self.theirs, owner, idx):
            return None  # the child has gone
        r = self.theirs.pop((owner, idx))
        if r is None:
            return None  # it made no guess
        if r.start != cursor:
            self._verdict(owner, r, idx, b"X")
            return None
        if r.has_data:  # the child writes it
            self._verdict(owner, r, idx, b"T")
            written = self.written[owner]
            if not self._wait(lambda: self.written[owner] > written, owner, idx):
                return None  # the child went away before it had written it
        return r

    def _pass(self, idx: int) -> None:
        """The chain is past window ``idx``: what was walked of it and not taken goes."""
        self.passed = idx + 1
        self.ahead.pop(idx, None)
        for key in [k for k in self.theirs if k[1] == idx]:
            self._verdict(key[0], self.theirs.pop(key), idx, b"X")

    def _claim(self, idx: int) -> None:
        self.mine.add(idx)
        self.claims[idx] = _PARENT

    def _wait(self, done: Callable[[], bool], owner: int, idx: int) -> bool:
        """Hear the children until ``done()``, walking unclaimed windows after ``idx`` while none has
        anything to say.  False: the child ``owner`` that ``done`` waits for has gone."""
        while not done():
            if self.channels[owner].broken:
                return False
            ready = self._ready(0)
            if not ready and self._walk_ahead(idx):
                continue
            for who in ready or self._ready(None):
                self._hear(who)
        return True

    def _ready(self, timeout: float | None) -> list[int]:
        """The children with a message begun (or gone), waiting up to ``timeout`` (None: until one has)."""
        live = {c.reader: who for who, c in self.channels.items() if not c.broken}
        if not live:
            return []
        return [live[fd] for fd in select.select(list(live), [], [], timeout)[0]]

    def _hear(self, who: int) -> None:
        """One message of child ``who``: a window walked (R) or a window's output written (S)."""
        channel = self.channels[who]
        got = channel.message(b"RS")
        if got is None:
            return  # gone: what it claimed, the parent walks
        if got[0] == b"S":
            self.written[who] += 1
            return
        j, r = got[1]
        if j < self.passed or j in self.mine or self.claims[j] != who:  # past, walked here, or claimed again
            self._verdict(who, r, j, b"X")
        else:
            self.theirs[(who, j)] = r

    def _walk_ahead(self, idx: int) -> bool:
        """Walk the next window claimed ahead of ``idx``, or claim the next unclaimed ones (BLOCK of them)
        and walk the first, if one is within reach."""
        if len(self.ahead) >= AHEAD:
            return False
        while self.pending and self.pending[0] <= idx:  # the chain got there first
            self.pending.pop(0)
        if not self.pending:
            j = max(self.next_free, idx + 1)
            while j < len(self.plan) and (j in self.mine or self.claims[j] != _FREE):
                j += 1
            self.next_free = j
            if j >= len(self.plan) or j > idx + 4 * AHEAD:
                return False
            self.pending = _claim_block(self.claims, j, _PARENT, len(self.plan))
            self.mine.update(self.pending)
        j = self.pending.pop(0)
        self.ahead[j] = _speculate(self.analysis, self.steps, self.render, self.plan[j], self.ahead.get(j - 1))
        return True

    def _verdict(self, who: int, r: _Result | None, idx: int, kind: bytes) -> None:
        if r is not None and r.has_data:
            self.channels[who].send(kind, idx)


def _child(analysis: Session, steps, render, channel: _Channel, plan: list, claims, who: int) -> None:
    """Claims the next unclaimed windows (BLOCK of them), walks each from a guess or from where its walk
    of the one before ended, and sends the results to the parent, until none is left.  Its output is written when the
    parent gives the turn (T) or dropped (X); between
    windows it takes the verdicts that have come, and waits for one only with AHEAD outputs kept back.
    Never returns."""
    code = 0
    try:
        signal.signal(signal.SIGINT, signal.SIG_DFL)  # Ctrl-C: the parent reports it
        kept: dict[int, bytes] = {}  # outputs sent and not yet judged
        block: list[int] = []  # windows claimed, not walked yet
        last: tuple[int, _Result | None] = (-1, None)  # the window walked last, and its result
        for idx in range(len(plan)):
            if not block or block[0] != idx:
                if claims[idx] != _FREE:
                    continue
                block = _claim_block(claims, idx, who, len(plan))
            block.pop(0)
            r = _speculate(analysis, steps, render, plan[idx], last[1] if last[0] == idx - 1 else None)
            last = (idx, r)
            data = b""
            if r is not None:
                data, r.out.data = r.out.data, b""
                r.has_data = bool(data)
            if not channel.send(b"R", (idx, r)):
                break
            if data:
                kept[idx] = data
            if not _judged(channel, kept, AHEAD):
                break
        _judged(channel, kept, 0)
    except BaseException:  # the parent does what the child could not
        code = 1
    finally:
        os._exit(code)


def _claim_block(claims, idx: int, who: int, end: int) -> list[int]:
    """Claim window ``idx`` (free) and up to BLOCK - 1 free windows right after it, before ``end``."""
    block = [idx]
    claims[idx] = who
    while len(block) < BLOCK and block[-1] + 1 < end and claims[block[-1] + 1] == _FREE:
        block.append(block[-1] + 1)
        claims[block[-1]] = who
    return block


def _judged(channel: _Channel, kept: dict, room: int) -> bool:
    """Take the parent's verdicts on kept outputs: those that have come, and more until fewer than
    ``room`` are kept.  False: the parent has gone."""
    while kept and (len(kept) >= max(room, 1) or channel.ready()):
        got = channel.message(b"TX")
        if got is None:
            return False
        data = kept.pop(got[1], b"")
        if got[0] == b"T":
            write_out(data)
            if not channel.send(b"S", None):
                return False
    return True
