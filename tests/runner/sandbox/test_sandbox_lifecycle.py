"""The deadline and the cap classifier, as pure decisions: no process, no clock."""

from __future__ import annotations

import signal

import pytest

from runner.sandbox.lifecycle import KILL_POLL, POLL_SLICE, Ended, Watchdog, classify

KILLED = 128 + signal.SIGKILL
GIB = 1024**3


# -- the watchdog -------------------------------------------------------------------------


def test_waits_in_slices_until_the_deadline():
    dog = Watchdog(start=100.0, wall_seconds=10, grace_seconds=1)
    step = dog.next(100.0)
    assert step.action == "wait" and step.wait == POLL_SLICE
    assert dog.next(109.9).wait == pytest.approx(0.1)  # never sleeps past the deadline
    assert dog.reason is None and not dog.timed_out


def test_deadline_terminates_once_then_kills_after_the_grace_period():
    dog = Watchdog(start=0.0, wall_seconds=5, grace_seconds=1)
    assert dog.next(5.0).action == "terminate"
    assert dog.timed_out
    step = dog.next(5.5)
    assert step.action == "wait" and step.wait == KILL_POLL  # looks for "all exited" often
    assert dog.next(5.99).wait == pytest.approx(0.01)
    assert dog.next(6.0).action == "kill"


def test_everything_exiting_during_the_grace_period_ends_it_early():
    dog = Watchdog(start=0.0, wall_seconds=1, grace_seconds=10)
    assert dog.next(1.0).action == "terminate"
    assert dog.next(1.1, all_gone=False).action == "wait"
    assert dog.next(1.2, all_gone=True).action == "kill"


def test_a_disk_overrun_is_killed_at_once_without_grace():
    dog = Watchdog(start=0.0, wall_seconds=60, grace_seconds=5)
    assert dog.next(3.0, disk_exceeded=True).action == "kill"
    assert dog.reason == "disk" and not dog.timed_out


def test_the_deadline_wins_over_a_disk_overrun_seen_at_the_same_time():
    dog = Watchdog(start=0.0, wall_seconds=2, grace_seconds=0)
    assert dog.next(2.0, disk_exceeded=True).action == "terminate"
    assert dog.timed_out
    assert dog.next(2.0).action == "kill"  # zero grace


def test_a_broken_watched_cap_is_killed_at_once_without_grace():
    dog = Watchdog(start=0.0, wall_seconds=60, grace_seconds=5)
    assert dog.next(1.0).action == "wait"
    assert dog.next(2.0, cap_broken=True).action == "kill"
    assert dog.reason == "watched" and not dog.timed_out


def test_negative_grace_is_no_grace():
    dog = Watchdog(start=0.0, wall_seconds=1, grace_seconds=-3)
    dog.next(1.0)
    assert dog.next(1.0).action == "kill"


# -- the classifier -----------------------------------------------------------------------


def ended(**kw) -> Ended:
    base = {"exit_code": 0, "wall_seconds": 1.0, "memory_limit_bytes": GIB}
    return Ended(**{**base, **kw})


def test_a_clean_exit_breaks_no_cap_even_after_meeting_one():
    limit, notes = classify(ended(oom_kills=1, pids_max_events=3), disk_hit=False)
    assert limit is None
    assert any("memory cap hit" in n for n in notes)
    assert any("pids cap hit 3" in n for n in notes)


def test_an_oom_kill_of_a_failed_attempt_is_the_memory_cap():
    assert classify(ended(exit_code=KILLED, oom_kills=1), disk_hit=False)[0] == "memory"


def test_a_sigkill_at_the_memory_ceiling_is_the_memory_cap_without_an_oom_count():
    at_cap = ended(exit_code=KILLED, peak_memory_bytes=int(0.99 * GIB))
    assert classify(at_cap, disk_hit=False)[0] == "memory"
    well_below = ended(exit_code=KILLED, peak_memory_bytes=GIB // 2)
    assert classify(well_below, disk_hit=False)[0] is None


def test_memory_says_nothing_after_the_deadline_but_pids_still_does():
    late = ended(exit_code=KILLED, timed_out=True, oom_kills=2)
    assert classify(late, disk_hit=False)[0] is None
    forks = ended(exit_code=KILLED, timed_out=True, oom_kills=2, pids_max_events=1)
    assert classify(forks, disk_hit=False)[0] == "pids"


def test_memory_beats_pids_when_both_ended_it():
    both = ended(exit_code=1, oom_kills=1, pids_max_events=4)
    assert classify(both, disk_hit=False)[0] == "memory"


def test_the_workspace_decides_disk_and_sigxfsz_is_disk_too():
    assert classify(ended(exit_code=1), disk_hit=True)[0] == "disk"
    limit, notes = classify(ended(exit_code=128 + signal.SIGXFSZ), disk_hit=False)
    assert limit == "disk" and any("SIGXFSZ" in n for n in notes)


def test_an_unknown_exit_code_is_not_a_cap():
    assert classify(ended(exit_code=None), disk_hit=False)[0] is None
    assert ended(exit_code=None).failed


def test_a_broken_watched_cap_ended_the_attempt_however_it_exited():
    """Asking past the gateway's spend ceilings breaks them, whether the watchdog killed the
    agent or the agent exited on its own after the refusal (even cleanly); the disk cap, which
    removed the workspace, still comes first."""
    note = "spend cap: the agent's model calls reached gateway.spend.requests (3 model calls)"
    for end in (ended(exit_code=KILLED), ended(exit_code=0), ended(exit_code=1, oom_kills=1)):
        limit, notes = classify(end, disk_hit=False, watched=("spend", note))
        assert limit == "spend" and notes[-1] == note
    assert classify(ended(exit_code=KILLED), disk_hit=True, watched=("spend", note))[0] == "disk"
