"""dbt in the worker's process: a manifest one process parsed builds in another."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from tools import dbt_in_process
from tools.dbt_in_process import run_in_process
from tools.dbt_warehouse import SCENARIO_EXCLUDE, SCENARIO_VARS, insert_runs
from tools.records import make_record
from warehouse.dbt import WAREHOUSE_VAR
from warehouse.marts import build_marts

# integration: a real dbt parse and build, in this process
pytestmark = pytest.mark.integration


def test_a_parse_left_in_the_shared_folder_builds_in_a_process_that_never_parsed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The session's folder (tests/conftest.py shares it): this process parses the manifest and
    # leaves it there, or another worker did.
    shared = dbt_in_process._shared_folder
    assert shared is not None
    path = tmp_path / "warehouse.duckdb"
    dbt_in_process._manifest({WAREHOUSE_VAR: str(path), **SCENARIO_VARS})
    assert list(shared.glob("*.pickle"))

    # As another process: nothing parsed in memory, and a parse would fail the test.
    monkeypatch.setattr(dbt_in_process, "_manifests", {})
    monkeypatch.setattr(dbt_in_process, "_parse", lambda _: pytest.fail("parsed again"))
    insert_runs(path, [make_record("a", "t1", 60, minute, score=0.5) for minute in range(3)])
    built = build_marts(
        path,
        select="+int_runs_counted",  # it and the models it reads
        dbt_vars=SCENARIO_VARS,
        artifacts_dir=tmp_path / "dbt",
        exclude=SCENARIO_EXCLUDE,
        run=run_in_process,
    )
    assert built.count("success") >= 2 and built.count("pass") > 0  # (it raises on a failure)
    with duckdb.connect(str(path), read_only=True) as con:
        assert con.sql("select count(*) from main.int_runs_counted").fetchone() == (3,)
    # its log file holds warnings and errors only, not dbt's debug lines (every query)
    log = (tmp_path / "dbt" / "logs" / "dbt.log").read_text(encoding="utf-8")
    assert "[debug]" not in log and "create or replace" not in log.lower(), log[:2000]
