"""The dashboard's query module over a real snapshot built from hand-made records (the loader,
dbt and the publish step, as the pipeline runs them)."""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as hyp

from app import queries, run_files
from runner.attempts.records import STATUSES
from tools.dashboard_snapshot import (
    ALPHA_COST,
    BUDGETS,
    LATE_DAY,
    TASKS,
    other_suite_records,
    run_id_of,
    snapshot_records,
)
from tools.records import T0

# integration: the queries on app_snapshot, the published snapshot a dbt build makes
pytestmark = pytest.mark.integration

DEMO = queries.Filters(suite="demo")  # aggregates are per suite: every page shows one


@pytest.fixture(scope="module")
def con(app_snapshot: Path):
    connection = queries.open_snapshot(app_snapshot)
    yield connection
    connection.close()


def test_snapshot_path_env_and_default(tmp_path: Path):
    assert queries.snapshot_path({"TMLBENCH_SNAPSHOT": str(tmp_path / "s.duckdb")}) == (
        tmp_path / "s.duckdb"
    )
    default = queries.snapshot_path({"TMLBENCH_WAREHOUSE": str(tmp_path / "w.duckdb")})
    assert default == tmp_path / "w.snapshot.duckdb"


def test_has_runs(app_snapshot: Path, con, tmp_path: Path):
    assert queries.has_runs(con)
    assert queries.open_snapshot(tmp_path / "missing.duckdb") is None
    assert not queries.has_runs(None)
    (tmp_path / "junk.duckdb").write_text("not a database")
    assert queries.open_snapshot(tmp_path / "junk.duckdb") is None
    # a snapshot published before the display models: no page can read it, so none claims runs
    old = tmp_path / "old.duckdb"
    old.write_bytes(app_snapshot.read_bytes())
    with duckdb.connect(str(old)) as writer:
        writer.execute("drop schema display cascade")
    with queries.open_snapshot(old) as reader:
        assert not queries.has_runs(reader)


def test_snapshot_identity_changes_with_a_new_snapshot(app_snapshot: Path, tmp_path: Path):
    copy = tmp_path / "s.duckdb"
    copy.write_bytes(app_snapshot.read_bytes())
    before = queries.snapshot_identity(copy)
    replacement = tmp_path / "new.duckdb"
    replacement.write_bytes(app_snapshot.read_bytes())
    replacement.replace(copy)  # as publish_snapshot swaps a new file in
    assert queries.snapshot_identity(copy) not in (None, before)
    assert queries.snapshot_identity(tmp_path / "missing.duckdb") is None


def test_leaderboard_ranks_covered_agents_with_success_rate(con):
    board = queries.leaderboard(con, "best_budget", DEMO)
    assert list(board["agent_id"]) == ["alpha", "beta"]  # gamma is not covered
    assert list(board["rank"]) == [1, 2]
    assert board.loc[0, "score"] == pytest.approx(2 / 3)
    assert board.loc[1, "score"] == pytest.approx(1 / 3)
    rates = board.set_index("agent_id")["success_rate"]
    assert rates["alpha"] == pytest.approx(1.0)  # its 2 provider errors are not its own
    assert rates["beta"] == pytest.approx(30 / 31)
    # gamma is incomplete: the demo suite is provisional, and every row says so
    assert board["provisional"].all()
    assert set(board["suite_coverage"]) == {"⚠ provisional: 12 of 18 settings"}
    assert queries.suite_status(con, DEMO)["provisional"]
    assert not queries.suite_status(con, queries.Filters(suite="nope"))
    assert board[["score_low", "score_high", "p_rank_1"]].notna().all().all()
    assert board.loc[0, "mean_rank_sd"] == "1.33 ± 0.58"
    for variant in ("all_cells", "largest_budget"):
        other = queries.leaderboard(con, variant, DEMO)
        assert list(other["agent_id"]) == ["alpha", "beta"], variant
        assert other[["score_interval", "p_rank_1"]].isna().all().all()  # primary only
    with pytest.raises(ValueError):
        queries.leaderboard(con, "nope", DEMO)


