"""The dashboard's query module over a real snapshot built from hand-made records."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from pathlib import Path

import pandas as pd
import pytest

from app import queries
from runner.records import write_record
from tests.records import T0, make_record
from tests.test_dbt_build import insert_agents, insert_suites, insert_tasks
from warehouse.db import apply_ddl, connect
from warehouse.loader import load_runs
from warehouse.marts import build_marts
from warehouse.snapshot import publish_snapshot

# (task, direction): alpha wins t1 and t3, beta wins t2; gamma never completes its settings
TASKS = {"t1": "maximize", "t2": "minimize", "t3": "maximize"}
BUDGETS = (60, 600)
# alpha's model knew t1 (cutoff after its start), beta's none, gamma's cutoff is unknown
TASK_STARTS = {"t1": dt.date(2025, 1, 1), "t2": dt.date(2025, 6, 1), "t3": dt.date(2025, 6, 1)}
CUTOFFS = {"alpha": dt.date(2025, 3, 1), "beta": dt.date(2024, 12, 1), "gamma": None}
ALPHA_COST = 0.01  # per attempt; beta's and gamma's cost is unknown
LATE_DAY = (T0 + dt.timedelta(days=3)).date()  # gamma's last attempt, alone on its day
SUITES = {"demo": 3, "other": 3}  # raw.suites: suite → harness_error_ceiling
# Submission fingerprints: every success's answer is its own, except alpha's t3 at 600 s, whose
# first two counted attempts submitted one answer (a replay), and one answer beta and gamma share.
REPLAY, SHARED = "f" * 64, "e" * 64
SAME_ANSWER = {
    ("alpha", "t3", 600, 0): REPLAY,
    ("alpha", "t3", 600, 1): REPLAY,
    ("beta", "t1", 60, 0): SHARED,
    ("gamma", "t1", 60, 0): SHARED,
}


def _fingerprint(record):
    """A success's canonical fingerprint: its own, or the answer it repeats (SAME_ANSWER)."""
    if record.status != "success":
        return record
    key = (record.agent_id, record.task_id, record.budget_seconds, record.attempt_index)
    normalized = SAME_ANSWER.get(key, hashlib.sha256(record.run_id.encode()).hexdigest())
    return record.model_copy(
        update={"submission_normalized_sha256": normalized, "submission_sha256": normalized}
    )


def _records():
    records = []
    for agent, edge in (("alpha", 0.1), ("beta", 0.0)):
        for task, direction in TASKS.items():
            for budget in BUDGETS:
                for minute in range(5):
                    base = 0.5 + budget / 10000 + minute / 1000
                    # t2 is an rmse: beta's is lower (better)
                    score = 1.0 - base + 2 * edge if task == "t2" else base + edge
                    cost = (
                        {"tokens_in": 1000, "tokens_out": 100, "cost_usd": ALPHA_COST}
                        if agent == "alpha"
                        else {}
                    )
                    records.append(
                        make_record(
                            agent,
                            task,
                            budget,
                            minute,
                            score=score,
                            direction=direction,
                            suite_id="demo",
                            **cost,
                        )
                    )
    records.append(make_record("beta", "t1", 60, 7, status="timeout", suite_id="demo"))
    records.append(make_record("gamma", "t1", 60, 0, score=0.9, suite_id="other"))
    records.append(make_record("gamma", "t1", 60, 1, status="runtime_error", suite_id="other"))
    records.append(
        make_record("gamma", "t1", 60, 3 * 24 * 60, status="no_submission", suite_id="other")
    )
    # gamma's t2 at 600 s: three harness faults, its suite's ceiling: stopped there
    for minute in (10, 11, 12):
        records.append(
            make_record("gamma", "t2", 600, minute, status="harness_error", suite_id="other")
        )
    return [_fingerprint(r) for r in records]


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
    insert_tasks(warehouse, {t: (d, TASK_STARTS[t]) for t, d in TASKS.items()})
    insert_agents(warehouse, CUTOFFS)
    insert_suites(warehouse, SUITES)
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
    assert len(scores) == 2 * len(TASKS) * len(BUDGETS) + 2  # gamma: t1 60 s, t2 600 s
    row = scores.set_index(["agent_id", "task_id", "budget_seconds"]).loc[("alpha", "t1", 60)]
    assert row["median_score"] == pytest.approx(0.6 + 0.006 + 0.002)
    rates = queries.success_rates(app_snapshot).set_index("agent_id")
    assert rates.loc["beta", "n_timeout"] == 1
    assert rates.loc["gamma", "n_runtime_error"] == 1
    assert rates.loc["gamma", "success_rate"] == pytest.approx(1 / 3)
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


