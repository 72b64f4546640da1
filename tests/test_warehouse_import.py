"""Importing the original TML-bench's results (SQLite database and result.json files)."""

from __future__ import annotations

import datetime as dt
import json
import sqlite3
from pathlib import Path

import pytest

from runner.errors import TmlbenchError
from runner.records import RECORD_SCHEMA_VERSION
from warehouse.importers.tml_bench import KNOWN, import_tml_bench
from warehouse.loader import load_runs

SQL_COLUMNS = KNOWN


def row(run_id, created_at, model="gpt-x", comp="comp-a", status="success", score=0.8, **extra):
    base = dict(
        run_id=run_id,
        created_at=created_at,
        competition_id=comp,
        status=status,
        metric_name="auc",
        score_raw=score,
        score_normalized=0.7,
        runtime_seconds=123.5,
        budget_time_seconds=600,
        seed=7,
        prompt_profile="default",
        prompt_strategy="plan",
        provider="openai",
        model_id=model,
        temperature=0.2,
        max_tokens=4096,
        spec_sha256="s" * 64,
        prompt_sha256="p" * 64,
        public_manifest_sha256="m" * 64,
        kilo_version="0.9.1",
        benchmark_version="1.4.0",
        git_sha="g" * 40,
    )
    base.update(extra)
    return base


ROWS = [
    row("r3", "2025-05-01T12:00:00+02:00"),  # 10:00 UTC: second in its setting
    row("r1", "2025-05-01T09:00:00+00:00", score=0.75),
    row("r2", "2025-05-01T11:00:00+00:00", status="timeout", score=None),
    row("r4", "2025-05-01T08:00:00+00:00", comp="comp-b", metric_name="rmse", score=2.5),
    row(
        "r5",
        "2025-05-02T08:00:00+00:00",
        model="claude-y",
        provider="anthropic",
        status="invalid_submission",
        score=0.1,
    ),
]


def make_sqlite(path: Path, rows, columns=SQL_COLUMNS) -> Path:
    con = sqlite3.connect(path)
    con.execute(f"create table runs ({', '.join(columns)})")
    con.executemany(
        f"insert into runs values ({', '.join('?' for _ in columns)})",
        [[r.get(c) for c in columns] for r in rows],
    )
    con.commit()
    con.close()
    return path


def to_result_json(r: dict) -> dict:
    return {
        **{k: r[k] for k in (
            "run_id", "created_at", "competition_id", "status", "metric_name", "score_raw",
            "score_normalized", "runtime_seconds", "seed", "prompt_profile", "prompt_strategy")},
        "model": {k: r[k] for k in ("provider", "model_id", "temperature", "max_tokens")},
        "budget": {"time_seconds": r["budget_time_seconds"]},
        "versions": {k: r[k] for k in ("kilo_version", "benchmark_version", "git_sha")},
        "provenance": {k: r[k] for k in ("spec_sha256", "prompt_sha256", "public_manifest_sha256")},
    }  # fmt: skip


def make_json_tree(root: Path, rows) -> Path:
    for r in rows:
        folder = root / r["competition_id"] / r["run_id"]
        folder.mkdir(parents=True)
        (folder / "result.json").write_text(json.dumps(to_result_json(r)))
    return root


def runs(con) -> dict[str, dict]:
    cur = con.execute("select * from raw.runs order by run_id")
    names = [d[0] for d in cur.description]
    return {r[0]: dict(zip(names, r, strict=True)) for r in cur.fetchall()}


