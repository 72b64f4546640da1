"""The runs load (warehouse/loader.py): idempotent, every field in its column, bad files rejected
by name, one transaction. Its parts have files of their own: test_verdicts.py (records are
immutable), test_record_index.py, test_bulk_records.py; the spec load is in test_specs.py and the
warehouse file in test_db.py."""

from __future__ import annotations

import datetime as dt
import hashlib
from pathlib import Path

import pytest

from runner.attempts.records import RunRecord
from runner.errors import TmlbenchError
from tests.support.run_folders import write, write_raw
from tools.records import make_record as rec
from warehouse import loader, parse
from warehouse.loader import LoadReport, load_runs


def count(con, table="raw.runs") -> int:
    return con.execute(f"select count(*) from {table}").fetchone()[0]


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