def test_coverage_says_who_is_not_ranked(con):
    cov = queries.coverage(con, filters=DEMO).set_index("agent_id")
    assert bool(cov.loc["alpha", "is_ranked"]) and bool(cov.loc["beta", "is_ranked"])
    assert not bool(cov.loc["gamma", "is_ranked"])
    assert cov.loc["gamma", "settings"] == len(TASKS) * len(BUDGETS)
    assert cov.loc["gamma", "missing_successes"] == 4 + 5 * 5


def test_setting_scores_and_success_rates(con):
    scores = queries.setting_scores(con, filters=DEMO)
    assert len(scores) == 2 * len(TASKS) * len(BUDGETS) + 2  # gamma: t1 60 s, t2 600 s
    row = scores.set_index(["agent_id", "task_id", "budget_seconds"]).loc[("alpha", "t1", 60)]
    assert row["median_score"] == pytest.approx(0.6 + 0.006 + 0.002)
    rates = queries.success_rates(con, filters=DEMO).set_index("agent_id")
    assert rates.loc["gamma", "success_rate"] == pytest.approx(1 / 3)
    long = queries.status_counts(con, filters=DEMO)
    counts = long.set_index(["agent_id", "status"])["attempts"]
    assert counts[("beta", "timeout")] == 1 and counts[("gamma", "runtime_error")] == 1
    assert set(long["status"]) == set(STATUSES) and len(long) == 3 * len(STATUSES)
    assert long["attempts"].sum() == rates["attempts"].sum()


def test_rank_stability_task_ranks_and_time_scaling(con):
    stab = queries.rank_stability(con, filters=DEMO).set_index("agent_id")
    assert stab.loc["alpha", "mean_rank"] == pytest.approx(4 / 3)
    assert stab.loc["beta", "mean_rank"] == pytest.approx(5 / 3)
    ranks = queries.task_ranks(con, filters=DEMO).set_index(["agent_id", "task_id"])["rank"]
    assert ranks[("alpha", "t1")] == 1 and ranks[("beta", "t2")] == 1
    scaling = queries.time_scaling(con, filters=DEMO)
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
    assert run_files.run_file_preview(record, "stdout_path") == "x" * 100
    assert run_files.run_file_preview(record, "stdout_path", limit=10).startswith("x" * 10 + "\n…")
    assert run_files.run_file_preview(record, "submission_path") is None  # a symlink
    assert run_files.run_file_preview(record, "stderr_path") is None  # outside the run folder
    assert run_files.run_file_preview(record, "transcript_path") is None


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
    events = run_files.run_transcript(record)
    assert events == [{"event": "gateway_start", "t": 0.0}, call]


def test_runs_lists_every_attempt_newest_first(con):
    frame = queries.runs(con, queries.Filters(suite="demo"))
    assert len(frame) == frame["run_id"].nunique() > 0  # a suite's run ids are unique
    assert frame["created_at"].is_monotonic_decreasing
    record = queries.run_record(con, "demo", frame["run_id"].iloc[0])
    assert record["run_id"] == frame["run_id"].iloc[0] and "task_spec_sha256" in record
    fields = run_files.record_fields(record).set_index("field")["value"]
    assert fields["run_id"] == record["run_id"] and fields["status"] == record["status"]
    assert "validation_code" not in fields  # not recorded: left out
    assert fields["created_at"].startswith(str(record["created_at"].date()))


def test_record_fields_as_text():
    """Status, score and the reason first (whatever the warehouse's column order), then whose
    attempt it is, then the rest in the record's order; missing values left out."""
    record = {
        "run_id": "r1",
        "score": float("nan"),
        "sandbox_notes": np.array(["a", "b"]),
        "egress_denied_hosts": {"h": 2},
        "created_at": pd.Timestamp("2026-01-01T12:00:00Z"),
        "wall_seconds": np.float64(1.5),
        "finished_at": pd.NaT,
        "limit_exceeded": "wall_clock",
        "status": "timeout",
    }
    assert run_files.record_fields(record).values.tolist() == [
        ["status", "timeout"],
        ["limit_exceeded", "wall_clock"],
        ["created_at", "2026-01-01T12:00:00+00:00"],
        ["wall_seconds", "1.5"],
        ["run_id", "r1"],
        ["sandbox_notes", '["a", "b"]'],
        ["egress_denied_hosts", '{"h": 2}'],
    ]