def test_import_from_sqlite_maps_every_field(con, tmp_path: Path):
    db = make_sqlite(tmp_path / "results.sqlite", ROWS)
    report = import_tml_bench(con, db)
    assert (report.new, report.unchanged, report.rejected) == (5, 0, [])
    got = runs(con)
    r3 = got["r3"]
    assert r3["created_at"] == dt.datetime(2025, 5, 1, 10, tzinfo=dt.UTC)
    expected = dict(
        agent_id="gpt-x", agent_kind="command", harness="kilo", harness_version="0.9.1",
        provider="openai", model_id="gpt-x", task_id="comp-a", metric_name="auc",
        metric_direction="maximize", budget_seconds=600, instruction_profile="default",
        attempt_index=1, seed=7, sandbox_backend="tml-bench", status="success", score=0.8,
        score_hib=0.8, wall_seconds=123.5, task_spec_sha256="s" * 64,
        instructions_sha256="p" * 64, public_manifest_sha256="m" * 64, tmlbench_version="1.4.0",
        git_sha="g" * 40, source="tml-bench", schema_version=RECORD_SCHEMA_VERSION,
    )  # fmt: skip
    assert {k: r3[k] for k in expected} == expected
    assert str(db) in r3["source_path"]
    # attempt order within (agent, task, budget, profile) by created_at: r1 09:00, r3 10:00, r2 11:00
    assert [got[r]["attempt_index"] for r in ("r1", "r3", "r2")] == [0, 1, 2]
    assert got["r2"]["score"] is None and got["r2"]["status"] == "timeout"
    assert got["r4"]["metric_direction"] == "minimize" and got["r4"]["score_hib"] == -2.5
    assert got["r5"]["score"] is None and got["r5"]["score_hib"] is None  # only success scores
    agents = con.execute(
        "select agent_id, kind, provider, model_id, source from raw.agents order by 1"
    )
    assert agents.fetchall() == [
        ("claude-y", "command", "anthropic", "claude-y", "tml-bench"),
        ("gpt-x", "command", "openai", "gpt-x", "tml-bench"),
    ]


def test_reimport_is_idempotent_and_json_matches_sqlite(con, tmp_path: Path):
    db = make_sqlite(tmp_path / "results.db", ROWS)
    tree = make_json_tree(tmp_path / "results", ROWS)
    assert import_tml_bench(con, db).new == 5
    again = import_tml_bench(con, db)
    assert (again.new, again.unchanged, again.rejected) == (0, 5, [])
    from_json = import_tml_bench(con, tree)  # same runs, other format: same content hash
    assert (from_json.new, from_json.unchanged, from_json.rejected) == (0, 5, [])
    assert con.execute("select count(*) from raw.runs").fetchone()[0] == 5
    assert con.execute("select count(*) from raw.agents").fetchone()[0] == 2


def test_import_from_json_folder(con, tmp_path: Path):
    tree = make_json_tree(tmp_path / "results", ROWS)
    (tmp_path / "results" / "broken").mkdir()
    (tmp_path / "results" / "broken" / "result.json").write_text("{oops")
    report = import_tml_bench(con, tree)
    assert report.new == 5
    [(path, message)] = report.rejected
    assert path.endswith("broken/result.json") and path in message
    got = runs(con)
    assert got["r4"]["task_id"] == "comp-b" and got["r4"]["budget_seconds"] == 600
    assert got["r3"]["harness_version"] == "0.9.1" and got["r3"]["task_spec_sha256"] == "s" * 64


def test_changed_run_is_rejected_on_reimport(con, tmp_path: Path):
    import_tml_bench(con, make_sqlite(tmp_path / "a.sqlite", ROWS))
    changed = [dict(r, score_raw=0.99) if r["run_id"] == "r1" else r for r in ROWS]
    report = import_tml_bench(con, make_sqlite(tmp_path / "b.sqlite", changed))
    assert report.new == 0 and report.unchanged == 4
    [(_, message)] = report.rejected
    assert message.startswith("records are immutable") and "a.sqlite" in message
    assert runs(con)["r1"]["score"] == 0.75


def test_missing_and_unknown_sqlite_columns_are_named(con, tmp_path: Path):
    columns = [c for c in SQL_COLUMNS if c not in ("seed", "kilo_version")] + ["reasoning_effort"]
    db = make_sqlite(tmp_path / "odd.sqlite", ROWS, columns)
    with pytest.raises(TmlbenchError) as err:
        import_tml_bench(con, db)
    message = str(err.value)
    assert "missing required column(s) seed, kilo_version" in message
    assert "unknown column(s) reasoning_effort" in message
    assert con.execute("select count(*) from raw.runs").fetchone()[0] == 0


def test_optional_columns_may_be_absent(con, tmp_path: Path):
    columns = [c for c in SQL_COLUMNS if c not in ("temperature", "git_sha")]
    assert import_tml_bench(con, make_sqlite(tmp_path / "lean.db", ROWS, columns)).new == 5
    assert runs(con)["r1"]["git_sha"] is None


