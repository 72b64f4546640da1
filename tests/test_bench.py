"""A small suite end to end through the CLI: parallel, resumable, leaderboard printed."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from runner.bench import CpuPool
from runner.config import REPO_ROOT
from runner.records import load_records

pytestmark = pytest.mark.sandbox


def tmlbench(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "runner.cli", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        cwd=REPO_ROOT,
    )


@pytest.fixture
def cli_env(tmp_path: Path) -> dict[str, str]:
    suites = tmp_path / "suites"
    suites.mkdir()
    suite = {
        "id": "mini",
        "title": "mini suite",
        "tasks": ["bank-customer-churn-ict-u-ai", "playground-series-s6e1"],
        "agents": ["baseline-constant", "baseline-linear"],
        "budgets": [30, 60],
        "attempts": 2,
        "twin_rows": 400,
        "data_subdir": "mini",
        "runs_subdir": "mini",
    }
    (suites / "mini.yaml").write_text(yaml.safe_dump(suite))
    return {
        **os.environ,
        "TMLBENCH_SUITES_DIR": str(suites),
        "TMLBENCH_DATA_DIR": str(tmp_path / "data"),
        "TMLBENCH_RUNS_DIR": str(tmp_path / "runs"),
        "COLUMNS": "200",
    }


def test_bench_runs_a_suite_resumes_and_prints_the_leaderboard(cli_env, tmp_path):
    first = tmlbench(cli_env, "bench", "--suite", "mini")
    assert first.returncode == 0, first.stdout + first.stderr
    records = load_records(tmp_path / "runs" / "mini")
    assert len(records) == 2 * 2 * 2 * 2
    assert {r.status for r in records} == {"success"}
    assert {r.cpuset for r in records} <= {str(c) for c in os.sched_getaffinity(0)}
    assert "baseline-linear" in first.stdout and "leaderboard" in first.stdout

    second = tmlbench(cli_env, "bench", "--suite", "mini")
    assert second.returncode == 0, second.stderr
    again = load_records(tmp_path / "runs" / "mini")
    assert sorted(r.run_id for r in again) == sorted(r.run_id for r in records)
    assert [r.created_at for r in sorted(again, key=lambda r: r.run_id)] == [
        r.created_at for r in sorted(records, key=lambda r: r.run_id)
    ]

    board = tmlbench(cli_env, "leaderboard", "--suite", "mini", "--min-successes", "2")
    assert board.returncode == 0, board.stderr
    lines = [line for line in board.stdout.splitlines() if "baseline-linear" in line]
    assert lines and " 1 " in lines[0]  # linear outranks the constant floor


def test_unknown_suite_and_task_errors_say_what_exists(cli_env):
    result = tmlbench(cli_env, "bench", "--suite", "nope")
    assert (
        result.returncode == 2
        and "unknown suite 'nope'" in result.stdout
        and "mini" in result.stdout
    )
    result = tmlbench(cli_env, "tasks", "prepare", "no-such-task")
    assert result.returncode == 2 and "bank-customer-churn-ict-u-ai" in result.stdout


def test_cpu_pool_hands_out_disjoint_cpus():
    pool = CpuPool([0, 1, 2])
    with pool.take(2) as first, pool.take(1) as second:
        assert set(first.split(",")).isdisjoint(second.split(","))


def test_prepare_by_scale_and_list_show_the_prepared_twin(cli_env, tmp_path):
    result = tmlbench(cli_env, "tasks", "prepare", "playground-series-s6e1", "--scale", "0.001")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "504 train / 126 test" in result.stdout  # 0.1 % of 630,000 rows, split 80/20
    listing = tmlbench(cli_env, "tasks", "list")
    assert "504 train / 126 test, bayes" in listing.stdout
    both = tmlbench(
        cli_env, "tasks", "prepare", "playground-series-s6e1", "--scale", "0.1", "--rows", "99"
    )
    assert both.returncode == 2 and "not both" in both.stdout
