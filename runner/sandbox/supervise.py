"""Run one launched attempt to its end: the process side of the bwrap and process backends.

A backend decides *what* to exec (the agent's command directly, or ``bwrap ... command``);
:func:`supervise` does the rest: per-attempt cgroups, the launcher that joins them before
anything else runs, capped logs read without ever blocking the deadline (:class:`Output`),
the deadline and caps (:class:`~runner.sandbox.lifecycle.Watchdog`), SIGTERM → grace →
SIGKILL of every process (:class:`Reaper`), accounting and cleanup.
"""

from __future__ import annotations

import subprocess
import time

from runner.sandbox import cgroups
from runner.sandbox.base import SandboxLimits, SandboxRequest
from runner.sandbox.launcher import (
    Launch,
    check_launched,
    close_fds,
    exit_code_of,
    memfd,
    start_launcher,
)
from runner.sandbox.lifecycle import Ended, Watchdog
from runner.sandbox.output import Output, truncation_notes
from runner.sandbox.reaper import Reaper
from runner.sandbox.workspace import Workspace

# Launch and memfd are imported from here by the backends (bwrap, process) and benchmarks.
__all__ = ["Launch", "memfd", "supervise"]

DRAIN_SECONDS = 1.0  # after the kill, how long to wait for pipes to reach EOF


def supervise(backend: str, request: SandboxRequest, launch: Launch, workspace: Workspace) -> Ended:
    """Run one launched attempt: cgroups, launch, deadline and caps, kill, account."""
    limits = request.limits
    notes = list(launch.notes)
    try:
        cg = _attempt_cgroups(limits, notes)
    except BaseException:
        close_fds(launch.inherit_fds)  # start_launcher owns them from here on
        raise
    try:
        try:
            output = Output(request)
        except BaseException:
            close_fds(launch.inherit_fds)
            raise
        proc: subprocess.Popen[bytes] | None = None
        try:
            start = time.monotonic()
            proc = start_launcher(backend, request, launch, cg, output)
            reaper = Reaper(proc, cg, output, launch.bwrap)
            workspace.watch(on_exceed=cg.freeze if cg is not None else None)
            dog = Watchdog(start, limits.wall_seconds, limits.grace_seconds)
            while proc.poll() is None:
                step = dog.next(
                    time.monotonic(),
                    disk_exceeded=workspace.exceeded,
                    cap_broken=request.cap_broken(),
                    all_gone=dog.kill_at is not None and reaper.all_gone(),
                )
                if step.action == "kill":
                    break
                if step.action == "terminate":
                    reaper.terminate()
                output.read(step.wait)
            reaper.kill()
            wall = time.monotonic() - start
            if not output.drain(DRAIN_SECONDS):
                notes.append("output pipes still held open by escaped processes; stopped reading")
        finally:
            if proc is not None and proc.returncode is None:  # a fault of ours mid-attempt
                Reaper(proc, cg, output, launch.bwrap).kill()
            output.close()
        notes += reaper.notes + truncation_notes(output.stdout, output.stderr)
        check_launched(backend, request, launch, output, proc, killed=dog.reason is not None)
        ended = Ended(exit_code=exit_code_of(proc.returncode), wall_seconds=wall, notes=notes)
        ended.timed_out = dog.timed_out
        if cg is not None:
            stats = cg.stats()
            ended.cpu_seconds = stats.cpu_seconds
            ended.peak_memory_bytes = stats.peak_memory_bytes
            ended.memory_limit_bytes = stats.memory_limit_bytes
            ended.oom_kills = stats.oom_kills
            ended.pids_max_events = stats.pids_max_events
        return ended
    finally:
        if cg is not None:
            notes += [f"cgroup cleanup: {problem}" for problem in cg.remove()]


def _attempt_cgroups(limits: SandboxLimits, notes: list[str]) -> cgroups.AttemptCgroups | None:
    ok, why = cgroups.available()
    if ok:
        return cgroups.AttemptCgroups.create(
            memory_bytes=limits.memory_bytes, pids=limits.pids, cpuset=limits.cpuset
        )
    notes.append(
        f"cgroups unavailable ({why}): process-group kill only, memory capped per "
        "process with RLIMIT_DATA, no pids/cpuset cap, no cpu/memory accounting"
    )
    return None
