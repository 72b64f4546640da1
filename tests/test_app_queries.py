"""The dashboard's query module over a real snapshot built from hand-made records."""

from __future__ import annotations

from pathlib import Path

import pytest

from app import queries
from runner.records import write_record
from tests.records import make_record
from warehouse.db import apply_ddl, connect
from warehouse.loader import load_runs
from warehouse.marts import build_marts
from warehouse.snapshot import publish_snapshot

# (task, direction): alpha wins t1 and t3, beta wins t2; gamma never completes its settings
TASKS = {"t1": "maximize", "t2": "minimize", "t3": "maximize"}
BUDGETS = (60, 600)


def _records():
    records = []
    for agent, edge in (("alpha", 0.1), ("beta", 0.0)):
        for task, direction in TASKS.items():
            for budget in BUDGETS:
                for minute in range(5):
                    base = 0.5 + budget / 10000 + minute / 1000
                    # t2 is an rmse: beta's is lower (better)
                    score = 1.0 - base + 2 * edge if task == "t2" else base + edge
                    records.append(
                        make_record(agent, task, budget, minute, score=score, direction=direction)
                    )
    records.append(make_record("beta", "t1", 60, 7, status="timeout"))
    records.append(make_record("gamma", "t1", 60, 0, score=0.9))
    records.append(make_record("gamma", "t1", 60, 1, status="runtime_error"))
    return records


def build_snapshot(root: Path) -> Path:
    """Write records, load them, build the marts (few bootstrap replicates), publish."""
    runs_dir = root / "runs"
    for record in _records():
        run_dir = runs_dir / record.run_id
        run_dir.mkdir(parents=True)
        write_record(run_dir, record)
    warehouse = root / "warehouse.duckdb"
    con = connect(warehouse)
    try:
        apply_ddl(con)
        report = load_runs(con, runs_dir)
    finally:
        con.close()
    assert not report.rejected, report.rejected
    build_marts(warehouse, dbt_vars={"bootstrap_replicates": 20}, artifacts_dir=root / "dbt")
    snapshot = root / "warehouse.snapshot.duckdb"
    publish_snapshot(warehouse, snapshot)
    return snapshot