def test_run_transcript_reads_gateway_events_and_skips_junk(tmp_path: Path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "record.json").write_text("{}")
    call = {"event": "model_call", "t": 1.0, "status": 200, "usage": {"input": 3, "output": 4}}
    lines = [
        json.dumps({"event": "gateway_start", "t": 0.0}),
        json.dumps(call),
        "not json",
        json.dumps({"event": 5}),
        json.dumps([1, 2]),
        json.dumps({"event": "request", "t": 2.0, "method": "GET"})[:20],  # cut by a limit
    ]
    (run_dir / "transcript.jsonl").write_text("\n".join(lines))
    record = {"source_path": str(run_dir / "record.json"), "transcript_path": "transcript.jsonl"}
    events = queries.run_transcript(record)
    assert events == [{"event": "gateway_start", "t": 0.0}, call]


def test_runs_lists_every_attempt_newest_first(app_snapshot: Path):
    frame = queries.runs(app_snapshot)
    assert len(frame) == frame["run_id"].nunique() > 0
    assert frame["created_at"].is_monotonic_decreasing
    record = queries.run_record(app_snapshot, frame["run_id"].iloc[0])
    assert record["run_id"] == frame["run_id"].iloc[0] and "task_spec_sha256" in record


def test_filter_options(app_snapshot: Path):
    options = queries.filter_options(app_snapshot)
    assert options["suites"] == ["demo", "other"]
    assert options["agents"] == ["alpha", "beta", "gamma"]
    assert options["tasks"] == sorted(TASKS) and options["budgets"] == list(BUDGETS)
    assert (options["first_day"], options["last_day"]) == (T0.date(), LATE_DAY)


def test_leaderboard_badges_and_metadata(app_snapshot: Path):
    board = queries.leaderboard(app_snapshot).set_index("agent_id")
    assert board.loc["alpha", "contamination"] == "⚠ contaminated: t1"
    assert board.loc["beta", "contamination"] == "✓ clean"
    settings = len(TASKS) * len(BUDGETS)
    assert (board["coverage"] == f"✓ {settings}/{settings} settings").all()
    assert {"harness", "provider", "model_id", "success_rate"} <= set(board.columns)
    cov = queries.coverage(app_snapshot).set_index("agent_id")
    assert cov.loc["alpha", "badge"] == "✓ ranked"
    assert cov.loc["gamma", "badge"] == (
        f"✗ {settings} of {settings} settings incomplete · ⛔ 1 stopped at the harness-error ceiling"
    )


def test_filters_select_rows_of_the_marts(app_snapshot: Path):
    beta = queries.Filters(agents=("beta",))
    board = queries.leaderboard(app_snapshot, "best_budget", beta)
    assert list(board["agent_id"]) == ["beta"] and list(board["rank"]) == [2]  # rank kept
    cell = queries.Filters(tasks=("t2",), budgets=(60,))
    scores = queries.setting_scores(app_snapshot, cell)
    assert set(scores["task_id"]) == {"t2"} and set(scores["budget_seconds"]) == {60}
    assert len(scores) == 2
    ranks = queries.task_ranks(app_snapshot, cell)  # no budget column: tasks only
    assert set(ranks["task_id"]) == {"t2"} and len(ranks) == 2
    scaling = queries.time_scaling(app_snapshot, cell)  # no task column: budgets only
    assert set(scaling["budget_seconds"]) == {60} and len(scaling) == 2
    other = queries.Filters(suites=("other",))
    assert queries.leaderboard(app_snapshot, "best_budget", other).empty
    assert list(queries.success_rates(app_snapshot, other)["agent_id"]) == ["gamma"]
    assert set(queries.setting_scores(app_snapshot, other)["task_id"]) == {"t1", "t2"}
    assert list(queries.agent_costs(app_snapshot, beta)["agent_id"]) == ["beta"]
    assert queries.performance_stability(app_snapshot, beta)["agent_id"].tolist() == ["beta"]


