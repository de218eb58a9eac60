"""Two processes walk one heap and share the work, with the serial result byte for byte.

The heap walk is a chain, but it goes window by window (``fastwalk.HeapSteps``): a step walks one window
from a cursor and gives the cursor of the next.  So after the dump is opened the process forks, and the
parent takes the even steps and the child the odd ones.  Each process walks its step, sends the next
cursor to the other at once (so that the other can walk on while this one formats), formats its window,
then waits for its turn to write.  The turn goes back and forth with the steps; the child's turn carries
a summary of its step (string count and sizes, findings, and whatever the command collects), which the
parent merges in heap order.

If the child goes away (it is killed, or it fails), the parent walks and formats the steps the child owed,
then goes on alone, so the output stays whole.  A parent that goes away takes the child with it.
"""

from __future__ import annotations

import os
import pickle
import signal
import struct
import sys
from dataclasses import dataclass
from typing import Callable

MIN_HEAP_BYTES = 64 << 20  # below this a second process costs more than it saves


@dataclass
class StepOutput:
    """What a command makes of one step's window: bytes for stdout, totals, and anything else it collects
    (``extra``, handed to ``absorb`` in heap order)."""

    data: bytes = b""
    count: int = 0
    size: int = 0
    aligned: int = 0
    extra: object = None


def can_share(analysis, jobs: int | None, writes: bool = True) -> bool:
    """Whether to use two processes: asked for (``jobs``), or by default for a big heap on a machine with
    two cores.  Needs fork, the exact heap walk and, for output, a real stdout (not a test's capture)."""
    if jobs is not None and jobs < 2:
        return False
    if not hasattr(os, "fork") or not analysis.windowed:
        return False
    if writes:
        try:
            sys.stdout.fileno()
        except (AttributeError, OSError, ValueError):
            return False
    if jobs is None:
        heap = sum(seg.size for seg in analysis.heap.segments)
        return (os.cpu_count() or 1) >= 2 and heap >= MIN_HEAP_BYTES
    return True


def write_out(data: bytes) -> None:
    if data:
        out = sys.stdout.buffer
        out.write(data)
        out.flush()


def run_steps(analysis, render: Callable, *, share: bool = False, progress=None,
              on_found: Callable[[int], None] = lambda n: None,
              absorb: Callable[[object], None] = lambda extra: None) -> tuple[int, int, int]:
    """Every step of the heap walk: ``render(window) -> StepOutput`` (its strings' findings go to
    ``analysis.findings``), its data written to stdout and its extra absorbed, in heap order.  With
    ``share``, two processes do it.  Returns the totals (count, SOS size, aligned size)."""
    merger = _Merger(analysis, on_found, absorb, progress)
    steps = analysis.heap_steps(progress)
    if not share:
        _alone(analysis, steps, render, merger, steps.first())
        return merger.totals()
    sys.stdout.flush()
    sys.stderr.flush()
    to_child_r, to_child_w = os.pipe()
    to_parent_r, to_parent_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns
        os.close(to_child_w)
        os.close(to_parent_r)
        _child(analysis, steps, render, _Channel(to_child_r, to_parent_w))
    os.close(to_child_r)
    os.close(to_parent_w)
    channel = _Channel(to_parent_r, to_child_w)
    try:
        _parent(analysis, steps, render, merger, channel)
    finally:
        channel.close()
        _reap(pid)
    return merger.totals()


# --- the steps ----------------------------------------------------------------------------------------


def _walk(steps, cursor):
    """Walk one step, its findings kept apart: (window or None, findings, next cursor)."""
    from .findings import Findings

    found = Findings(steps.walker.findings.limit)
    win, nxt = steps.run(cursor, found)
    return win, found, nxt


def _render(analysis, render, win, found) -> StepOutput:
    """Render one step's window; its strings' findings go to ``found`` (after the walk's)."""
    if win is None:
        return StepOutput()
    saved = analysis.findings
    analysis.findings = found
    try:
        return render(win)
    finally:
        analysis.findings = saved


class _Merger:
    """The parent's totals and findings, merged step by step in heap order."""

    def __init__(self, analysis, on_found, absorb, progress):
        self.findings = analysis.findings
        self.on_found, self.absorb, self.progress = on_found, absorb, progress
        self.sums = [0, 0, 0]

    def add(self, out: StepOutput, items: list, found: int, walked: int = 0) -> None:
        """One step's results; ``walked``: the bytes a child's step walked (the parent's own steps report
        theirs to ``progress`` as they go)."""
        if walked and self.progress is not None:
            self.progress(walked)
        self.on_found(out.count)
        for i, v in enumerate((out.count, out.size, out.aligned)):
            self.sums[i] += v
        room = self.findings.limit - len(self.findings.items)
        self.findings.items.extend(items[: max(room, 0)])
        self.findings.count += found
        if out.extra is not None:
            self.absorb(out.extra)

    def totals(self) -> tuple[int, int, int]:
        return tuple(self.sums)


