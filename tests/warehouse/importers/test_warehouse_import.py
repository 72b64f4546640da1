"""Importing the original TML-bench's results, as its own code writes them.

Databases of every schema generation (and one migrated from the first to the current) and its
baselines table are written as the original's ``orchestrator/db.py`` of that generation writes
them (tests/support/tml_bench_db.py), its result.json tree by its vendored code
(tests/support/tml_bench_original); the importer must land every column where the mapping
table in warehouse/importers/tml_bench.py says.
"""

from __future__ import annotations

import datetime as dt
import json
import sqlite3
from pathlib import Path

import pytest

from runner.errors import TmlbenchError
from tests.support import tml_bench as tb
from tests.support.tml_bench_db import GENERATIONS, run_columns
from tools.dbt_in_process import run_in_process
from warehouse.importers.tml_bench import import_tml_bench
from warehouse.loader import load_runs

# integration: the imported runs built into marts by dbt
pytestmark = pytest.mark.integration

PT = "-08:00"  # the original writes created_at in US Pacific time, with its offset

RUNS = [
    tb.result("churn_a1", f"2026-02-01T10:00:00{PT}", score=0.92),
    tb.result("churn_a2", f"2026-02-01T09:00:00{PT}", score=0.91),
    tb.result("churn_a3", f"2026-02-01T11:00:00{PT}", status="timeout"),
    tb.result("churn_q1", f"2026-02-01T10:30:00{PT}", model=tb.QWEN, score=0.88, budget=240),
    tb.result("traffic_a1", f"2026-02-02T08:00:00{PT}", competition=tb.TRAFFIC, score=31.5),
    tb.result("traffic_a2", f"2026-02-02T09:00:00{PT}", competition=tb.TRAFFIC,
              status="invalid_submission"),
    tb.result("churn_p1", f"2026-02-03T08:00:00{PT}", status="provider_error", model=tb.QWEN),
    tb.result("churn_r1", f"2026-02-03T09:00:00{PT}", status="runtime_error", provenance=False,
              profile=None, seed=None),
]  # fmt: skip


def raw_runs(con) -> dict[str, dict]:
    cur = con.execute("select * from raw.runs order by run_id")
    names = [d[0] for d in cur.description]
    rows = [dict(zip(names, r, strict=True)) for r in cur.fetchall()]
    return {row["run_id"]: row for row in rows}


def source_fields(row: dict) -> dict:
    return json.loads(row["source_fields"]) if row["source_fields"] else {}


def test_current_database_lands_every_column_where_the_mapping_says(con, tmp_path: Path):
    db = tb.database(tmp_path / "results.sqlite", RUNS)
    assert len(tb.columns(db)) == 31
    report = import_tml_bench(con, db)
    assert (report.runs.new, report.runs.rejected, report.unknown_fields) == (8, [], {})
    got = raw_runs(con)
    a1 = got["churn_a1"]
    expected = dict(
        created_at=dt.datetime(2026, 2, 1, 18, tzinfo=dt.UTC), task_id=tb.CHURN,
        agent_id=tb.GLM[1], model_id=tb.GLM[1], provider="chutes", agent_kind="command",
        harness="kilo", harness_version="0.10.2", status="success", metric_name="auc",
        metric_direction="maximize", score=0.92, score_hib=0.92, budget_seconds=600,
        instruction_profile="budget-aware", seed=7, wall_seconds=218.14,
        submission_path="runs/churn_a1/artifacts/submission.csv",
        submission_sha256=tb.sha("bytes predictions of churn_a1 churn_a1"),
        submission_normalized_sha256=tb.sha("predictions of churn_a1"),
        task_spec_sha256=tb.sha(f"spec {tb.CHURN}"), instructions_sha256=tb.sha("prompt churn_a1"),
        public_manifest_sha256=tb.sha(f"public {tb.CHURN}"), tmlbench_version="v1-dev",
        git_sha="c0ffee" * 6 + "beef", sandbox_backend="tml-bench", sandbox_isolated=False,
        source="tml-bench",
    )  # fmt: skip
    assert {k: a1[k] for k in expected} == expected
    assert source_fields(a1) == {
        "score_normalized": 0.92,
        "prompt_strategy": "profiled1",
        "mode": "pf_budgetaware",
        "normalized_submission_path": "runs/churn_a1/artifacts/submission.normalized.csv",
        "kilo_config_sha256": tb.sha("kilo config"),
        "git_dirty": False,
    }
    # attempts ordered by created_at within (agent, task, budget, profile): a2 09:00, a1, a3
    assert [got[r]["attempt_index"] for r in ("churn_a2", "churn_a1", "churn_a3")] == [0, 1, 2]
    # failed runs: no score; their metric is their competition's (the original leaves it empty)
    a3 = got["churn_a3"]
    assert (a3["status"], a3["score"], a3["metric_name"]) == ("timeout", None, "auc")
    assert got["traffic_a2"]["metric_direction"] == "minimize"
    t1 = got["traffic_a1"]
    assert (t1["score"], t1["score_hib"], source_fields(t1)["secondary_r2"]) == (31.5, -31.5, 0.61)
    assert got["churn_p1"]["status"] == "provider_error"
    assert got["churn_q1"]["budget_seconds"] == 240
    # NULL provenance, profile and seed are imported as NULL, not refused
    r1 = got["churn_r1"]
    assert (r1["task_spec_sha256"], r1["instructions_sha256"], r1["harness_version"]) == (
        None,
        None,
        None,
    )
    assert (r1["instruction_profile"], r1["seed"], r1["status"]) == (None, None, "runtime_error")
    agents = con.execute("select agent_id, provider, model_id, source from raw.agents order by 1")
    assert agents.fetchall() == [
        (tb.QWEN[1], "chutes", tb.QWEN[1], "tml-bench"),
        (tb.GLM[1], "chutes", tb.GLM[1], "tml-bench"),
    ]