def test_filter_options(con):
    suites = queries.suites(con)  # every suite file, with runs or not (idle has none)
    assert suites.values.tolist() == [
        ["demo", "demo", True, True], ["idle", "idle", True, False], ["other", "other", True, True]
    ]  # fmt: skip
    assert queries.default_suite(suites) == "demo"
    other = queries.filter_options(con, "other")  # the chosen suite's own options
    assert (other["agents"], other["tasks"], other["budgets"]) == (["gamma"], ["t1"], [60])
    assert queries.filter_options(con, "nope")["agents"] == []
    idle = queries.filter_options(con, "idle")
    assert idle["agents"] == idle["statuses"] == [] and idle["first_day"] is None
    options = queries.filter_options(con, "demo")
    assert options["suites"] == ["demo", "idle", "other"]
    assert options["agents"] == ["alpha", "beta", "gamma"]
    assert options["tasks"] == sorted(TASKS) and options["budgets"] == list(BUDGETS)
    # the run explorer's status filter: the statuses that occur, in the taxonomy's order
    assert options["statuses"] == [
        "success", "no_submission", "timeout", "runtime_error", "provider_error", "harness_error"
    ]  # fmt: skip
    assert (options["first_day"], options["last_day"]) == (T0.date(), LATE_DAY)


def test_leaderboard_badges_and_metadata(con):
    board = queries.leaderboard(con, filters=DEMO).set_index("agent_id")
    assert board.loc["alpha", "contamination"] == "⚠ t1"
    assert board.loc["beta", "contamination"] == "✓ clean"
    settings = len(TASKS) * len(BUDGETS)
    assert (board["coverage"] == f"✓ {settings}/{settings}").all()
    assert {"harness", "provider", "model_id", "agent_title", "success_rate"} <= set(board.columns)
    cov = queries.coverage(con, filters=DEMO).set_index("agent_id")
    assert cov.loc["alpha", "badge"] == "✓ ranked"
    assert cov.loc["gamma", "badge"] == (
        f"✗ {settings} of {settings} settings incomplete · ⊘ 1 stopped at the harness-error ceiling"
    )


def test_filters_select_rows_of_the_marts(con):
    beta = queries.Filters(suite="demo", agents=("beta",))
    board = queries.leaderboard(con, "best_budget", beta)
    assert list(board["agent_id"]) == ["beta"] and list(board["rank"]) == [2]  # rank kept
    cell = queries.Filters(suite="demo", tasks=("t2",), budgets=(60,))
    scores = queries.setting_scores(con, cell)
    assert set(scores["task_id"]) == {"t2"} and set(scores["budget_seconds"]) == {60}
    assert len(scores) == 2
    ranks = queries.task_ranks(con, cell)  # no budget column: tasks only
    assert set(ranks["task_id"]) == {"t2"} and len(ranks) == 2
    scaling = queries.time_scaling(con, cell)  # no task column: budgets only
    assert set(scaling["budget_seconds"]) == {60} and len(scaling) == 2
    other = queries.Filters(suite="other")  # gamma's own runs there, not the demo's
    assert queries.leaderboard(con, "best_budget", other).empty
    rates = queries.success_rates(con, other)
    assert list(rates["agent_id"]) == ["gamma"] and list(rates["attempts"]) == [2]
    scores = queries.setting_scores(con, other)
    assert list(scores["task_id"]) == ["t1"] and list(scores["median_score"]) == [0.123]
    demo = queries.setting_scores(con, queries.Filters(suite="demo", agents=("gamma",)))
    assert 0.123 not in set(demo["median_score"]) and set(demo["task_id"]) == {"t1", "t2"}
    assert list(queries.agent_costs(con, beta)["agent_id"]) == ["beta"]
    assert queries.status_counts(con, beta)["agent_id"].unique().tolist() == ["beta"]
    assert list(queries.coverage(con, other)["agent_id"]) == ["gamma"]