def test_filters_select_attempts(app_snapshot: Path):
    total = queries.run_count(app_snapshot)
    assert total == len(_records())
    late = queries.Filters(start=LATE_DAY, end=LATE_DAY)
    assert queries.run_count(app_snapshot, late) == 1
    assert queries.runs(app_snapshot, late)["status"].tolist() == ["no_submission"]
    first_day = queries.Filters(start=T0.date(), end=T0.date())
    assert queries.run_count(app_snapshot, first_day) == total - 1
    other = queries.Filters(suites=("other",))
    assert queries.run_count(app_snapshot, other) == 6
    assert queries.run_count(app_snapshot, other, ("runtime_error",)) == 1
    newest = queries.runs(app_snapshot, limit=5)
    assert len(newest) == 5
    assert newest["created_at"].iloc[0].date() == LATE_DAY


def test_counted_attempts_of_one_task_and_budget(app_snapshot: Path):
    counted = queries.counted_attempts(app_snapshot, "t1", 60)
    per_agent = counted.groupby("agent_id").size().to_dict()
    assert per_agent == {"alpha": 5, "beta": 5, "gamma": 1}
    assert set(counted["success_index"]) == {1, 2, 3, 4, 5}
    alpha = counted[counted["agent_id"] == "alpha"]["score"]
    assert alpha.median() == pytest.approx(0.6 + 0.006 + 0.002)
    only_late = queries.Filters(start=LATE_DAY, end=LATE_DAY)
    assert queries.counted_attempts(app_snapshot, "t1", 60, only_late).empty
    assert queries.counted_attempts(app_snapshot, "t1", 60, queries.Filters(agents=("beta",)))[
        "agent_id"
    ].unique().tolist() == ["beta"]


def test_performance_stability_and_monotone_curves(app_snapshot: Path):
    scatter = queries.performance_stability(app_snapshot).set_index("agent_id")
    assert list(scatter.index) == ["alpha", "beta"]
    assert scatter.loc["alpha", "score"] == pytest.approx(2 / 3)
    assert scatter["rel_iqr"].notna().all() and (scatter["rel_iqr"] > 0).all()
    shares = queries.time_scaling_monotone(app_snapshot).set_index("agent_id")
    assert shares.loc["alpha", "curves"] == len(TASKS)
    curves = queries.monotone_curves(app_snapshot)
    assert len(curves) == 2 * len(TASKS)
    per_agent = curves.groupby("agent_id")["is_monotone"].sum()
    assert (per_agent == shares["monotone_curves"].reindex(per_agent.index)).all()
    assert curves["points"].str.count("→").eq(len(BUDGETS) - 1).all()


def test_cost_marts_keep_unknown_cost_unknown(app_snapshot: Path):
    costs = queries.agent_costs(app_snapshot).set_index("agent_id")
    attempts = 2 * len(TASKS) * len(BUDGETS) * 5 // 2  # alpha's attempts
    assert costs.loc["alpha", "attempts_with_cost"] == attempts
    assert costs.loc["alpha", "cost_total_usd"] == pytest.approx(attempts * ALPHA_COST)
    assert costs.loc["alpha", "cost_per_success_usd"] == pytest.approx(ALPHA_COST)
    assert costs.loc["alpha", "tokens_in_total"] == attempts * 1000
    assert costs.loc["alpha", "points_per_dollar"] == pytest.approx((2 / 3) / ALPHA_COST)
    for agent in ("beta", "gamma"):
        assert costs.loc[agent, "attempts_with_cost"] == 0
        assert pd.isna(costs.loc[agent, "cost_total_usd"])  # unknown, not 0
        assert pd.isna(costs.loc[agent, "points_per_dollar"])
    settings = queries.setting_costs(app_snapshot).set_index(
        ["agent_id", "task_id", "budget_seconds"]
    )
    alpha = settings.loc[("alpha", "t1", 60)]
    assert alpha["points"] == pytest.approx(1.0)
    assert alpha["points_per_dollar"] == pytest.approx(1.0 / ALPHA_COST)
    assert pd.isna(settings.loc[("beta", "t1", 60), "cost_mean_usd"])