def test_baselines_table_is_imported_with_null_provenance(con, tmp_path: Path):
    report = import_tml_bench(con, tb.database(tmp_path / "r.sqlite", RUNS[:1]))
    assert (report.baselines.new, report.baselines.rejected) == (2, [])
    rows = con.execute(
        "select task_id, baseline_type, metric_name, score, submission_sha256, task_spec_sha256, "
        "created_at from raw.baselines order by baseline_type"
    ).fetchall()
    created = dt.datetime(2026, 1, 25, 18, tzinfo=dt.UTC)
    assert rows == [
        (tb.CHURN, "constant", "auc", 0.5, None, None, created),
        (tb.CHURN, "hgb", "auc", 0.88, tb.sha("baseline hgb"), None, created),
    ]
    again = import_tml_bench(con, tmp_path / "r.sqlite")
    assert (again.baselines.new, again.baselines.unchanged) == (0, 2)


def test_first_generation_database_imports_with_what_it_has(con, tmp_path: Path):
    db = tb.database(tmp_path / "old.sqlite", RUNS[:3], generation="9e850f7")
    assert len(tb.columns(db)) == 13
    report = import_tml_bench(con, db)
    assert (report.runs.new, report.runs.rejected) == (3, [])
    assert "3 runs have no budget: kept, in no setting" in report.notes
    assert "3 runs name no model: agent 'unknown'" in report.notes
    a1 = raw_runs(con)["churn_a1"]
    assert (a1["agent_id"], a1["model_id"], a1["budget_seconds"], a1["score"]) == (
        "unknown",
        None,
        None,
        0.92,
    )
    assert (a1["submission_sha256"], a1["task_spec_sha256"], a1["git_sha"]) == (
        None,
        None,
        "c0ffee" * 6 + "beef",
    )
    assert source_fields(a1) == {
        "score_normalized": 0.92,
        "normalized_submission_path": "runs/churn_a1/artifacts/submission.normalized.csv",
        "git_dirty": False,
    }


def test_model_metadata_generation(con, tmp_path: Path):
    db = tb.database(tmp_path / "mid.sqlite", RUNS[:4], generation="b923c5e")
    assert "submission_sha256" not in tb.columns(db) and "model_id" in tb.columns(db)
    assert import_tml_bench(con, db).runs.new == 4
    q1 = raw_runs(con)["churn_q1"]
    assert (q1["agent_id"], q1["budget_seconds"], q1["instruction_profile"]) == (
        tb.QWEN[1],
        240,
        None,  # prompt_profile came later
    )
    assert source_fields(q1)["mode"] == "pf_budgetaware"


def test_database_migrated_from_the_first_generation(con, tmp_path: Path):
    """Old rows keep NULLs in the columns the migrations appended; new rows fill them."""
    db = tb.database(tmp_path / "migrated.sqlite", RUNS[:2], generation="9e850f7")
    tb.database(db, RUNS[2:], baselines=False)  # ensure_db migrates, then inserts
    cols = tb.columns(db)
    assert cols[:13] == tb.columns(tb.database(tmp_path / "x.sqlite", [], generation="9e850f7"))
    assert cols.index("runtime_seconds") > cols.index("git_dirty")  # appended, not in place
    report = import_tml_bench(con, db)
    assert (report.runs.new, report.runs.rejected) == (8, [])
    got = raw_runs(con)
    assert got["churn_a1"]["agent_id"] == "unknown" and got["churn_a1"]["budget_seconds"] is None
    assert got["churn_q1"]["agent_id"] == tb.QWEN[1] and got["churn_q1"]["budget_seconds"] == 240