def test_filters_select_attempts(con):
    total = queries.run_count(con)
    assert total == len(snapshot_records()) + len(other_suite_records())  # every suite's
    late = queries.Filters(start=LATE_DAY, end=LATE_DAY)
    assert queries.run_count(con, late) == 1
    assert queries.runs(con, late)["status"].tolist() == ["no_submission"]
    first_day = queries.Filters(start=T0.date(), end=T0.date())
    assert queries.run_count(con, first_day) == total - 1
    other = queries.Filters(suite="other")
    assert queries.run_count(con, other) == 2
    assert queries.run_count(con, other, ("runtime_error",)) == 1
    assert queries.run_count(con, queries.Filters(suite="demo")) == len(snapshot_records())
    newest = queries.runs(con, limit=5)
    assert len(newest) == 5
    assert newest["created_at"].iloc[0].date() == LATE_DAY


def test_counted_attempts_of_one_task_and_budget(con):
    counted = queries.counted_attempts(con, "t1", 60, DEMO)
    per_agent = counted.groupby("agent_id").size().to_dict()
    assert per_agent == {"alpha": 5, "beta": 5, "gamma": 1}
    assert set(counted["success_index"]) == {1, 2, 3, 4, 5}
    alpha = counted[counted["agent_id"] == "alpha"]["score"]
    assert alpha.median() == pytest.approx(0.6 + 0.006 + 0.002)
    only_late = queries.Filters(start=LATE_DAY, end=LATE_DAY)
    assert queries.counted_attempts(con, "t1", 60, only_late).empty
    assert queries.counted_attempts(con, "t1", 60, queries.Filters(agents=("beta",)))[
        "agent_id"
    ].unique().tolist() == ["beta"]


def test_performance_stability_and_monotone_curves(con):
    rates = queries.success_rates(con, filters=DEMO).set_index("agent_id")
    scatter = rates.dropna(subset=["rank"])
    assert sorted(scatter.index) == ["alpha", "beta"]
    assert scatter.loc["alpha", "score"] == pytest.approx(2 / 3)
    assert (scatter["run_rel_iqr"] > 0).all()
    shares = queries.time_scaling_monotone(con, filters=DEMO).set_index("agent_id")
    assert shares.loc["alpha", "curves"] == len(TASKS)
    curves = queries.monotone_curves(con, filters=DEMO)
    assert len(curves) == 2 * len(TASKS)
    per_agent = curves.groupby("agent_id")["is_monotone"].sum()
    assert (per_agent == shares["monotone_curves"].reindex(per_agent.index)).all()
    assert curves["points"].str.count("→").eq(len(BUDGETS) - 1).all()


def test_cost_marts_keep_unknown_cost_unknown(con):
    costs = queries.agent_costs(con, filters=DEMO).set_index("agent_id")
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
    settings = queries.setting_costs(con, filters=DEMO).set_index(
        ["agent_id", "task_id", "budget_seconds"]
    )
    alpha = settings.loc[("alpha", "t1", 60)]
    assert alpha["points"] == pytest.approx(1.0)
    assert alpha["points_per_dollar"] == pytest.approx(1.0 / ALPHA_COST)
    assert pd.isna(settings.loc[("beta", "t1", 60), "cost_mean_usd"])


def test_settings_stopped_at_the_harness_error_ceiling(con):
    cov = queries.coverage(con, filters=DEMO).set_index("agent_id")
    assert cov["harness_errors"].to_dict() == {"alpha": 0, "beta": 0, "gamma": 3}
    assert cov["stopped_at_harness_error_ceiling"].to_dict() == {"alpha": 0, "beta": 0, "gamma": 1}
    stopped = queries.stopped_settings(con, filters=DEMO)
    assert stopped[["agent_id", "task_id", "budget_seconds"]].values.tolist() == [
        ["gamma", "t2", 600]
    ]
    row = stopped.iloc[0]
    assert row["harness_errors"] == "⊘ 3 of 3: stopped at the ceiling"
    assert (row["n_harness_error"], row["harness_error_ceiling"], row["missing"]) == (3, 3, 5)
    assert queries.stopped_settings(con, queries.Filters(agents=("beta",))).empty

    scores = queries.setting_scores(con, filters=DEMO).set_index(
        ["agent_id", "task_id", "budget_seconds"]
    )
    assert scores.loc[("gamma", "t2", 600), "harness_errors"] == "⊘ 3 of 3: stopped at the ceiling"
    assert bool(scores.loc[("gamma", "t2", 600), "stopped_at_harness_error_ceiling"])
    assert scores.loc[("alpha", "t1", 60), "harness_errors"] == "0 of 3"
    assert int(scores["stopped_at_harness_error_ceiling"].sum()) == 1


