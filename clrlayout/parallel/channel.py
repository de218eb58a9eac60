"""The pipes between the parent and its children: messages of one kind byte, a length and a pickled payload."""

from __future__ import annotations

import os
import pickle
import select
import signal
import struct


class Channel:
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

    def message(self, kinds: bytes) -> tuple[bytes, object] | None:
        """The next message, of one of ``kinds``: (kind, payload or None)."""
        got = self._message(kinds)
        if got is None:
            return None
        return got[0], (pickle.loads(got[1]) if got[1] else None)

    def ready(self) -> bool:
        """Whether a message has begun to come (or the other side has gone)."""
        return self.broken or bool(select.select([self.reader], [], [], 0)[0])

    def _message(self, kinds: bytes) -> tuple[bytes, bytes] | None:
        if self.broken:
            return None
        head = _read_exact(self.reader, 5)
        if head is None or head[:1] not in [kinds[i : i + 1] for i in range(len(kinds))]:
            self.broken = True
            return None
        size = struct.unpack("<I", head[1:])[0]
        body = _read_exact(self.reader, size) if size else b""
        if body is None:
            self.broken = True
            return None
        return head[:1], body

    def close(self) -> None:
        for fd in (self.reader, self.writer):
            try:
                os.close(fd)
            except OSError:
                pass


def reap(pid: int) -> None:
    """Kill a child and wait for it (it may be gone already)."""
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
