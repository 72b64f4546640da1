"""Starting and stopping real servers in tests and benchmarks: a free loopback port, a clean
process-group stop."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
from typing import Any


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


def stop(proc: subprocess.Popen[Any], grace: float = 5) -> None:
    """SIGTERM the whole process group, give it ``grace`` seconds, then SIGKILL what is left.

    The server must have been started with ``start_new_session=True`` (its own group).
    """
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=10)
    deadline = time.monotonic() + grace  # children (e.g. a code server) shut down on their own
    while group_alive(proc.pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=5)
    deadline = time.monotonic() + 2  # SIGKILLed members still need reaping
    while group_alive(proc.pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not group_alive(proc.pid), f"{proc.args!r}: process group survived SIGKILL"
