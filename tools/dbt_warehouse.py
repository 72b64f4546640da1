"""Hand-made raw rows in a temporary warehouse, inserted the way the loader would, and the marts
dbt builds from them read back."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd

from runner.attempts.records import RunRecord
from tools.records import T0
from warehouse.marts import CROSS_MART_TESTS, UNIT_TESTS

DEFAULT_SUITE = "test"  # the suite of a record that names none
# What a test's build of its own scenario leaves out (build_marts(exclude=SCENARIO_EXCLUDE)):
# the cross-mart tests and the unit tests check the models' SQL, not the scenario's data, and
# each runs in a build of its own (the fresh warehouse of tests/dbt_project/test_dbt_build.py
# runs every unit test once per session). Every data test still runs on every scenario.
SCENARIO_EXCLUDE = f"{CROSS_MART_TESTS} {UNIT_TESTS}"
# The vars of a test's build of its own scenario: a few bootstrap replicates (no assertion
# depends on their number) and one set of vars for all of them, so that one parse of the project
# serves their builds (tools/dbt_in_process.py).
SCENARIO_VARS = {"bootstrap_replicates": 20}
# The same for a build through the CLI (`tmlbench warehouse build`, which builds everything):
# dbt's own variable for --exclude-resource-type, inherited by the dbt subprocess.
CLI_WITHOUT_UNIT_TESTS = {"DBT_EXCLUDE_RESOURCE_TYPES": "unit_test"}


def insert_runs(path: Path, records: Iterable[RunRecord], **overrides: Any) -> None:
    """Insert records into raw.runs the way the loader would (record fields + bookkeeping), each
    in the folder of the suite it records (run_space = suite id), and make each suite count
    them as its suite file would: a raw.suites row (unless there is one) and its settings."""
    rows = [
        {
            **r.model_dump(),
            "run_space": r.suite_id or DEFAULT_SUITE,
            "source": "tmlbench",
            "record_sha256": "x",
            "loaded_at": T0,
            **overrides,
        }
        for r in records
    ]
    _insert(path, "runs", rows)
    count_every_setting(path)


def count_every_setting(path: Path) -> None:
    """Make each folder of tmlbench runs a suite (named as the folder) that lists every setting
    the folder holds, as suite files would: a raw.suites row unless there is one (insert_suites
    sets its ceiling) and its raw.suite_settings."""
    with duckdb.connect(str(path)) as con:
        spaces = con.execute(
            "select distinct run_space from raw.runs where source = 'tmlbench'"
        ).fetchall()
        for (space,) in spaces:
            declare_suite(con, space, space)


def declare_suite(
    con: duckdb.DuckDBPyConnection,
    suite_id: str,
    runs_subdir: str,
    agents: Sequence[str] | None = None,
) -> None:
    """Declare a suite over a folder of runs as its suite file would: a raw.suites row (unless
    there is one) and, in raw.suite_settings, every setting of the folder's runs (of ``agents``
    only, when given)."""
    con.execute(
        "insert into raw.suites by name select $suite as suite_id, $suite as title, "
        "5 as attempts, 10 as attempt_ceiling, 3 as harness_error_ceiling, "
        "3 as provider_error_ceiling, "
        "$folder as runs_subdir, 'x' as spec_sha256, now() as loaded_at "
        "where $suite not in (select suite_id from raw.suites)",
        {"suite": suite_id, "folder": runs_subdir},
    )
    con.execute(
        "insert or ignore into raw.suite_settings by name select distinct $suite as suite_id, "
        "agent_id, task_id, budget_seconds from raw.runs where source = 'tmlbench' "
        "and run_space = $folder and budget_seconds is not null "
        "and ($agents is null or list_contains($agents, agent_id))",
        {"suite": suite_id, "folder": runs_subdir, "agents": list(agents) if agents else None},
    )


def insert_tasks(path: Path, tasks: dict[str, tuple[str, dt.date | None]]) -> None:
    """tasks: task_id → (metric_direction, start_date)."""
    rows = [
        {
            "task_id": task_id,
            "title": task_id,
            "task_type": "binary",
            "metric_name": "auc" if direction == "maximize" else "rmse",
            "metric_direction": direction,
            "id_column": "id",
            "target_column": "y",
            "start_date": start,
            "loaded_at": T0,
        }
        for task_id, (direction, start) in tasks.items()
    ]
    _insert(path, "tasks", rows)


def insert_agents(path: Path, cutoffs: dict[str, dt.date | None]) -> None:
    rows = [
        {
            "agent_id": agent_id,
            "kind": "baseline",
            "knowledge_cutoff": cutoff,
            "source": "spec",
            "loaded_at": T0,
        }
        for agent_id, cutoff in cutoffs.items()
    ]
    _insert(path, "agents", rows)


def insert_suites(
    path: Path,
    ceilings: dict[str, int],
    attempts: dict[str, int] | None = None,
    provider_ceilings: dict[str, int] | None = None,
) -> None:
    """suites: suite_id → harness_error_ceiling (as the loader writes raw.suites); ``attempts``
    (N, default 5) and ``provider_ceilings`` (provider_error_ceiling, default 3) per suite."""
    attempts = attempts or {}
    provider_ceilings = provider_ceilings or {}
    rows = [
        {
            "suite_id": suite_id,
            "title": suite_id,
            "attempts": attempts.get(suite_id, 5),
            "attempt_ceiling": 2 * attempts.get(suite_id, 5),
            "harness_error_ceiling": ceiling,
            "provider_error_ceiling": provider_ceilings.get(suite_id, 3),
            "runs_subdir": suite_id,
            "spec_sha256": "x",
            "loaded_at": T0,
        }
        for suite_id, ceiling in ceilings.items()
    ]
    _insert(path, "suites", rows, replace=True)


def _insert(path: Path, table: str, rows: list[dict[str, Any]], replace: bool = False) -> None:
    from warehouse.marts import ensure_raw_schema

    ensure_raw_schema(path)
    frame = pd.DataFrame(rows)  # noqa: F841 (read by DuckDB's replacement scan)
    verb = "insert or replace" if replace else "insert"
    with duckdb.connect(str(path)) as con:
        con.execute(f"{verb} into raw.{table} by name select * from frame")


def read_mart(path: Path, name: str) -> pd.DataFrame:
    with duckdb.connect(str(path), read_only=True) as con:
        return con.sql(f"select * from marts.{name}").df()


def read_suite_mart(path: Path, name: str, *suites: str) -> pd.DataFrame:
    """The rows of ``suites`` in one mart (a warehouse shared by several scenarios)."""
    with duckdb.connect(str(path), read_only=True) as con:
        return con.execute(
            f"select * from marts.{name} where list_contains(?, suite_id)", [list(suites)]
        ).df()