def test_result_tree_matches_the_database_and_skips_workspaces(con, tmp_path: Path):
    tree = tb.result_tree(tmp_path / "runs", RUNS)
    # an agent's workspace may hold a result.json of its own making: never a result
    forged = tb.result("forged", f"2026-02-01T00:00:00{PT}", score=1.0)
    tb.result_tree(tmp_path / "runs" / "churn_a1" / "workspace", [forged])
    report = import_tml_bench(con, tree)
    assert (report.runs.new, report.runs.rejected) == (8, [])
    assert "forged" not in raw_runs(con)
    from_json = raw_runs(con)
    assert source_fields(from_json["churn_a1"])["notes.kilo"]["duration_seconds"] == 101.5
    # the same runs from the database are unchanged: one content hash for both formats
    db = tb.database(tmp_path / "results.sqlite", RUNS)
    again = import_tml_bench(con, db)
    assert (again.runs.new, again.runs.unchanged, again.runs.rejected) == (0, 8, [])

    other = tmp_path / "other.duckdb"
    from warehouse.db import apply_ddl, connect

    con2 = connect(other)
    apply_ddl(con2)
    import_tml_bench(con2, db)
    from_db = raw_runs(con2)
    con2.close()
    ignore = {"source_path", "source_fields", "loaded_at"}
    for run_id, row in from_db.items():
        assert {k: v for k, v in row.items() if k not in ignore} == {
            k: v for k, v in from_json[run_id].items() if k not in ignore
        }, run_id


def test_reimport_is_idempotent_and_a_changed_row_is_a_conflict(con, tmp_path: Path):
    db = tb.database(tmp_path / "r.sqlite", RUNS)
    import_tml_bench(con, db)
    again = import_tml_bench(con, db)
    assert (again.runs.new, again.runs.unchanged, again.rejected) == (0, 8, [])
    sql = sqlite3.connect(db)
    sql.execute("update runs set score_raw = 0.99 where run_id = 'churn_a1'")
    sql.execute("update baselines set score_raw = 0.7 where baseline_type = 'constant'")
    sql.commit()
    sql.close()
    changed = import_tml_bench(con, db)
    assert (changed.runs.unchanged, changed.baselines.unchanged) == (7, 1)
    messages = [m for _, m in changed.rejected]
    assert len(messages) == 2
    assert "run_id=churn_a1" in messages[0] and "immutable" in messages[0]
    assert "baselines.bank-customer-churn-ict-u-ai/constant" in messages[1]
    assert raw_runs(con)["churn_a1"]["score"] == 0.92
    assert con.execute(
        "select score from raw.baselines where baseline_type = 'constant'"
    ).fetchone() == (0.5,)


def test_unknown_columns_and_fields_are_kept_and_reported_once(con, tmp_path: Path):
    db = tb.database(tmp_path / "r.sqlite", RUNS[:3])
    sql = sqlite3.connect(db)
    sql.execute("alter table runs add column judge_notes text")
    sql.execute("update runs set judge_notes = 'looked fine' where run_id = 'churn_a1'")
    sql.commit()
    sql.close()
    report = import_tml_bench(con, db)
    assert (report.runs.new, report.unknown_fields) == (3, {"runs.judge_notes": 1})
    assert source_fields(raw_runs(con)["churn_a1"])["judge_notes"] == "looked fine"
    assert "judge_notes" not in source_fields(raw_runs(con)["churn_a2"])  # NULL: nothing kept

    tree = tb.result_tree(tmp_path / "runs", RUNS[3:4])
    path = tree / "churn_q1" / "result.json"
    doc = json.loads(path.read_text())
    doc["model"]["reasoning_effort"] = "high"
    doc["cost_usd"] = 0.42
    path.write_text(json.dumps(doc))
    report = import_tml_bench(con, tree)
    assert report.runs.new == 1
    assert report.unknown_fields == {"runs.cost_usd": 1, "runs.model.reasoning_effort": 1}
    kept = source_fields(raw_runs(con)["churn_q1"])
    assert (kept["cost_usd"], kept["model.reasoning_effort"]) == (0.42, "high")


