"""The decisions every backend shares, as pure functions of what was observed.

:class:`Watchdog` says what to do next at time ``t`` (wait, SIGTERM everything, kill
everything); :func:`classify` says which cap, if any, ended an attempt. Neither touches a
process or a clock, so both are tested directly, and the bwrap/process supervisor and the
docker backend cannot drift apart on either.
"""

from __future__ import annotations

import signal
from dataclasses import dataclass, field
from typing import Literal

from runner.attempts.limits import Limit

Action = Literal["wait", "terminate", "kill"]
POLL_SLICE = 0.25  # longest wait while the attempt runs (seconds)
KILL_POLL = 0.02  # how often to look for "everything exited" during the grace period
MEMORY_NEAR_CAP = 0.98  # a SIGKILL with peak memory this close to the cap is the cap's doing


@dataclass(frozen=True)
class Step:
    action: Action
    wait: float = 0.0  # for "wait": seconds until the next decision at the latest


class Watchdog:
    """Deadline → SIGTERM → grace → SIGKILL; over the disk cap or a watched cap → SIGKILL at once.

    Call :meth:`next` whenever something happened or the last ``wait`` ran out. It returns
    "terminate" once (the deadline passed: signal every process), then "wait" steps until
    the grace period is over or everything has exited, then "kill". A disk overrun (the
    fallback poll) goes straight to "kill": a writer over the cap gets no grace; so does a
    broken watched cap (the gateway's spend ceilings: the agent can do nothing more that
    counts).
    """

    def __init__(self, start: float, wall_seconds: float, grace_seconds: float):
        self.deadline = start + wall_seconds
        self.grace = max(0.0, grace_seconds)
        self.kill_at: float | None = None
        self.reason: Literal["timeout", "disk", "watched"] | None = None

    @property
    def timed_out(self) -> bool:
        return self.reason == "timeout"

    def next(
        self,
        now: float,
        *,
        disk_exceeded: bool = False,
        cap_broken: bool = False,
        all_gone: bool = False,
    ) -> Step:
        if self.kill_at is None:
            if now >= self.deadline:
                self.reason, self.kill_at = "timeout", now + self.grace
                return Step("terminate")
            if disk_exceeded:
                self.reason, self.kill_at = "disk", now
                return Step("kill")
            if cap_broken:
                self.reason, self.kill_at = "watched", now
                return Step("kill")
            return Step("wait", min(self.deadline - now, POLL_SLICE))
        if now >= self.kill_at or all_gone:
            return Step("kill")
        return Step("wait", min(self.kill_at - now, KILL_POLL))


@dataclass
class Ended:
    """What a backend observed about a finished attempt, before any judgement."""

    exit_code: int | None  # shell convention: killed by signal N -> 128 + N
    wall_seconds: float
    timed_out: bool = False
    cpu_seconds: float | None = None
    peak_memory_bytes: int | None = None
    memory_limit_bytes: int | None = None
    oom_kills: int = 0  # from the cgroup, or 1 when the engine says the container was OOM-killed
    pids_max_events: int = 0  # forks refused at the pids cap
    notes: list[str] = field(default_factory=list)

    @property
    def failed(self) -> bool:
        return self.exit_code != 0 or self.timed_out


def classify(
    ended: Ended, *, disk_hit: bool, watched: tuple[Limit, str] | None = None
) -> tuple[Limit | None, list[str]]:
    """Which cap ended the attempt (if any), and notes saying what each cap saw.

    ``watched``: a cap kept outside the sandbox that broke during the attempt, and its note
    (:class:`~runner.attempts.limits.WatchedCap`): broken whether the watchdog or the agent itself
    ended the attempt after it, as breaking it means asking past it.

    A cap counts only for an attempt that did not end well: an agent that met its memory or
    pids cap and still finished did not break it. The disk cap is decided by the workspace
    (``disk_hit``); a single file past the cap shows as SIGXFSZ. Memory beats pids when both
    were hit, except after the deadline, when a kill at the end says nothing about memory.
    """
    notes: list[str] = []
    memory_hit = ended.oom_kills > 0 or (
        ended.exit_code == 128 + signal.SIGKILL
        and bool(ended.memory_limit_bytes)
        and (ended.peak_memory_bytes or 0) >= MEMORY_NEAR_CAP * (ended.memory_limit_bytes or 0)
    )
    if memory_hit:
        notes.append(f"memory cap hit ({ended.oom_kills} OOM kill(s))")
    if ended.pids_max_events:
        notes.append(f"pids cap hit {ended.pids_max_events} time(s) (fork refused)")
    if disk_hit:
        return "disk", notes
    if watched is not None:
        return watched[0], [*notes, watched[1]]
    if ended.exit_code == 128 + signal.SIGXFSZ:
        return "disk", [*notes, "a file grew past the disk cap (SIGXFSZ)"]
    if not ended.failed:
        return None, notes
    if memory_hit and not ended.timed_out:
        return "memory", notes
    if ended.pids_max_events:
        return "pids", notes
    return None, notes
