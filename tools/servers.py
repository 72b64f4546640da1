"""Starting and stopping real servers in tests and benchmarks: a free loopback port, a clean
process-group stop."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import Any


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def group_members(pgid: int) -> dict[int, str]:
    """The processes of group ``pgid`` that have not exited, as ``{pid: "state command"}``.

    Zombies are left out: they have exited and hold nothing but a pid. A member orphaned
    by the group's leader is reaped by pid 1, which here polls for that (1-2 s measured on
    an idle machine, more under load), so ``killpg(pgid, 0)`` would see the group
    "alive" long after everything in it died.
    """
    members: dict[int, str] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            stat = Path(f"/proc/{name}/stat").read_text()
        except OSError:  # exited while we looked
            continue
        command, after = stat[stat.find("(") + 1 : stat.rfind(")")], stat[stat.rfind(")") + 2 :]
        fields = after.split()
        if int(fields[2]) == pgid and fields[0] not in ("Z", "X"):
            members[int(name)] = f"{fields[0]} {command}"
    return members


def stop(proc: subprocess.Popen[Any], grace: float = 5) -> None:
    """SIGTERM the whole process group, give it ``grace`` seconds, then SIGKILL what is left.

    The server must have been started with ``start_new_session=True`` (its own group).
    """
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    deadline = time.monotonic() + grace  # the leader and its children shut down on their own
    while group_members(proc.pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=5)
    # A SIGKILLed process in an uninterruptible wait (an fsync, say) exits when it returns.
    deadline = time.monotonic() + 10
    while (left := group_members(proc.pid)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not left, f"{proc.args!r}: these members of its group outlived SIGKILL: {left}"