def test_settings_stopped_at_the_harness_error_ceiling(app_snapshot: Path):
    cov = queries.coverage(app_snapshot).set_index("agent_id")
    assert cov["harness_errors"].to_dict() == {"alpha": 0, "beta": 0, "gamma": 3}
    assert cov["stopped_at_harness_error_ceiling"].to_dict() == {"alpha": 0, "beta": 0, "gamma": 1}
    stopped = queries.stopped_settings(app_snapshot)
    assert stopped[["agent_id", "task_id", "budget_seconds"]].values.tolist() == [
        ["gamma", "t2", 600]
    ]
    row = stopped.iloc[0]
    assert row["harness_errors"] == "⛔ 3 harness errors (ceiling 3)"
    assert (row["n_harness_error"], row["harness_error_ceiling"], row["missing"]) == (3, 3, 5)
    assert queries.stopped_settings(app_snapshot, queries.Filters(agents=("beta",))).empty

    scores = queries.setting_scores(app_snapshot).set_index(
        ["agent_id", "task_id", "budget_seconds"]
    )
    assert scores.loc[("gamma", "t2", 600), "harness_errors"] == "⛔ 3 of 3: stopped at the ceiling"
    assert bool(scores.loc[("gamma", "t2", 600), "stopped_at_harness_error_ceiling"])
    assert scores.loc[("alpha", "t1", 60), "harness_errors"] == "0 of 3"
    assert int(scores["stopped_at_harness_error_ceiling"].sum()) == 1


def test_snapshots_without_the_ceiling_still_serve_the_pages(app_snapshot: Path, tmp_path: Path):
    """A snapshot published before the ceiling existed: the columns are left out, no error."""
    import duckdb

    old = tmp_path / "old.duckdb"
    old.write_bytes(app_snapshot.read_bytes())
    with duckdb.connect(str(old)) as con:
        for column in ("n_harness_error", "harness_error_ceiling", "harness_error_ceiling_reached"):
            con.execute(f"alter table marts.coverage drop column {column}")
    assert queries.stopped_settings(old).empty
    cov = queries.coverage(old).set_index("agent_id")
    assert "harness_errors" not in cov and cov.loc["gamma", "badge"].endswith("incomplete")
    assert "harness_errors" not in queries.setting_scores(old)


def _run_id(agent: str, task: str, budget: int, minute: int) -> str:
    return make_record(agent, task, budget, minute).run_id


def test_leaderboard_badges_replayed_and_shared_submissions(app_snapshot: Path, tmp_path: Path):
    import duckdb

    board = queries.leaderboard(app_snapshot).set_index("agent_id")
    assert board.loc["alpha", "duplicates"] == "⚠ replayed in 1 setting(s)"
    assert board.loc["beta", "duplicates"] == "⧉ 1 attempt(s) shared with other agents"
    assert "duplicates" in queries.leaderboard(app_snapshot, "all_cells").columns

    # the other badges: no duplicate at all, and counted attempts without a fingerprint
    other = tmp_path / "other.duckdb"
    other.write_bytes(app_snapshot.read_bytes())
    with duckdb.connect(str(other)) as con:
        con.execute(
            "update marts.setting_duplicates "
            "set duplicated_counted = false, n_shared_with_other_agents = 0"
        )
        con.execute(
            "update marts.setting_duplicates set n_counted_fingerprinted = n_counted - 1 "
            "where agent_id = 'beta' and task_id = 't2' and budget_seconds = 60"
        )
    board = queries.leaderboard(other).set_index("agent_id")
    assert board.loc["alpha", "duplicates"] == "✓ distinct"
    assert board.loc["beta", "duplicates"] == "fingerprints unknown"
    with duckdb.connect(str(other)) as con:  # a snapshot from before the mart: no badge
        con.execute("drop table marts.setting_duplicates")
    assert "duplicates" not in queries.leaderboard(other).columns
    assert queries.duplicated_settings(other).empty


