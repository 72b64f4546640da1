"""Whole attempts in the real bwrap sandbox: baselines succeed, misbehaviour gets the right status."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pandas as pd
import pytest

from runner.attempts.attempt import AttemptPlan
from runner.attempts.records import read_record
from runner.attempts.run_folder import died_mid_attempt
from runner.errors import TmlbenchError
from runner.specs import AgentSpec
from runner.specs.registry import load_agent, load_task
from tests.support.attempts import attempt
from tests.support.prepared_tasks import prepared

pytestmark = pytest.mark.sandbox

TASKS = [
    "bank-customer-churn-ict-u-ai",
    "foot-traffic-wuerzburg-retail-forecasting-2-0",
    "playground-series-s5e10",
    "playground-series-s6e1",
]


@pytest.mark.parametrize("task_id", TASKS)
def test_every_baseline_succeeds_on_every_twin_and_gbm_beats_the_floor(small_paths, task_id):
    scores = {}
    trivial = prepared(small_paths, task_id).trivial_score()
    assert trivial is not None
    for agent_id in ("baseline-constant", "baseline-linear", "baseline-gbm"):
        record = attempt(small_paths, load_agent(small_paths.agents_dir, agent_id), task_id)
        assert record.status == "success", (record.error_message, record.validation_message)
        assert record.trivial_score == trivial  # every record carries its task's floor
        assert record.sandbox_backend == "bwrap" and record.sandbox_isolated
        assert record.local_validation_score is not None
        assert record.wall_seconds < 60
        scores[agent_id] = record.score_hib
        run_dir = small_paths.runs_dir / record.run_id
        assert read_record(run_dir / "record.json") == record
        assert (run_dir / "workspace" / "submission.csv").is_file()
    assert scores["baseline-gbm"] > scores["baseline-constant"]
    assert scores["baseline-linear"] > scores["baseline-constant"]
    # the constant baseline submits the trivial prediction: graded, it scores the floor itself
    assert record.metric_direction in ("maximize", "minimize")
    sign = 1 if record.metric_direction == "maximize" else -1
    assert scores["baseline-constant"] == pytest.approx(sign * trivial, rel=1e-12, abs=1e-12)


def test_a_recorded_attempt_is_not_run_again(small_paths):
    agent = load_agent(small_paths.agents_dir, "baseline-constant")
    first = attempt(small_paths, agent, TASKS[0])
    second = attempt(small_paths, agent, TASKS[0])
    assert first == second


def scripted_agent(
    tmp_path: Path, script: str, agent_id: str = "scripted"
) -> tuple[AgentSpec, Path]:
    code = tmp_path / f"{agent_id}-code"
    code.mkdir()
    (code / "agent.py").write_text(textwrap.dedent(script))
    spec = AgentSpec(
        id=agent_id,
        kind="command",
        title="test agent",
        harness="test",
        command=("{python}", "{agent_dir}/agent.py"),
    )
    return spec, code


def test_agent_that_never_finishes_times_out(small_paths, tmp_path):
    agent, code = scripted_agent(
        tmp_path,
        """
        import os, signal, time
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                while True: time.sleep(1)
            os._exit(0)
        while True: time.sleep(1)
    """,
    )
    record = attempt(small_paths, agent, TASKS[0], budget=2, code_dir=code)
    assert record.status == "timeout"
    assert record.wall_seconds < 2 + 3


@pytest.mark.parametrize(
    ("script", "status", "code"),
    [
        ("import sys; sys.exit(0)", "no_submission", None),
        ("raise SystemExit(3)", "runtime_error", None),
        (
            "import os; os.symlink('sample_submission.csv', 'submission.csv')",
            "invalid_submission",
            "not_regular_file",
        ),
        (
            "open('submission.csv', 'w').write('id,wrong\\n1,2\\n')",
            "invalid_submission",
            "wrong_columns",
        ),
        ("import shutil; shutil.copy('sample_submission.csv', 'submission.csv')", "success", None),
    ],
)
def test_outcomes_map_to_exactly_one_status(small_paths, tmp_path, script, status, code):
    agent, code_dir = scripted_agent(tmp_path, script)
    record = attempt(small_paths, agent, TASKS[0], budget=20, code_dir=code_dir)
    assert record.status == status
    assert record.validation_code == code
    if status == "success":
        assert record.score == pytest.approx(0.5)  # the sample submission is a constant: AUC 0.5


def test_a_local_score_beyond_float64_is_recorded_as_null_with_a_note(small_paths, tmp_path):
    """An agent printing ``local_validation_score: 1e999`` (read as inf) keeps its success, and
    its record stays strict JSON (issue 25)."""
    agent, code_dir = scripted_agent(
        tmp_path,
        """
        import shutil
        shutil.copy("sample_submission.csv", "submission.csv")
        print("local_validation_score: 1e999")
    """,
    )
    record = attempt(small_paths, agent, TASKS[0], budget=20, code_dir=code_dir)
    assert record.status == "success" and record.local_validation_score is None
    assert record.record_notes == [
        "local_validation_score: inf is not a finite number, which JSON cannot hold; "
        "recorded as null"
    ]
    text = (small_paths.runs_dir / record.run_id / "record.json").read_text()
    assert "Infinity" not in text and "NaN" not in text
    assert read_record(small_paths.runs_dir / record.run_id / "record.json") == record


def test_agent_cannot_read_private_answers_or_the_repo(small_paths, tmp_path):
    answers = prepared(small_paths, TASKS[0]).answers_path
    agent, code = scripted_agent(
        tmp_path,
        f"""
        import json, os, shutil
        found = {{}}
        for path in [{str(answers)!r}, {str(small_paths.tasks_dir / "README.md")!r}, "../../private/answers.csv"]:
            try:
                open(path).read(); found[path] = "READ"
            except OSError as exc:
                found[path] = type(exc).__name__
        json.dump(found, open("probe.json", "w"))
        shutil.copy("sample_submission.csv", "submission.csv")
    """,
    )
    record = attempt(small_paths, agent, TASKS[0], budget=20, code_dir=code)
    probe = json.loads(
        (small_paths.runs_dir / record.run_id / "workspace" / "probe.json").read_text()
    )
    assert "READ" not in probe.values(), probe


def test_untrusted_agent_needs_an_explicit_flag_for_the_process_backend(small_paths, tmp_path):
    agent, code = scripted_agent(tmp_path, "pass")
    with pytest.raises(TmlbenchError, match="unsafe-no-isolation"):
        attempt(small_paths, agent, TASKS[0], backend="process", code_dir=code)
    record = attempt(
        small_paths, agent, TASKS[0], backend="process", code_dir=code, allow_unsafe=True
    )
    assert record.sandbox_unsafe and not record.sandbox_isolated


def test_instructions_and_seed_reach_the_agent(small_paths, tmp_path):
    agent, code = scripted_agent(
        tmp_path,
        """
        import json, os
        json.dump({k: v for k, v in os.environ.items()}, open("env.json", "w"))
    """,
    )
    record = attempt(small_paths, agent, TASKS[0], budget=20, code_dir=code)
    workspace = small_paths.runs_dir / record.run_id / "workspace"
    env = json.loads((workspace / "env.json").read_text())
    assert env["TMLBENCH_SEED"] == str(record.seed)
    assert env["TMLBENCH_BUDGET_SECONDS"] == "20"
    assert "20 seconds" in (workspace / "INSTRUCTIONS.md").read_text()
    assert record.instructions_sha256 and record.public_manifest_sha256
    assert not (workspace / "train.csv").exists()  # copied inputs are dropped after grading
    sample = pd.read_csv(workspace / "sample_submission.csv")
    assert len(sample) > 0


def test_leftovers_of_a_dead_harness_become_a_harness_error_record(small_paths):
    agent = load_agent(small_paths.agents_dir, "baseline-constant")
    run_dir = (
        small_paths.runs_dir
        / AttemptPlan(agent, load_task(small_paths.tasks_dir, TASKS[0]), 60, 0).run_id
    )
    (run_dir / "workspace").mkdir(parents=True)
    (run_dir / "workspace" / "submission.csv").write_text("stale")
    (run_dir / "workspace" / "train.csv").write_text("copied input")
    (run_dir / "stdout.log").write_text("stale")
    record = attempt(small_paths, agent, TASKS[0])
    assert record.status == "harness_error" and died_mid_attempt(record)
    assert record.score is None and record.stdout_path == "stdout.log"
    assert (run_dir / "stdout.log").read_text() == "stale"  # kept for diagnosis
    assert (run_dir / "workspace" / "submission.csv").read_text() == "stale"
    assert not (run_dir / "workspace" / "train.csv").exists()  # the bulky copy goes
    assert read_record(run_dir / "record.json") == record
    assert attempt(small_paths, agent, TASKS[0]) == record  # never run again under that id


def test_an_attempt_held_by_another_process_is_not_run_twice(small_paths):
    agent = load_agent(small_paths.agents_dir, "baseline-constant")
    run_dir = (
        small_paths.runs_dir
        / AttemptPlan(agent, load_task(small_paths.tasks_dir, TASKS[0]), 60, 0).run_id
    )
    run_dir.mkdir(parents=True)
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import fcntl, sys, time; f = open(sys.argv[1], 'w'); "
            "fcntl.flock(f, fcntl.LOCK_EX); print('locked', flush=True); time.sleep(60)",
            str(run_dir / ".lock"),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "locked"
        with pytest.raises(TmlbenchError, match="being run by another tmlbench process"):
            attempt(small_paths, agent, TASKS[0])
    finally:
        holder.kill()
        holder.wait()
    assert (
        attempt(small_paths, agent, TASKS[0]).status == "success"
    )  # the lock died with its holder


def test_xgboost_is_importable_inside_the_sandbox(small_paths, tmp_path):
    agent, code = scripted_agent(
        tmp_path,
        """
        import shutil, xgboost
        print("xgboost", xgboost.__version__)
        shutil.copy("sample_submission.csv", "submission.csv")
    """,
    )
    record = attempt(small_paths, agent, TASKS[0], budget=30, code_dir=code)
    assert record.status == "success", (record.error_message, record.exit_code)
