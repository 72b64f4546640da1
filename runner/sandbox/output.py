"""The attempt's output: stdout and stderr into capped logs, and the launcher's status pipe."""

from __future__ import annotations

import contextlib
import os
import select
import time
from pathlib import Path

from runner.errors import HarnessError
from runner.sandbox.base import SandboxRequest


class CappedLog:
    """Keeps the first ``cap`` bytes of a stream in a file and counts the rest."""

    def __init__(self, path: Path, cap: int):
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self.cap = max(0, int(cap))
        self.file = open(path, "wb")  # noqa: SIM115 - closed in close()
        self.written = 0
        self.dropped = 0

    def feed(self, data: bytes) -> None:
        room = self.cap - self.written
        if room > 0:
            chunk = data[:room]
            self.file.write(chunk)
            self.written += len(chunk)
        self.dropped += max(0, len(data) - max(room, 0))

    def close(self) -> None:
        if self.file.closed:
            return
        if self.dropped:
            self.file.write(
                f"\n[tmlbench: log truncated at {self.cap} bytes; "
                f"{self.dropped} more bytes dropped]\n".encode()
            )
        self.file.close()


def truncation_notes(stdout: CappedLog, stderr: CappedLog) -> list[str]:
    """What the log caps dropped, for the result's notes."""
    return [
        f"{stream} truncated at {log.cap} bytes ({log.dropped} bytes dropped)"
        for log, stream in ((stdout, "stdout"), (stderr, "stderr"))
        if log.dropped
    ]


def log_head(path: Path, n: int = 2000) -> str:
    try:
        with open(path, "rb") as f:
            return f.read(n).decode(errors="replace").strip()
    except OSError:
        return ""


class Output:
    """The attempt's stdout and stderr (into capped logs) and the launcher's status pipe.

    Read with ``poll`` and non-blocking descriptors, so no amount of output (or silence) can
    hold up the deadline; the status pipe keeps at most 64 KiB.
    """

    STATUS_CAP = 65536

    def __init__(self, request: SandboxRequest):
        try:
            self.stdout = CappedLog(request.stdout_path, request.log_cap_bytes)
        except OSError as exc:
            raise HarnessError(f"cannot write the attempt's stdout log: {exc}") from exc
        try:
            self.stderr = CappedLog(request.stderr_path, request.log_cap_bytes)
        except OSError as exc:
            self.stdout.close()
            raise HarnessError(f"cannot write the attempt's stderr log: {exc}") from exc
        self.status = bytearray()
        self.sinks: dict[int, CappedLog | None] = {}
        self.poller = select.poll()
        self.pidfd: int | None = None
        self.pipes = [os.pipe() for _ in range(3)]  # stdout, stderr, status (write ends: child)

    def attach(self, pid: int) -> None:
        """The child has its ends: keep only ours, and watch the child's exit (pidfd)."""
        for (r, w), sink in zip(self.pipes, (self.stdout, self.stderr, None), strict=True):
            os.close(w)
            os.set_blocking(r, False)
            self.sinks[r] = sink
            self.poller.register(r, select.POLLIN | select.POLLHUP | select.POLLERR)
        self.pipes = []
        with contextlib.suppress(OSError, AttributeError):
            self.pidfd = os.pidfd_open(pid)
            self.poller.register(self.pidfd, select.POLLIN)

    def read(self, timeout: float) -> None:
        """Wait up to ``timeout`` seconds for output or the child's exit; take what is there."""
        try:
            events = self.poller.poll(max(0, int(timeout * 1000)))
        except InterruptedError:
            return
        for fd, _ev in events:
            if fd != self.pidfd:
                self._take(fd)

    def _take(self, fd: int) -> None:
        for _ in range(16):
            try:
                data = os.read(fd, 65536)
            except BlockingIOError:
                return
            except OSError:
                data = b""
            if not data:
                self.poller.unregister(fd)
                os.close(fd)
                del self.sinks[fd]
                return
            sink = self.sinks[fd]
            if sink is None:
                self.status.extend(data[: self.STATUS_CAP - len(self.status)])
            else:
                sink.feed(data)

    def drain(self, seconds: float) -> bool:
        """After the kill: read to EOF for at most ``seconds``; False if pipes stayed open."""
        if self.pidfd is not None:
            self.poller.unregister(self.pidfd)
            os.close(self.pidfd)
            self.pidfd = None
        end = time.monotonic() + seconds
        while self.sinks:
            left = end - time.monotonic()
            if left <= 0:
                return False
            self.read(min(left, 0.05))
        return True

    def close(self) -> None:
        for r, w in self.pipes:
            os.close(r)
            os.close(w)
        for fd in list(self.sinks):
            with contextlib.suppress(OSError):
                self.poller.unregister(fd)
            os.close(fd)
        self.sinks.clear()
        if self.pidfd is not None:
            os.close(self.pidfd)
        self.stdout.close()
        self.stderr.close()