def test_leaderboard_badges_replayed_and_shared_submissions(con):
    board = queries.leaderboard(con, filters=DEMO).set_index("agent_id")
    assert board.loc["alpha", "duplicates"] == "⚠ 1 setting(s) replayed"
    assert board.loc["beta", "duplicates"] == "↔ 1 attempt(s) shared"
    assert "duplicates" in queries.leaderboard(con, "all_cells", DEMO).columns

    # the other badges ("✓ distinct", "unknown"): the dbt unit test of
    # leaderboard_display (dbt_project/models/display/leaderboard_display.yml)


def test_duplicated_settings_lists_the_replayed_setting(con):
    settings = queries.duplicated_settings(con, filters=DEMO)
    assert settings[["agent_id", "task_id", "budget_seconds"]].values.tolist() == [
        ["alpha", "t3", 600]
    ]
    row = settings.iloc[0]
    assert bool(row["duplicated_counted"])
    assert (row["n_counted"], row["n_distinct_counted_submissions"]) == (5, 4)
    assert queries.duplicated_settings(con, queries.Filters(agents=("beta",))).empty


def _twins(con, agent: str, task: str, budget: int, minute: int, **kwargs) -> pd.DataFrame:
    record = queries.run_record(con, "demo", run_id_of(agent, task, budget, minute))
    key = ("demo", task, record["submission_normalized_sha256"], agent, budget)
    return queries.submission_twins(con, record["run_id"], key, **kwargs)


def test_submission_twins_of_an_attempt(con):
    twins = _twins(con, "alpha", "t3", 600, 1)
    assert twins["run_id"].tolist() == [run_id_of("alpha", "t3", 600, 0)]
    assert twins["relation"].tolist() == ["same setting (replay)"]
    assert twins["total"].tolist() == [1] and bool(twins["is_counted"].iloc[0])
    twins = _twins(con, "beta", "t1", 60, 0)
    assert twins[["run_id", "agent_id", "relation"]].values.tolist() == [
        [run_id_of("gamma", "t1", 60, 0), "gamma", "another agent"]
    ]
    assert twins["score"].iloc[0] == pytest.approx(0.9)
    assert _twins(con, "alpha", "t1", 60, 0).empty  # distinct
    assert _twins(con, "beta", "t1", 60, 7).empty  # a timeout: no fingerprint
    assert _twins(con, "alpha", "t3", 600, 0, limit=0).empty


def test_run_source_fields_as_rows():
    fields = {"mode": "agent", "temperature": 0.2, "secondary_r2": None, "tags": ["a", 1]}
    frame = run_files.run_source_fields({"source_fields": json.dumps(fields)})
    assert frame.values.tolist() == [
        ["mode", "agent"],
        ["temperature", "0.2"],
        ["secondary_r2", "null"],
        ["tags", '["a", 1]'],
    ]
    assert run_files.run_source_fields({"source_fields": None}) is None
    assert run_files.run_source_fields({"source_fields": float("nan")}) is None
    assert run_files.run_source_fields({}) is None
    assert run_files.run_source_fields({"source_fields": "[1, 2]"}).values.tolist() == [
        ["(value)", "[1, 2]"]
    ]
    assert run_files.run_source_fields({"source_fields": "not json"}).values.tolist() == [
        ["(value)", "not json"]
    ]


def test_default_suite_prefers_the_demo_then_a_suite_with_runs():
    def frame(**has_runs: bool) -> pd.DataFrame:
        return pd.DataFrame({"suite_id": list(has_runs), "has_runs": list(has_runs.values())})

    assert queries.default_suite(frame(a=True, demo=True)) == "demo"
    # a fresh clone that ran tml-v1 only: its suite, not the demo's empty page
    assert queries.default_suite(frame(demo=False, tml=True, z=True)) == "tml"
    assert queries.default_suite(frame(b=False, demo=False)) == "demo"
    assert queries.default_suite(frame(b=False)) == "b"
    assert queries.default_suite(frame()) is None