@pytest.fixture(scope="session")
def app_snapshot(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_snapshot(tmp_path_factory.mktemp("app-snapshot"))


def test_snapshot_path_env_and_default(tmp_path: Path):
    assert queries.snapshot_path({"TMLBENCH_SNAPSHOT": str(tmp_path / "s.duckdb")}) == (
        tmp_path / "s.duckdb"
    )
    default = queries.snapshot_path({"TMLBENCH_WAREHOUSE": str(tmp_path / "w.duckdb")})
    assert default == tmp_path / "w.snapshot.duckdb"


def test_has_runs(app_snapshot: Path, tmp_path: Path):
    assert queries.has_runs(app_snapshot)
    assert not queries.has_runs(tmp_path / "missing.duckdb")
    (tmp_path / "junk.duckdb").write_text("not a database")
    assert not queries.has_runs(tmp_path / "junk.duckdb")


def test_leaderboard_ranks_covered_agents_with_success_rate(app_snapshot: Path):
    board = queries.leaderboard(app_snapshot, "best_budget")
    assert list(board["agent_id"]) == ["alpha", "beta"]  # gamma is not covered
    assert list(board["rank"]) == [1, 2]
    assert board.loc[0, "score"] == pytest.approx(2 / 3)
    assert board.loc[1, "score"] == pytest.approx(1 / 3)
    rates = board.set_index("agent_id")["success_rate"]
    assert rates["alpha"] == pytest.approx(1.0)
    assert rates["beta"] == pytest.approx(30 / 31)
    assert {"score_low", "score_high", "p_rank_1"} <= set(board.columns)
    for variant in ("all_cells", "largest_budget"):
        other = queries.leaderboard(app_snapshot, variant)
        assert list(other["agent_id"]) == ["alpha", "beta"], variant
        assert "p_rank_1" not in other.columns
    with pytest.raises(ValueError):
        queries.leaderboard(app_snapshot, "nope")


def test_coverage_says_who_is_not_ranked(app_snapshot: Path):
    cov = queries.coverage(app_snapshot).set_index("agent_id")
    assert bool(cov.loc["alpha", "is_ranked"]) and bool(cov.loc["beta", "is_ranked"])
    assert not bool(cov.loc["gamma", "is_ranked"])
    assert cov.loc["gamma", "settings"] == len(TASKS) * len(BUDGETS)
    assert cov.loc["gamma", "missing_successes"] == 4 + 5 * 5


def test_setting_scores_and_success_rates(app_snapshot: Path):
    scores = queries.setting_scores(app_snapshot)
    assert len(scores) == 2 * len(TASKS) * len(BUDGETS) + 1
    row = scores.set_index(["agent_id", "task_id", "budget_seconds"]).loc[("alpha", "t1", 60)]
    assert row["median_score"] == pytest.approx(0.6 + 0.006 + 0.002)
    rates = queries.success_rates(app_snapshot).set_index("agent_id")
    assert rates.loc["beta", "n_timeout"] == 1
    assert rates.loc["gamma", "n_runtime_error"] == 1
    assert rates.loc["gamma", "success_rate"] == pytest.approx(0.5)
    long = queries.status_counts(app_snapshot)
    assert set(long["status"]) == set(queries.STATUSES)
    assert long["attempts"].sum() == rates["attempts"].sum()


def test_rank_stability_task_ranks_and_time_scaling(app_snapshot: Path):
    stab = queries.rank_stability(app_snapshot).set_index("agent_id")
    assert stab.loc["alpha", "mean_rank"] == pytest.approx(4 / 3)
    assert stab.loc["beta", "mean_rank"] == pytest.approx(5 / 3)
    ranks = queries.task_ranks(app_snapshot).set_index(["agent_id", "task_id"])["rank"]
    assert ranks[("alpha", "t1")] == 1 and ranks[("beta", "t2")] == 1
    scaling = queries.time_scaling(app_snapshot)
    assert set(scaling["budget_seconds"]) == set(BUDGETS)
    assert set(scaling["agent_id"]) == {"alpha", "beta"}


def test_run_file_preview_reads_only_regular_files_inside_the_run_folder(tmp_path: Path):
    run_dir = tmp_path / "run"
    (run_dir / "workspace").mkdir(parents=True)
    (run_dir / "record.json").write_text("{}")
    (run_dir / "stdout.log").write_text("x" * 100)
    (tmp_path / "secret.txt").write_text("do not show")
    (run_dir / "workspace" / "submission.csv").symlink_to(tmp_path / "secret.txt")
    record = {
        "source_path": str(run_dir / "record.json"),
        "stdout_path": "stdout.log",
        "stderr_path": "../secret.txt",
        "submission_path": "workspace/submission.csv",
        "transcript_path": None,
    }
    assert queries.run_file_preview(record, "stdout_path") == "x" * 100
    assert queries.run_file_preview(record, "stdout_path", limit=10).startswith("x" * 10 + "\n…")
    assert queries.run_file_preview(record, "submission_path") is None  # a symlink
    assert queries.run_file_preview(record, "stderr_path") is None  # outside the run folder
    assert queries.run_file_preview(record, "transcript_path") is None


def test_runs_lists_every_attempt_newest_first(app_snapshot: Path):
    frame = queries.runs(app_snapshot)
    assert len(frame) == frame["run_id"].nunique() > 0
    assert frame["created_at"].is_monotonic_decreasing
    record = queries.run_record(app_snapshot, frame["run_id"].iloc[0])
    assert record["run_id"] == frame["run_id"].iloc[0] and "task_spec_sha256" in record
