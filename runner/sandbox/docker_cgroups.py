"""The cgroup (v1) parent of a docker sandbox container: its totals, and its processes.

Each container sits in its own cgroup parent ``/tmlbench-docker/<name>``, which outlives the
container, so CPU time and peak memory can be read after it is gone; its processes can be
signalled from the host when the engine is too slow to answer.
"""

from __future__ import annotations

import contextlib
import errno
import os
import time
from pathlib import Path

from runner.sandbox.cgroups import v1_mounts

CGROUP_ROOT = "tmlbench-docker"


def cgroup_mounts() -> dict[str, Path]:
    """controller (or name=...) -> mount point of every cgroup v1 hierarchy mounted at its root."""
    return {c: point for c, (point, root) in v1_mounts().items() if root == "/"}


def _cgroup_parent_dirs(name: str) -> list[Path]:
    return sorted({mp / CGROUP_ROOT / name for mp in cgroup_mounts().values()})


def remove_cgroup_parent(name: str) -> list[str]:
    """Remove the container's cgroup parent in every hierarchy; the problems met, if any."""
    problems = []
    for d in _cgroup_parent_dirs(name):
        for attempt in range(40):
            try:
                d.rmdir()
                break
            except FileNotFoundError:
                break
            except OSError as exc:
                if exc.errno not in (errno.EBUSY, errno.ENOTEMPTY) or attempt == 39:
                    problems.append(f"cannot remove cgroup {d}: {exc}")
                    break
                time.sleep(0.025)
    return problems


def read_int(path: Path) -> int | None:
    """The first number in a cgroup file, or None."""
    try:
        return int(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def _cgroup_members(procs: Path | None) -> list[int]:
    try:
        return [int(x) for x in procs.read_text().split()] if procs else []
    except (OSError, ValueError):
        return []


def _ns_pid_and_ppid(pid: int) -> tuple[int | None, int | None]:
    """(pid inside its namespace, parent pid on the host) of a host pid."""
    ns_pid = ppid = None
    with contextlib.suppress(OSError, ValueError, IndexError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("NSpid:"):
                ns_pid = int(line.split()[-1])
            elif line.startswith("PPid:"):
                ppid = int(line.split()[1])
    return ns_pid, ppid


def signal_members(procs: Path | None, sig: int, *, below_main: bool) -> None:
    """Signal the container's processes from the host (we are root on the engine's host).

    ``below_main``: spare docker-init (pid 1) and its child, the agent's main process, which
    ``docker kill`` reaches through docker-init; everything they started gets ``sig`` too,
    as under bwrap, where every process of the attempt gets the SIGTERM.
    """
    members = _cgroup_members(procs)
    init = next((p for p in members if _ns_pid_and_ppid(p)[0] == 1), None)
    for pid in members:
        if below_main and (pid == init or _ns_pid_and_ppid(pid)[1] == init):
            continue
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)


def pids_max_events(path: Path) -> int:
    """How often the pids cap refused a fork (``max`` in pids.events)."""
    try:
        key, _, value = path.read_text().strip().partition(" ")
        return int(value) if key == "max" else 0
    except (OSError, ValueError):
        return 0