def test_only_meaningless_rows_are_refused_each_by_name(con, tmp_path: Path):
    db = tb.database(tmp_path / "r.sqlite", RUNS[:2], baselines=False)
    sql = sqlite3.connect(db)
    insert = "insert into runs (run_id, created_at, competition_id, status) values (?, ?, ?, ?)"
    sql.execute(insert, (None, "2026-02-01T10:00:00+00:00", tb.CHURN, "timeout"))
    sql.execute(insert, ("no_comp", "2026-02-01T10:00:00+00:00", "", "timeout"))
    sql.execute(insert, ("odd_status", "2026-02-01T10:00:00+00:00", tb.CHURN, "exploded"))
    sql.execute(insert, ("no_time", "yesterday", tb.CHURN, "timeout"))
    sql.execute(insert, ("naive", "2026-02-01T10:00:00", tb.CHURN, "timeout"))
    sql.execute(insert, ("bare_minimum", "2026-02-01T10:00:00+00:00", "mystery-comp", "timeout"))
    sql.commit()
    sql.close()
    report = import_tml_bench(con, db)
    assert report.runs.new == 4  # 2 full runs, the naive timestamp (read as UTC), bare_minimum
    messages = sorted(m for _, m in report.rejected)
    assert len(messages) == 4
    assert any("runs row 3" in m and "no run_id" in m for m in messages)
    assert any("run_id=no_comp" in m and "no competition_id" in m for m in messages)
    assert any("run_id=odd_status" in m and "unknown status 'exploded'" in m for m in messages)
    assert any("run_id=no_time" in m and "not an ISO timestamp" in m for m in messages)
    got = raw_runs(con)
    assert got["naive"]["created_at"] == dt.datetime(2026, 2, 1, 10, tzinfo=dt.UTC)
    assert "1 created_at values had no UTC offset and were read as UTC" in report.notes
    # a failed run of a competition nobody names a metric for: kept, metric unknown
    assert (got["bare_minimum"]["metric_name"], got["bare_minimum"]["agent_id"]) == (
        None,
        "unknown",
    )


def test_success_without_a_usable_score_or_metric_is_refused(con, tmp_path: Path):
    bad = [
        tb.result("no_score", f"2026-02-01T10:00:00{PT}", score=None),
        tb.result("odd_metric", f"2026-02-01T11:00:00{PT}"),
    ]
    db = tb.database(tmp_path / "r.sqlite", [*bad, RUNS[0]], baselines=False)
    sql = sqlite3.connect(db)
    sql.execute("update runs set metric_name = 'quadratic_kappa' where run_id = 'odd_metric'")
    sql.execute("update runs set budget_time_seconds = 'ten' where run_id = 'churn_a1'")
    sql.commit()
    sql.close()
    report = import_tml_bench(con, db)
    assert report.runs.new == 0
    messages = " | ".join(m for _, m in report.rejected)
    assert "'no_score': status success but score_raw is None" in messages
    assert "quadratic_kappa" in messages and "runner/tasks/metrics.py" in messages
    assert "budget_time_seconds: 'ten' is not a number" in messages


def test_later_import_of_an_older_run_renumbers_attempts(con, tmp_path: Path):
    import_tml_bench(con, tb.database(tmp_path / "a.sqlite", RUNS[:3]))
    older = tb.result("churn_a0", f"2026-01-31T10:00:00{PT}", score=0.5)
    assert import_tml_bench(con, tb.database(tmp_path / "b.sqlite", [older])).runs.new
    got = raw_runs(con)
    order = [got[r]["attempt_index"] for r in ("churn_a0", "churn_a2", "churn_a1", "churn_a3")]
    assert order == [0, 1, 2, 3]


def test_imported_agents_do_not_replace_spec_agents(con, tmp_path: Path):
    con.execute(
        "insert into raw.agents (agent_id, kind, title, source, loaded_at) "
        f"values ('{tb.GLM[1]}', 'llm', 'from spec', 'spec', now())"
    )
    import_tml_bench(con, tb.database(tmp_path / "a.sqlite", RUNS[:2]))
    assert con.execute(
        "select source, title from raw.agents where agent_id = ?", [tb.GLM[1]]
    ).fetchone() == ("spec", "from spec")
    empty = tmp_path / "runs"
    empty.mkdir()
    assert load_runs(con, empty).new == 0  # the harness's own records load next to them


