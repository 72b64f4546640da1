"""The warehouse loader: idempotent, immutable records, bad files rejected, one transaction."""

from __future__ import annotations

import datetime as dt
import hashlib
from pathlib import Path

import pytest

from runner.attempts.records import RunRecord
from runner.config import REPO_ROOT, Paths
from runner.errors import TmlbenchError
from runner.specs.registry import list_agents
from tests.support.run_folders import write, write_raw
from tools.records import make_record as rec
from warehouse import loader, parse
from warehouse.db import apply_ddl, connect, warehouse_path
from warehouse.loader import Candidate, LoadReport, SpecReport, ingest, load_runs, load_specs


def count(con, table="raw.runs") -> int:
    return con.execute(f"select count(*) from {table}").fetchone()[0]


def test_warehouse_path_from_env(tmp_path: Path):
    assert warehouse_path({}) == REPO_ROOT / "warehouse" / "tmlbench.duckdb"
    assert warehouse_path({"TMLBENCH_WAREHOUSE": str(tmp_path / "x.duckdb")}) == (
        tmp_path / "x.duckdb"
    )


def test_apply_ddl_is_idempotent(con):
    apply_ddl(con)
    apply_ddl(con)
    tables = {r[0] for r in con.execute("select table_name from duckdb_tables()").fetchall()}
    assert {"runs", "tasks", "agents"} <= tables


def test_a_warehouse_from_record_schema_1_gains_the_usage_columns(con, tmp_path: Path):
    usage = ["requests", "retries", "steps", "provider_seconds", "tool_seconds"]
    usage += ["egress_requests", "egress_denied", "egress_bytes_up", "egress_bytes_down"]
    usage += ["egress_denied_hosts"]
    for name in usage:
        con.execute(f"alter table raw.runs drop column {name}")
    write(tmp_path / "runs", rec(minute=1, schema_version=1))
    apply_ddl(con)
    assert load_runs(con, tmp_path / "runs").new == 1
    names = {r[0] for r in con.execute("describe raw.runs").fetchall()}
    assert set(usage) <= names
    assert con.execute("select schema_version, requests from raw.runs").fetchall() == [(1, None)]


def test_load_twice_second_time_all_unchanged(con, tmp_path: Path):
    runs = tmp_path / "runs"
    for minute in range(5):
        write(runs, rec(minute=minute), sub="suite-a")
    write(runs, rec(agent="b", status="timeout"))
    first = load_runs(con, runs)
    assert first == LoadReport(new=6, unchanged=0, rejected=[])
    second = load_runs(con, runs)
    assert second == LoadReport(new=0, unchanged=6, rejected=[])
    assert count(con) == 6


