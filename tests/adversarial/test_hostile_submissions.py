"""Hostile submissions: the grader reads them outside the sandbox, as data, never following."""

from __future__ import annotations

import time

import pytest

from runner.attempts.attempt import AttemptContext, AttemptPlan, run_attempt
from runner.specs.registry import load_task, task_spec_sha256
from tests.support.adversarial_arena import AGENTS, DISK_CAP, MIB, Arena, Outcome, tree_bytes
from tests.support.prepared_tasks import prepared

pytestmark = [pytest.mark.sandbox, pytest.mark.timeout(120)]


@pytest.mark.parametrize(
    ("mode", "created", "code"),
    [
        ("symlink-device", "symlink", "not_regular_file"),
        ("fifo", "fifo", "not_regular_file"),
        ("device", "symlink", "not_regular_file"),  # mknod is refused; the fallback is a link
        ("directory", "dir", "not_regular_file"),
        ("huge", "file", "too_large"),
        ("binary", "file", "unreadable_csv"),
    ],
)
def test_hostile_submission_is_invalid_with_a_reason(arena: Arena, mode, created, code):
    out = arena.run("submit.py", mode, *arena.targets(), budget=20)
    report = out.report()
    assert report["created"] == created, report
    record = out.record
    assert record.status == "invalid_submission", (record.status, record.error_message)
    assert record.validation_code == code, record.validation_message
    assert record.score is None and record.submission_path == "workspace/submission.csv"
    assert out.returned - out.started < 10  # the grader never blocked on it
    if mode == "device":
        assert report["tries"]["mknod"].startswith("PermissionError"), report
        assert report["tries"]["hardlink_dev_zero"] != "ok", report
    if mode == "huge":
        for how in ("truncate_5GiB", "seek_write_5GiB", "fallocate_5GiB"):
            assert report["tries"][how] == "OSError:27", report  # EFBIG: the file size cap
        assert report["size_written"] <= DISK_CAP
        assert "MiB" in record.validation_message or "bytes" in record.validation_message
        # Sparse: nothing big landed on the host's disk.
        assert tree_bytes(out.workspace) < 16 * MIB
    arena.assert_host_unchanged()


REGRESSION_TASK = "playground-series-s6e1"  # RMSE on exam_score (tens)


def run_on_task(arena: Arena, task_id: str, *args: str, budget: int = 20) -> Outcome:
    """``agents/submit.py`` as a benchmarked attempt on ``task_id`` (the arena's is binary)."""
    base = arena.agent("submit.py")
    agent = base.model_copy(update={"command": (*base.command, *args, "--marker", arena.marker)})
    ctx = AttemptContext(
        prepared=prepared(arena.paths, task_id),
        runs_dir=arena.paths.runs_dir,
        sandbox=arena.sandbox,
        agent_code_dir=AGENTS,
        task_spec_sha256=task_spec_sha256(arena.paths.tasks_dir, task_id),
    )
    started = time.time()
    record = run_attempt(
        AttemptPlan(agent, load_task(arena.paths.tasks_dir, task_id), budget, 0), ctx
    )
    return Outcome(record, arena.paths.runs_dir / record.run_id, started, time.time())


@pytest.mark.parametrize(
    ("mode", "value", "shown"),
    [
        ("overflow-one", "1e160", "1e+160"),
        ("overflow-one", "1e308", "1e+308"),
        ("overflow-one", "-1e308", "-1e+308"),
        # 1.2e154² = 1.44e308 is finite; the sum of the squares over the rows is not
        ("overflow-all", "1.2e154", "1.2e+154"),
    ],
)
def test_predictions_that_overflow_the_metric_are_the_agents_invalid_submission(
    arena: Arena, mode, value, shown
):
    out = run_on_task(arena, REGRESSION_TASK, mode, f"--value={value}")
    assert out.report()["tries"] == {"overflow": "ok"}
    record = out.record
    assert record.status == "invalid_submission", (record.status, record.error_message)
    assert record.validation_code == "non_finite_score", record.validation_message
    assert "Metric 'rmse' gives inf" in record.validation_message
    assert f"predictions as large as {shown}" in record.validation_message
    assert record.score is None
    arena.assert_host_unchanged()


def test_one_huge_prediction_whose_rmse_stays_finite_is_scored(arena: Arena):
    out = run_on_task(arena, REGRESSION_TASK, "overflow-one", "--value=1.2e154")
    record = out.record
    assert record.status == "success", (record.status, record.validation_message)
    assert 1e150 < record.score < 1.2e154 and record.score_hib == -record.score
