"""Ending an attempt: SIGTERM, then SIGKILL of every process it started.

Through the attempt's cgroups when there are some; else by walking /proc for the launcher's
descendants and signalling its process group.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections import defaultdict
from pathlib import Path

from runner.sandbox import cgroups
from runner.sandbox.launcher import parse_status
from runner.sandbox.output import Output


def _ppid_map() -> dict[int, list[int]]:
    children: dict[int, list[int]] = defaultdict(list)
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            stat = Path(f"/proc/{name}/stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2 :].split()
        with contextlib.suppress(IndexError, ValueError):
            children[int(fields[1])].append(int(name))
    return children


def descendants(pid: int) -> list[int]:
    """Live descendants of ``pid`` (host view), found by walking /proc."""
    children = _ppid_map()
    out: list[int] = []
    stack = [pid]
    while stack:
        for child in children.get(stack.pop(), []):
            out.append(child)
            stack.append(child)
    return out


def _kill(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, sig)


def _killpg(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def _is_ns_init(pid: int) -> bool:
    """Is ``pid`` still a pid-namespace init (pid 1 inside), i.e. not a reused pid?"""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    for line in status.splitlines():
        if line.startswith("NSpid:"):
            ids = line.split()[1:]
            return len(ids) > 1 and ids[-1] == "1"
    return False


class Reaper:
    """Signals every process of the attempt: through its cgroups, or found in /proc without.

    Under bwrap, bwrap itself and its pid-namespace init are spared the SIGTERM (they pass
    it on to nobody and must stay to reap); the kill takes the whole namespace.
    """

    def __init__(
        self,
        proc: subprocess.Popen[bytes],
        cg: cgroups.AttemptCgroups | None,
        output: Output,
        bwrap: bool,
    ):
        self.proc, self.cg, self.output, self.bwrap = proc, cg, output, bwrap
        self.notes: list[str] = []

    def _bwrap_child(self) -> int | None:
        return parse_status(bytes(self.output.status)).child_pid

    def all_gone(self) -> bool:
        return self.cg.empty() if self.cg is not None else False

    def terminate(self) -> None:
        spare = {self.proc.pid, self._bwrap_child()} if self.bwrap else set()
        if self.cg is not None:
            self.cg.signal_all(signal.SIGTERM, exclude={p for p in spare if p})
            return
        for pid in descendants(self.proc.pid):
            if pid not in spare:
                _kill(pid, signal.SIGTERM)
        if not self.bwrap:
            _killpg(self.proc.pid, signal.SIGTERM)

    def kill(self) -> None:
        """SIGKILL everything and reap the launcher (never waits unboundedly)."""
        if self.cg is not None:
            if not self.cg.kill_all():
                self.notes.append("some processes survived SIGKILL of the cgroup")
            if self.proc.poll() is None:  # e.g. the deadline came before the launcher joined
                _kill(self.proc.pid, signal.SIGKILL)
        else:
            self._kill_without_cgroups()
        try:
            self.proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            _kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait()

    def _kill_without_cgroups(self) -> None:
        # Under bwrap, killing the pid-namespace init takes the whole namespace with it: if
        # bwrap itself already died, the init was reparented away from us and this is the
        # only way to reach the namespace.
        child = self._bwrap_child()
        if self.bwrap and child and _is_ns_init(child):
            _kill(child, signal.SIGKILL)
        for _ in range(3):
            victims = descendants(self.proc.pid)
            for pid in victims:
                _kill(pid, signal.SIGKILL)
            _killpg(self.proc.pid, signal.SIGKILL)
            _kill(self.proc.pid, signal.SIGKILL)
            if not victims:
                break
            time.sleep(0.01)