def test_every_field_lands_in_its_column(con, tmp_path: Path):
    full = rec(
        created_at=dt.datetime(
            2026, 3, 4, 5, 6, 7, 891011, tzinfo=dt.timezone(dt.timedelta(hours=2))
        ),
        finished_at=dt.datetime(2026, 3, 4, 3, 16, 7, tzinfo=dt.UTC),
        suite_id="suite-x",
        agent_kind="llm",
        provider="openai",
        model_id="gpt-x",
        metric_name="rmse",
        metric_direction="minimize",
        score=1.25,
        score_hib=-1.25,
        seed=2**40,
        cpuset="0-1",
        memory_limit_bytes=4 * 2**30,
        pids_limit=256,
        disk_limit_bytes=2**31,
        validation_code="ok",
        validation_message="fine",
        error_message="none",
        local_validation_score=1.1,
        wall_seconds=12.5,
        cpu_seconds=11.0,
        peak_memory_bytes=2**29,
        exit_code=0,
        limit_exceeded="memory",
        tokens_in=1000,
        tokens_out=200,
        cost_usd=0.0123,
        requests=14,
        retries=2,
        steps=12,
        provider_seconds=40.5,
        tool_seconds=70.25,
        egress_requests=9,
        egress_denied=3,
        egress_denied_hosts={"models.dev:443": 2, "us.i.posthog.com:443": 1},
        egress_bytes_up=12345,
        egress_bytes_down=2**33,
        public_manifest_sha256="m" * 64,
        instructions_sha256="i" * 64,
        git_sha="g" * 40,
        stdout_path="stdout.log",
        stderr_path="stderr.log",
        transcript_path="transcript.jsonl",
        submission_path="workspace/submission.csv",
        sandbox_isolated=True,
    )
    path = write(tmp_path / "runs", full)
    assert load_runs(con, tmp_path / "runs").new == 1
    cur = con.execute("select * from raw.runs")
    row = dict(zip([d[0] for d in cur.description], cur.fetchone(), strict=True))
    for name, value in full.model_dump().items():
        got = row[name]
        if isinstance(value, dt.datetime):
            assert got == value and got.utcoffset() is not None, name  # same instant
        else:
            assert got == value and type(got) is type(value), name
    assert row["created_at"].astimezone(dt.UTC) == dt.datetime(
        2026, 3, 4, 3, 6, 7, 891011, tzinfo=dt.UTC
    )
    assert row["source"] == "tmlbench"
    assert row["source_path"] == str(path.resolve())
    assert row["record_sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
    assert row["loaded_at"] is not None
    assert set(row) == set(RunRecord.model_fields) | set(parse.BOOKKEEPING)


def test_malformed_records_are_rejected_by_name_and_the_rest_load(con, tmp_path: Path):
    runs = tmp_path / "runs"
    write(runs, rec(minute=0))
    write(runs, rec(minute=1))
    good = rec(minute=2).model_dump(mode="json")
    bad_json = write_raw(runs, "bad-json", "{not json")
    bad_status = write_raw(runs, "bad-status", dict(good, run_id="s", status="crashed"))
    missing = write_raw(
        runs, "missing-field", {k: v for k, v in good.items() if k != "agent_id"} | {"run_id": "m"}
    )
    extra = write_raw(runs, "extra-field", dict(good, run_id="e", surprise=1))
    bad_budget = write_raw(runs, "zero-budget", dict(good, run_id="z", budget_seconds=0))
    scored_timeout = write_raw(
        runs, "scored-timeout", dict(good, run_id="st", status="timeout", score=0.1)
    )
    too_big = write_raw(runs, "too-big", dict(good, run_id="big", pids_limit=2**40))
    report = load_runs(con, runs)
    assert report.new == 2 and report.unchanged == 0
    messages = dict(report.rejected)
    assert set(messages) == {
        str(p.resolve())
        for p in (bad_json, bad_status, missing, extra, bad_budget, scored_timeout, too_big)
    }
    by_name = {Path(p).parent.name: m for p, m in messages.items()}
    assert "invalid json" in by_name["bad-json"].lower()
    assert "status:" in by_name["bad-status"]
    assert "agent_id" in by_name["missing-field"]
    assert "surprise" in by_name["extra-field"]
    assert "budget_seconds" in by_name["zero-budget"]
    assert "must not carry a score" in by_name["scored-timeout"]
    assert "pids_limit" in by_name["too-big"]
    for path, message in report.rejected:
        assert path in message
    assert count(con) == 2


def test_changed_content_for_a_loaded_run_id_is_rejected(con, tmp_path: Path):
    first_dir, second_dir = tmp_path / "runs1", tmp_path / "runs2"
    original = write(first_dir, rec(score=0.5))
    assert load_runs(con, first_dir).new == 1
    changed = write(second_dir, rec(score=0.9))
    report = load_runs(con, second_dir)
    assert report.new == 0 and report.unchanged == 0
    [(path, message)] = report.rejected
    assert path == str(changed.resolve())
    assert message.startswith("records are immutable; ")
    assert str(original.resolve()) in message and str(changed.resolve()) in message
    assert con.execute("select score from raw.runs").fetchone()[0] == 0.5


def test_same_run_id_in_three_folders_is_three_runs(con, tmp_path: Path):
    # a run is (its folder below the runs root, its id): suites' folders may repeat run ids
    runs = tmp_path / "runs"
    write(runs, rec(score=0.5), sub="a")
    write(runs, rec(score=0.5), sub="b")  # byte-identical copy
    write(runs, rec(score=0.7), sub="c/d")  # same run_id, other content
    report = load_runs(con, runs)
    assert (report.new, report.unchanged, report.rejected) == (3, 0, [])
    spaces = con.execute("select run_space from raw.runs order by 1").fetchall()
    assert spaces == [("a",), ("b",), ("c/d",)]


def test_a_run_repeated_in_a_later_batch_is_judged_against_the_earlier_ones(
    con, tmp_path: Path, monkeypatch
):
    # batches of two files: each repeat of run x comes in a batch after the one that inserted it
    monkeypatch.setattr(loader, "BULK_BATCH", 2)
    runs = tmp_path / "runs"
    x = rec(score=0.5).model_dump(mode="json")
    first = write_raw(runs, "r1", x)
    write_raw(runs, "r2", rec(minute=1).model_dump(mode="json"))
    write_raw(runs, "r3", x)  # the same content again: unchanged
    changed = write_raw(runs, "r4", dict(x, score=0.9))  # other content: a conflict
    write_raw(runs, "r5", rec(minute=2).model_dump(mode="json"))
    report = load_runs(con, runs)
    assert (report.new, report.unchanged) == (3, 1)
    [(path, message)] = report.rejected
    assert path == str(changed.resolve())
    assert message == (
        f"records are immutable; {path} differs from the loaded one "
        f"(loaded from {first.resolve()}, run_id {x['run_id']})"
    )
    assert con.execute(
        "select score from raw.runs where run_id = $id", {"id": x["run_id"]}
    ).fetchall() == [(0.5,)]


def test_copies_of_a_loaded_run_are_judged_against_the_loaded_one_not_each_other(
    con, tmp_path: Path
):
    runs = tmp_path / "runs"
    x = rec(score=0.5).model_dump(mode="json")
    loaded = write_raw(runs, "r1", x)
    assert load_runs(con, runs).new == 1
    changed = write_raw(runs, "q1", dict(x, score=0.9))  # first by path: a conflict
    write_raw(runs, "q2", x)  # the loaded content, after a conflicting copy: unchanged
    report = load_runs(con, runs)
    assert (report.new, report.unchanged) == (0, 2)
    assert report.rejected == [
        (
            str(changed.resolve()),
            f"records are immutable; {changed.resolve()} differs from the loaded one "
            f"(loaded from {loaded.resolve()}, run_id {x['run_id']})",
        )
    ]


def test_same_run_twice_in_one_import_is_a_conflict(con):
    # an import's runs share one space (its source): the same run id twice must agree
    first = rec(score=0.5)
    candidates = [
        Candidate(first, "db#1", "sha-1"),
        Candidate(first, "db#2", "sha-1"),  # the same content again
        Candidate(rec(score=0.7), "db#3", "sha-2"),
    ]
    report = ingest(con, candidates, source="tml-bench")
    assert (report.new, report.unchanged, len(report.rejected)) == (1, 1, 1)
    assert "records are immutable" in report.rejected[0][1]
    assert count(con) == 1


def test_a_failing_insert_rolls_back_everything(con, tmp_path: Path, monkeypatch):
    runs = tmp_path / "runs"
    write(runs, rec(minute=0))
    assert load_runs(con, runs).new == 1
    for minute in range(1, 7):
        write(runs, rec(minute=minute))

    real_insert = loader._insert_runs

    def half_then_fail(con_, table):
        real_insert(con_, table.slice(0, table.num_rows // 2))  # some rows really go in...
        assert con_.execute("select count(*) from raw.runs").fetchone()[0] == 4
        raise RuntimeError("disk full")  # ...then the load breaks

    monkeypatch.setattr(loader, "_insert_runs", half_then_fail)
    with pytest.raises(RuntimeError, match="disk full"):
        load_runs(con, runs)
    assert count(con) == 1
    monkeypatch.undo()
    assert load_runs(con, runs).new == 6
    assert count(con) == 7


def test_a_database_error_is_rolled_back_and_reported(con, tmp_path: Path, monkeypatch):
    runs = tmp_path / "runs"
    for minute in range(3):
        write(runs, rec(minute=minute))

    def broken(con_, table):
        con_.register("t", table)
        con_.execute("insert into raw.runs by name select * from t")
        con_.execute("insert into raw.runs by name select * from t")  # duplicate keys

    monkeypatch.setattr(loader, "_insert_runs", broken)
    with pytest.raises(TmlbenchError, match="rolled back"):
        load_runs(con, runs)
    assert count(con) == 0


def test_record_inside_a_workspace_is_not_loaded(con, tmp_path: Path):
    runs = tmp_path / "runs"
    real = write(runs, rec(minute=0))
    planted = real.parent / "workspace" / "sub" / "record.json"
    planted.parent.mkdir(parents=True)
    planted.write_text(rec(minute=9, agent="evil").model_dump_json())
    # a run still in progress: only a workspace, no record yet
    running = runs / "in-progress" / "workspace"
    running.mkdir(parents=True)
    (running / "record.json").write_text(rec(minute=8, agent="evil").model_dump_json())
    report = load_runs(con, runs)
    assert report == LoadReport(new=1, unchanged=0, rejected=[])
    assert con.execute("select distinct agent_id from raw.runs").fetchall() == [("a",)]


def test_missing_runs_dir_is_a_clear_error(con, tmp_path: Path):
    with pytest.raises(TmlbenchError, match="does not exist"):
        load_runs(con, tmp_path / "nope")


def test_load_specs_replaces_specs_and_keeps_imported_agents(con, tmp_path: Path):
    paths = Paths.from_env({})
    con.execute(
        "insert into raw.agents (agent_id, kind, source, loaded_at) values "
        "('gpt-imported', 'command', 'tml-bench', now()), "
        "('baseline-gbm', 'command', 'tml-bench', now()), "
        "('old-spec-agent', 'baseline', 'spec', now())"
    )
    specs = list_agents(paths.agents_dir).specs
    report = load_specs(con, paths)
    suites = sorted(p.stem for p in paths.suites_dir.glob("*.yaml"))
    assert report == SpecReport(tasks=4, agents=len(specs), suites=len(suites), skipped=[])
    assert count(con, "raw.tasks") == 4
    ceilings = dict(
        con.execute("select suite_id, harness_error_ceiling from raw.suites").fetchall()
    )
    assert sorted(ceilings) == suites and ceilings["demo"] == 3  # the default
    agents = dict(con.execute("select agent_id, source from raw.agents").fetchall())
    assert agents == {a.id: "spec" for a in specs} | {"gpt-imported": "tml-bench"}
    assert {"baseline-gbm", "chutes-qwen3-coder-480b", "kilo-qwen3-coder-480b"} <= set(agents)
    prices = con.execute(
        "select agent_id, price_in_per_mtok_usd, price_out_per_mtok_usd from raw.agents "
        "where price_in_per_mtok_usd is not null"
    ).fetchall()
    priced = {
        a.id: a.llm.prices if a.llm else a.gateway.prices if a.gateway else None for a in specs
    }
    assert sorted(prices) == sorted(
        (agent_id, p.input_per_mtok, p.output_per_mtok) for agent_id, p in priced.items() if p
    )
    assert ("claude-code-sonnet-4-5", 3.0, 15.0) in prices  # a CLI's prices, from its gateway
    task = con.execute(
        "select metric_name, metric_direction, spec_sha256, start_date from raw.tasks "
        "where task_id = 'playground-series-s5e10'"
    ).fetchone()
    assert task[0] and task[1] in ("maximize", "minimize") and len(task[2]) == 64
    assert load_specs(con, paths) == report  # again: same rows, no duplicate keys
    assert count(con, "raw.agents") == len(specs) + 1  # the imported agent is kept


def test_a_bad_spec_file_is_skipped_and_keeps_what_its_last_valid_load_left(con, tmp_path):
    """Every valid spec loads whatever one file says; a file that turns invalid keeps the rows
    it had (its runs stay in the marts); a file that is gone takes its rows with it."""
    import shutil

    import yaml

    for name in ("agents", "tasks", "suites"):
        shutil.copytree(REPO_ROOT / name, tmp_path / name)
    paths = Paths(
        tasks_dir=tmp_path / "tasks",
        agents_dir=tmp_path / "agents",
        suites_dir=tmp_path / "suites",
        data_dir=tmp_path / "data",
        runs_dir=tmp_path / "runs",
    )
    first = load_specs(con, paths)
    assert first.skipped == []

    def rows(table: str) -> list[tuple]:
        dated = table != "suite_settings"
        columns = "* exclude (loaded_at)" if dated else "*"
        return con.execute(f"select {columns} from raw.{table} order by all").fetchall()

    before = {table: rows(table) for table in ("tasks", "agents", "suites", "suite_settings")}

    def edit(path: Path, **changes) -> Path:
        path.write_text(yaml.safe_dump(yaml.safe_load(path.read_text()) | changes))
        return path

    agent = edit(paths.agents_dir / "baseline-gbm.yaml", kind="wizard")
    task = edit(paths.tasks_dir / "playground-series-s6e1" / "task.yaml", task_type="ranking")
    suite = edit(paths.suites_dir / "demo.yaml", attempts=0)
    (paths.agents_dir / "baseline-linear.yaml").unlink()  # gone: its row goes
    report = load_specs(con, paths)
    assert (report.tasks, report.agents, report.suites) == (
        first.tasks - 1,
        first.agents - 2,
        first.suites - 1,
    )
    assert [(p.path, p.spec_id) for p in report.skipped] == [
        (task, "playground-series-s6e1"),
        (agent, "baseline-gbm"),
        (suite, "demo"),
    ]
    assert report.skipped[1].message.startswith(f"{agent}: invalid AgentSpec: kind")
    after = {table: rows(table) for table in before}
    assert after["tasks"] == before["tasks"] and after["suites"] == before["suites"]
    assert after["suite_settings"] == before["suite_settings"]
    assert after["agents"] == [r for r in before["agents"] if r[0] != "baseline-linear"]


def test_locked_warehouse_names_the_path(tmp_path: Path):
    import subprocess
    import sys

    db = tmp_path / "locked.duckdb"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            f"import duckdb, sys; c = duckdb.connect({str(db)!r}); print('ready', flush=True); "
            "sys.stdin.read()",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "ready"
        with pytest.raises(TmlbenchError) as err:
            connect(db)
        message = str(err.value)
        assert str(db) in message and "locked by another process" in message
        assert f"PID {holder.pid}" in message
    finally:
        holder.stdin.close()
        holder.wait(timeout=10)


def test_read_only_connect_to_a_missing_file(tmp_path: Path):
    with pytest.raises(TmlbenchError, match="tmlbench warehouse load"):
        connect(tmp_path / "missing.duckdb", read_only=True)


def test_a_warehouse_from_before_run_spaces_is_keyed_by_space_and_id(tmp_path: Path):
    # raw.runs keyed by run_id alone (what warehouses before run spaces have) is rebuilt in place
    path = tmp_path / "old.duckdb"
    runs = tmp_path / "runs"
    write(runs, rec(minute=0), sub="demo")
    with connect(path) as con:
        load_runs(con, runs)
        con.execute(
            "create table raw.runs_old as select * exclude (run_space) from raw.runs;"
            "insert into raw.runs_old by name select * exclude (run_space) "
            "replace ('tml-bench' as source, 'results.db#r9' as source_path, 'r9' as run_id) "
            "from raw.runs;"
            "drop table raw.runs; alter table raw.runs_old rename to runs"
        )
    with connect(path) as con:
        apply_ddl(con)
        rows = con.execute("select run_space, source from raw.runs order by 1").fetchall()
        assert rows == [("demo", "tmlbench"), ("tml-bench", "tml-bench")]
        write(runs, rec(minute=0), sub="tml-v1")  # the same run id in another suite's folder
        report = load_runs(con, runs)
        assert (report.new, report.unchanged, report.rejected) == (1, 1, [])
