"""Process escape: outliving the budget, ignoring SIGTERM, leaving the namespaces."""

from __future__ import annotations

import os
import time

import pytest

from runner.config import REPO_ROOT
from tests.support.adversarial_arena import Arena, Outcome

pytestmark = [pytest.mark.sandbox, pytest.mark.timeout(120)]


def heartbeats(out: Outcome) -> dict[str, float]:
    return {
        p.name.removeprefix("heartbeat-"): float(p.read_text() or 0)
        for p in out.workspace.glob("heartbeat-*")
    }


def assert_no_heartbeat_after(out: Outcome, seconds: float = 1.0) -> dict[str, float]:
    """Whatever kept a heartbeat is dead: nothing moves for ``seconds`` after the attempt."""
    first = heartbeats(out)
    time.sleep(seconds)
    assert heartbeats(out) == first, "something in the sandbox is still alive"
    return first


# exclusive: the kill is asserted within 2 s of the budget, which a busy neighbour could take
@pytest.mark.exclusive
def test_ignoring_sigterm_gets_the_whole_attempt_killed_within_two_seconds(arena: Arena):
    budget = 3
    out = arena.run("sigterm.py", budget=budget)
    record = out.record
    assert record.status == "timeout"
    assert record.wall_seconds <= budget + 2
    assert not arena.survivors()  # already gone when run_attempt returns
    beats = assert_no_heartbeat_after(out)
    assert set(beats) == {"main", "child"}, "the agent did not get going"
    # SIGTERM came, was ignored, and the kill followed within 2 s of the deadline.
    # created_at is earlier than the sandbox's start, so this bound is on the safe side.
    deadline = record.created_at.timestamp() + budget
    termed = {p.name: float(p.read_text().split()[1]) for p in out.workspace.glob("sigterm-*")}
    assert set(termed) == {"sigterm-main", "sigterm-child"}
    assert all(deadline - 0.5 <= t <= deadline + 2 for t in termed.values()), (termed, deadline)
    assert all(t <= deadline + 2 for t in beats.values()), (beats, deadline)
    assert all(t >= deadline - 0.5 for t in beats.values()), "it died before the deadline"
    arena.assert_host_unchanged()


def test_daemons_do_not_outlive_the_attempt(arena: Arena):
    out = arena.run("daemon.py", budget=30)
    assert out.report()["daemons_alive"] == ["a", "b"]
    assert out.record.status == "success"
    assert out.record.score == pytest.approx(0.5)
    # The harness did not wait for the daemons until the budget ran out ...
    assert out.record.wall_seconds < 10
    # ... and they are gone: no process with the marker (one re-executed with an empty
    # environment, but its argv still carries it) and no heartbeat moves any more.
    assert not arena.survivors()
    beats = assert_no_heartbeat_after(out)
    assert set(beats) == {"a", "b"}
    assert all(t <= out.returned for t in beats.values())
    arena.assert_host_unchanged()


def test_namespaces_and_privileges_cannot_be_escaped(arena: Arena):
    out = arena.run("escape.py", "--harness-pid", str(os.getpid()), budget=20)
    report = out.report()
    tries = report["tries"]
    granted = {k: v for k, v in tries.items() if v == "ok"}
    assert not granted, f"allowed inside the sandbox: {granted}"
    assert tries["signal_harness"].startswith("ProcessLookupError")  # not even visible
    assert tries["cgroupfs_visible"] in ("FileNotFoundError", "empty")  # bwrap, docker
    # It could read kernel.core_pattern, so the refused write was a real test (it writes the
    # current value back: a hole would show without changing the host).
    assert report["sysctl_read"]["kernel/core_pattern"] == "ok"
    assert os.getpid() not in report["visible_pids"]
    hosty = [str(REPO_ROOT), str(arena.paths.runs_dir), str(arena.paths.data_dir)]
    leaks = {pid: cmd for pid, cmd in report["cmdlines"].items() if any(h in cmd for h in hosty)}
    assert not leaks, f"host paths in visible command lines: {leaks}"
    assert out.record.status == "no_submission"
    arena.assert_host_unchanged()