def test_duplicated_settings_lists_the_replayed_setting(app_snapshot: Path):
    settings = queries.duplicated_settings(app_snapshot)
    assert settings[["agent_id", "task_id", "budget_seconds"]].values.tolist() == [
        ["alpha", "t3", 600]
    ]
    row = settings.iloc[0]
    assert bool(row["duplicated_counted"])
    assert (row["n_counted"], row["n_distinct_counted_submissions"]) == (5, 4)
    assert queries.duplicated_settings(app_snapshot, queries.Filters(agents=("beta",))).empty


def test_submission_twins_of_an_attempt(app_snapshot: Path, tmp_path: Path):
    import duckdb

    twins = queries.submission_twins(app_snapshot, _run_id("alpha", "t3", 600, 1))
    assert twins["run_id"].tolist() == [_run_id("alpha", "t3", 600, 0)]
    assert twins["relation"].tolist() == ["same setting (replay)"]
    assert twins["total"].tolist() == [1] and bool(twins["is_counted"].iloc[0])
    twins = queries.submission_twins(app_snapshot, _run_id("beta", "t1", 60, 0))
    assert twins[["run_id", "agent_id", "relation"]].values.tolist() == [
        [_run_id("gamma", "t1", 60, 0), "gamma", "another agent"]
    ]
    assert twins["score"].iloc[0] == pytest.approx(0.9)
    assert queries.submission_twins(app_snapshot, _run_id("alpha", "t1", 60, 0)).empty  # distinct
    assert queries.submission_twins(app_snapshot, _run_id("beta", "t1", 60, 7)).empty  # a timeout
    capped = queries.submission_twins(app_snapshot, _run_id("alpha", "t3", 600, 0), limit=0)
    assert capped.empty
    old = tmp_path / "old.duckdb"
    old.write_bytes(app_snapshot.read_bytes())
    with duckdb.connect(str(old)) as con:
        con.execute("drop table marts.submission_twins")
    assert queries.submission_twins(old, _run_id("alpha", "t3", 600, 1)) is None


def test_run_source_fields_as_rows():
    fields = {"mode": "agent", "temperature": 0.2, "secondary_r2": None, "tags": ["a", 1]}
    frame = queries.run_source_fields({"source_fields": json.dumps(fields)})
    assert frame.values.tolist() == [
        ["mode", "agent"],
        ["temperature", "0.2"],
        ["secondary_r2", "null"],
        ["tags", '["a", 1]'],
    ]
    assert queries.run_source_fields({"source_fields": None}) is None
    assert queries.run_source_fields({"source_fields": float("nan")}) is None
    assert queries.run_source_fields({}) is None
    assert queries.run_source_fields({"source_fields": "[1, 2]"}).values.tolist() == [
        ["(value)", "[1, 2]"]
    ]
    assert queries.run_source_fields({"source_fields": "not json"}).values.tolist() == [
        ["(value)", "not json"]
    ]


def test_imported_run_without_a_budget_offers_no_budget_filter(app_snapshot: Path, tmp_path: Path):
    """The original TML-bench's first databases recorded no budget: no "None" budget option."""
    import duckdb

    copy = tmp_path / "imported.duckdb"
    copy.write_bytes(app_snapshot.read_bytes())
    with duckdb.connect(str(copy)) as con:
        con.execute(
            "insert into raw.runs (run_id, schema_version, created_at, agent_id, agent_kind, "
            "harness, task_id, attempt_index, sandbox_backend, sandbox_isolated, sandbox_unsafe, "
            "status, source, record_sha256, loaded_at) values ('old_1', 5, now(), 'unknown', "
            "'command', 'kilo', 't1', 0, 'tml-bench', false, false, 'timeout', 'tml-bench', "
            "'x', now())"
        )
    options = queries.filter_options(copy)
    assert options["budgets"] == list(BUDGETS) and "unknown" in options["agents"]