def test_not_a_tml_bench_source(con, tmp_path: Path):
    other = tmp_path / "other.sqlite"
    sqlite3.connect(other).execute("create table x (a)").connection.close()
    with pytest.raises(TmlbenchError, match="has no table 'runs'"):
        import_tml_bench(con, other)
    keyless = tmp_path / "keyless.sqlite"
    sqlite3.connect(keyless).execute("create table runs (run_id, score_raw)").connection.close()
    with pytest.raises(TmlbenchError, match="no column created_at, competition_id, status"):
        import_tml_bench(con, keyless)
    with pytest.raises(TmlbenchError, match="no such file"):
        import_tml_bench(con, tmp_path / "nope.sqlite")
    (tmp_path / "empty").mkdir()
    with pytest.raises(TmlbenchError, match=r"no result\.json files"):
        import_tml_bench(con, tmp_path / "empty")
    assert con.execute("select count(*) from raw.runs").fetchone() == (0,)


@pytest.mark.parametrize("generation", GENERATIONS)
def test_every_generation_imports_with_what_it_has(con, tmp_path: Path, generation: str):
    """Each column the generation has lands where the mapping says; what it lacks stays NULL."""
    db = tb.database(tmp_path / "r.sqlite", RUNS, generation=generation)
    has = {c.name for c in run_columns(generation)}
    assert set(tb.columns(db)) == has
    report = import_tml_bench(con, db)
    assert (report.runs.new, report.runs.rejected) == (len(RUNS), [])
    assert report.baselines.new == (2 if "baselines" in tables(db) else 0)
    q1 = raw_runs(con)["churn_q1"]
    # the original's column → (what it became, its value when written, when the column is missing)
    landed = {
        "budget_time_seconds": (q1["budget_seconds"], 240, None),
        "model_id": (q1["agent_id"], tb.QWEN[1], "unknown"),
        "submission_sha256": (q1["submission_sha256"], tb.sha("bytes predictions of churn_q1 churn_q1"), None),
        "spec_sha256": (q1["task_spec_sha256"], tb.sha(f"spec {tb.CHURN}"), None),
        "prompt_profile": (q1["instruction_profile"], "budget-aware", None),
        "seed": (q1["seed"], 7, None),
        "prompt_strategy": (source_fields(q1).get("prompt_strategy"), "profiled1", None),
    }  # fmt: skip
    for column, (got, written, missing) in landed.items():
        assert got == (written if column in has else missing), column


def tables(db: Path) -> set[str]:
    con = sqlite3.connect(db)
    try:
        return {
            row[0] for row in con.execute("select name from sqlite_master where type = 'table'")
        }
    finally:
        con.close()


def test_marts_build_on_imported_runs_of_every_generation(tmp_path: Path):
    """dbt's data tests accept what the original did not record; the medians are the rules'."""
    from tools.dbt_warehouse import SCENARIO_EXCLUDE
    from warehouse.db import apply_ddl, connect
    from warehouse.marts import build_marts

    scores = {tb.GLM: [0.91, 0.93, 0.90, 0.95, 0.92, 0.10], tb.QWEN: [0.85, 0.86, 0.84, 0.87, 0.88]}
    runs = [
        tb.result(f"{model[1][:4]}_{i}", f"2026-02-01T{10 + i:02d}:00:00{PT}", model=model, score=s)
        for model, values in scores.items()
        for i, s in enumerate(values)
    ]
    runs.append(tb.result("fail_1", f"2026-02-01T09:00:00{PT}", status="timeout"))
    old = tb.database(tmp_path / "old.sqlite", [RUNS[0]], generation="9e850f7")
    path = tmp_path / "warehouse.duckdb"
    con = connect(path)
    apply_ddl(con)
    report = import_tml_bench(con, tb.database(tmp_path / "r.sqlite", runs), old)
    con.close()
    assert (report.runs.new, report.rejected) == (13, [])

    build_marts(path, artifacts_dir=tmp_path / "dbt", exclude=SCENARIO_EXCLUDE, run=run_in_process)
    con = connect(path, read_only=True)
    try:
        medians = dict(
            con.execute(
                "select agent_id, median_score from marts.setting_scores order by 1"
            ).fetchall()
        )
        budgets = con.execute("select distinct budget_seconds from marts.setting_scores").fetchall()
        board = con.execute(
            "select agent_id, rank from marts.leaderboard where variant = 'best_budget'"
        ).fetchall()
    finally:
        con.close()
    # first five successes by created_at: GLM's late 0.10 does not count
    assert medians == {tb.QWEN[1]: 0.86, tb.GLM[1]: 0.92}
    assert budgets == [(600,)]  # the budget-less first-generation run is in no setting
    assert dict(board) == {tb.GLM[1]: 1, tb.QWEN[1]: 2}