def test_missing_and_unknown_json_fields_are_named(con, tmp_path: Path):
    tree = make_json_tree(tmp_path / "results", ROWS[:2])
    path = tree / "comp-a" / "r3" / "result.json"
    doc = json.loads(path.read_text())
    del doc["budget"]["time_seconds"]
    doc["model"]["reasoning"] = "high"
    doc["extra"] = 1
    path.write_text(json.dumps(doc))
    report = import_tml_bench(con, tree)
    assert report.new == 1
    [(_, message)] = report.rejected
    assert "unknown field(s) model.reasoning, extra" in message
    doc["model"].pop("reasoning")
    doc.pop("extra")
    path.write_text(json.dumps(doc))
    [(_, message)] = import_tml_bench(con, tree).rejected
    assert "missing required field(s) budget.time_seconds" in message


def test_unknown_status_is_rejected_per_row(con, tmp_path: Path):
    rows = [*ROWS, row("r9", "2025-05-03T00:00:00+00:00", status="exploded")]
    report = import_tml_bench(con, make_sqlite(tmp_path / "s.sqlite", rows))
    assert report.new == 5
    [(_, message)] = report.rejected
    assert "'r9'" in message and "unknown status 'exploded'" in message


def test_bad_rows_are_rejected_with_reasons(con, tmp_path: Path):
    rows = [
        row("n1", "2025-05-03T00:00:00"),  # no offset
        row("n2", "yesterday"),
        row("n3", "2025-05-03T00:00:00+00:00", score=None),  # success without a score
        row("n4", "2025-05-03T00:00:00+00:00", model_id=None),
    ]
    report = import_tml_bench(con, make_sqlite(tmp_path / "bad.sqlite", rows))
    assert report.new == 0
    messages = " | ".join(m for _, m in report.rejected)
    assert "no UTC offset" in messages and "not an ISO timestamp" in messages
    assert "score_raw is empty" in messages and "model_id" in messages


def test_unknown_metric_is_a_clear_error(con, tmp_path: Path):
    rows = [*ROWS, row("m1", "2025-05-03T00:00:00+00:00", metric_name="quadratic_kappa")]
    with pytest.raises(TmlbenchError, match=r"unknown metric.*quadratic_kappa"):
        import_tml_bench(con, make_sqlite(tmp_path / "m.sqlite", rows))
    assert con.execute("select count(*) from raw.runs").fetchone()[0] == 0


def test_later_import_of_an_older_run_renumbers_attempts(con, tmp_path: Path):
    import_tml_bench(con, make_sqlite(tmp_path / "a.sqlite", ROWS))
    older = row("r0", "2025-04-30T00:00:00+00:00")
    assert import_tml_bench(con, make_sqlite(tmp_path / "b.sqlite", [older])).new == 1
    got = runs(con)
    assert [got[r]["attempt_index"] for r in ("r0", "r1", "r3", "r2")] == [0, 1, 2, 3]


def test_imported_agents_do_not_replace_spec_agents_and_runs_do_not_clash(con, tmp_path: Path):
    con.execute(
        "insert into raw.agents (agent_id, kind, title, source, loaded_at) "
        "values ('gpt-x', 'llm', 'from spec', 'spec', now())"
    )
    import_tml_bench(con, make_sqlite(tmp_path / "a.sqlite", ROWS))
    assert con.execute(
        "select source, title from raw.agents where agent_id = 'gpt-x'"
    ).fetchone() == (
        "spec",
        "from spec",
    )
    # the harness's own records load next to imported runs
    empty = tmp_path / "runs"
    empty.mkdir()
    assert load_runs(con, empty).new == 0


def test_not_a_tml_bench_database(con, tmp_path: Path):
    other = tmp_path / "other.sqlite"
    sqlite3.connect(other).execute("create table x (a)").connection.close()
    with pytest.raises(TmlbenchError, match="no readable table 'runs'"):
        import_tml_bench(con, other)
    with pytest.raises(TmlbenchError, match="no such file"):
        import_tml_bench(con, tmp_path / "nope.sqlite")
