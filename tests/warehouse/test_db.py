"""The warehouse file (warehouse/db.py): where it is, its DDL applied again and over older
warehouses, a lock another process holds named, a read-only connection to no file refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from runner.config import REPO_ROOT
from runner.errors import TmlbenchError
from tests.support.run_folders import write
from tools.records import make_record as rec
from warehouse.db import apply_ddl, connect, warehouse_path
from warehouse.loader import load_runs


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