# --- the newest snapshot: queries.SnapshotReader -----------------------------------------------


def _publish_tiny(path: Path, version: int) -> None:
    """Publish a one-row snapshot whose only suite is ``s<version>`` the way publish_snapshot
    does: a new file written beside the old one, then swapped in."""
    staging = path.with_name(f".{path.name}.tmp")
    with duckdb.connect(str(staging)) as writer:
        writer.execute("create schema display")
        writer.execute(
            f"create table display.filter_options as select 's{version}' as suite_id, "
            "null as suite_title, true as from_suite_file, true as has_runs"
        )
    staging.replace(path)


def _open_files(path: Path) -> int:
    """How many of this process's file descriptors are on a snapshot file once at ``path``
    (the current one, or one a publish replaced since: ``<path> (deleted)``)."""
    fds = Path("/proc/self/fd")
    links = []
    for fd in fds.iterdir():
        with contextlib.suppress(OSError):  # the listing's own descriptor is gone by now
            links.append(os.readlink(fd))
    return sum(link in (str(path), f"{path} (deleted)") for link in links)


def _suite_ids(con: duckdb.DuckDBPyConnection) -> list[str]:
    return queries.suites(con)["suite_id"].tolist()


def test_snapshot_reader_reads_a_newly_published_snapshot_while_the_old_one_is_open(
    tmp_path: Path,
):
    """DuckDB's Python client keeps one database per path: while a connection to the old file
    was open, a new ``duckdb.connect(path)`` returned the old snapshot."""
    path = tmp_path / "snapshot.duckdb"
    reader = queries.SnapshotReader(path)
    assert reader.current() == queries.Snapshot(None, None)  # nothing published yet
    _publish_tiny(path, 1)
    old = reader.current()
    assert reader.current() is old  # the same file: the same connection
    assert _suite_ids(old.connection) == ["s1"]
    _publish_tiny(path, 2)
    new = reader.current()
    assert new.identity not in (None, old.identity)
    assert _suite_ids(new.connection) == ["s2"]
    # a session still reading the old snapshot goes on reading it: not closed under its query
    assert _suite_ids(old.connection) == ["s1"]
    assert _open_files(path) == 2
    del old  # its last holder is done: the replaced file is closed
    assert _open_files(path) == 1
    path.unlink()
    assert reader.current() == queries.Snapshot(None, None)


# 15 generated sequences of up to 8 steps (publish a snapshot, hold the newest, drop one held):
# a publish writes a DuckDB file and a new snapshot is opened (~50 ms each), so about 3 s.
@settings(
    max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(steps=hyp.lists(hyp.sampled_from(["publish", "hold", "drop"]), max_size=8))
def test_snapshot_reader_follows_publishes_and_keeps_no_old_snapshot_nobody_reads(
    tmp_path_factory: pytest.TempPathFactory, steps: list[str]
):
    """After every step the reader reads the newest publish; every snapshot a session still
    holds reads what it read when opened; and the process has a file open for exactly the
    snapshots someone holds (the reader's current one included): none piles up."""
    path = tmp_path_factory.mktemp("snapshots") / "snapshot.duckdb"
    reader = queries.SnapshotReader(path)
    version = 0
    held: list[tuple[int, queries.Snapshot]] = []  # (version read, snapshot) of other sessions
    for step in ["publish", *steps]:
        if step == "publish":
            version += 1
            _publish_tiny(path, version)
        elif step == "hold":
            held.append((version, reader.current()))
        elif held:
            held.pop(0)
        current = reader.current()
        assert _suite_ids(current.connection) == [f"s{version}"]
        assert [_suite_ids(s.connection) for _, s in held] == [[f"s{v}"] for v, _ in held]
        alive = {id(s.connection) for s in [current, *(s for _, s in held)]}
        assert _open_files(path) == len(alive), (steps, step)