def _alone(analysis, steps, render, merger: _Merger, cursor, one: bool = False) -> None:
    """The steps from ``cursor`` to the end (``one``: only that step) in this process."""
    while cursor is not None:
        win, found, cursor = _walk(steps, cursor)
        out = _render(analysis, render, win, found)
        write_out(out.data)
        merger.add(out, found.items, found.count)
        if one:
            return


def _parent(analysis, steps, render, merger: _Merger, channel: "_Channel") -> None:
    """The even steps; the odd ones come from the child, or are done here if it goes away."""
    cursor = steps.first()
    owed = None  # the cursor of the child's step before this one, until its summary comes
    while cursor is not None:
        win, found, nxt = _walk(steps, cursor)
        channel.send(b"P", nxt)  # the child walks on from there (None: the walk is over)
        out = _render(analysis, render, win, found)
        if owed is not None:
            summary = channel.receive(b"S")
            if summary is None:  # the child went away before writing its step: do it here
                _alone(analysis, steps, render, merger, owed, one=True)
            else:
                merger.add(*summary)
        write_out(out.data)
        merger.add(out, found.items, found.count)
        if channel.broken or nxt is None:
            cursor = nxt
            break
        channel.send(b"T", None)
        owed = nxt
        cursor = channel.receive(b"P")  # where the child's step ended: the parent's next step
        if cursor is None and not channel.broken:  # the walk ended in the child's step
            summary = channel.receive(b"S")
            if summary is not None:
                merger.add(*summary)
                return
        if channel.broken:  # the child went away without writing its step
            cursor = owed
            break
    if channel.broken:
        _alone(analysis, steps, render, merger, cursor)


def _child(analysis, steps, render, channel: "_Channel") -> None:
    """The odd steps: walk, pass the next cursor on, format, wait for the turn, write, report.  Never returns."""
    code = 0
    try:
        signal.signal(signal.SIGINT, signal.SIG_DFL)  # Ctrl-C: the parent reports it
        walked = [0]
        steps.walker.progress = lambda n: walked.__setitem__(0, walked[0] + n)  # the parent draws progress
        while True:
            cursor = channel.receive(b"P")
            if cursor is None:  # the walk is over, or the parent has gone away
                break
            walked[0] = 0
            win, found, nxt = _walk(steps, cursor)
            channel.send(b"P", nxt)
            out = _render(analysis, render, win, found)
            if channel.receive(b"T", expect_payload=False) is None:
                break
            write_out(out.data)
            out.data = b""  # written: the parent needs the rest
            channel.send(b"S", (out, found.items, found.count, walked[0]))
            if nxt is None:
                break
    except BaseException:  # the parent does what the child could not
        code = 1
    finally:
        os._exit(code)


# --- the pipes ----------------------------------------------------------------------------------------


class _Channel:
    """Messages of one kind byte, a length and a pickled payload, over a pair of pipes."""

    def __init__(self, reader: int, writer: int):
        self.reader, self.writer = reader, writer
        self.broken = False

    def send(self, kind: bytes, payload) -> bool:
        if self.broken:
            return False
        body = b"" if payload is None else pickle.dumps(payload, protocol=pickle.HIGHEST_PROTOCOL)
        try:
            _write_all(self.writer, kind + struct.pack("<I", len(body)) + body)
        except OSError:
            self.broken = True
            return False
        return True

    def receive(self, kind: bytes, expect_payload: bool = True):
        """The payload of the next message, which must be of ``kind``; None when the other side has gone
        (then ``broken`` is set) or the payload is empty."""
        if self.broken:
            return None
        head = _read_exact(self.reader, 5)
        if head is None or head[:1] != kind:
            self.broken = True
            return None
        size = struct.unpack("<I", head[1:])[0]
        body = _read_exact(self.reader, size) if size else b""
        if body is None:
            self.broken = True
            return None
        if not size:
            return None if expect_payload else b""
        return pickle.loads(body)

    def close(self) -> None:
        for fd in (self.reader, self.writer):
            try:
                os.close(fd)
            except OSError:
                pass


def _reap(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except OSError:
        pass
    try:
        os.waitpid(pid, 0)
    except OSError:
        pass


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _read_exact(fd: int, n: int) -> bytes | None:
    data = b""
    while len(data) < n:
        try:
            chunk = os.read(fd, n - len(data))
        except InterruptedError:
            continue
        except OSError:
            return None
        if not chunk:
            return None
        data += chunk
    return data
