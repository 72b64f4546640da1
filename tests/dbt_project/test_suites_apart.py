"""Every mart keyed by suite (issue 15): one warehouse holding several suites gives each suite the
marts it would have alone.

Suite `a` and suite `b` run the same agents on the same tasks and budgets, under the same run ids
(the demo's and tml-v1's folders do exactly that), with other scores. Suite `c` shares `a`'s
folder but lists only one of its agents (as tml-v1-llm shares tml-v1's baselines). Each suite's
rows of every mart and display table equal those of a warehouse holding that suite alone.
"""

from __future__ import annotations

from pathlib import Path

import duckdb
import pandas as pd
import pytest

from tests.support.dbt_warehouse import insert_runs, insert_tasks
from tests.support.records import make_record
from warehouse.marts import build_marts

TASKS = {"t1": ("maximize", None), "t2": ("minimize", None)}
BUDGETS = (60, 600)
VARS = {"bootstrap_replicates": 20}


def suite_records(suite: str, agents: dict[str, float]) -> list:
    """Five successes and a timeout per setting; agent → its edge, better on every task (suite b's
    edges reverse a's)."""
    records = []
    for agent, edge in agents.items():
        for task, (direction, _) in TASKS.items():
            for budget in BUDGETS:
                for minute in range(5):
                    base = 0.5 + budget / 10_000 + minute / 100
                    score = base + edge if direction == "maximize" else base - edge
                    records.append(
                        make_record(
                            agent, task, budget, minute, score=score, direction=direction,
                            suite_id=suite,
                        )
                    )  # fmt: skip
                records.append(
                    make_record(agent, task, budget, 9, status="timeout", suite_id=suite)
                )
    return records


A = suite_records("a", {"x": 0.1, "y": 0.0})
B = suite_records("b", {"x": 0.0, "y": 0.2})


def count_a_folder_as_c(path: Path, agents: list[str]) -> None:
    """Suite c: a's folder, only ``agents``' settings (what a suite file sharing it says)."""
    with duckdb.connect(str(path)) as con:
        con.execute(
            "insert into raw.suites by name select 'c' as suite_id, 'c' as title, 5 as attempts, "
            "10 as attempt_ceiling, 3 as harness_error_ceiling, 'a' as runs_subdir, "
            "'x' as spec_sha256, now() as loaded_at"
        )
        con.execute(
            "insert into raw.suite_settings select distinct 'c', agent_id, task_id, "
            "budget_seconds from raw.runs where run_space = 'a' and agent_id in "
            "(select unnest(?::varchar[]))",
            [agents],
        )


def build(path: Path, records: list, *, with_c: bool = False) -> Path:
    insert_runs(path, records)
    insert_tasks(path, TASKS)
    if with_c:
        count_a_folder_as_c(path, ["x"])
    build_marts(path, dbt_vars=VARS, artifacts_dir=path.parent / f"dbt-{path.stem}")
    return path


def suite_tables(path: Path) -> dict[str, list[str]]:
    """Every table of schemas marts and display that has a suite_id column, with its columns."""
    with duckdb.connect(str(path), read_only=True) as con:
        rows = con.execute(
            "select table_schema || '.' || table_name, list(column_name order by ordinal_position) "
            "from information_schema.columns where table_schema in ('marts', 'display') "
            "group by 1 order by 1"
        ).fetchall()
    return dict(rows)


def rows_of(path: Path, table: str, suite: str) -> pd.DataFrame:
    with duckdb.connect(str(path), read_only=True) as con:
        frame = con.execute(f"select * from {table} where suite_id = ?", [suite]).df()
    # a shared folder's runs keep their space ('a' for suite c), alone they are in c's
    frame = frame.drop(columns=["suite_id", "run_space"], errors="ignore")
    # order-free comparison: lists (e.g. run_ids) as tuples, then every column sorted
    frame = frame.map(lambda v: tuple(v) if hasattr(v, "__len__") and not isinstance(v, str) else v)
    return frame.sort_values(list(frame.columns)).reset_index(drop=True)


@pytest.fixture(scope="module")
def warehouses(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("suites-apart")
    together = build(root / "together.duckdb", [*A, *B], with_c=True)
    alone_a = build(root / "a.duckdb", A)
    alone_b = build(root / "b.duckdb", B)
    only_x = [r.model_copy(update={"suite_id": "c"}) for r in A if r.agent_id == "x"]
    alone_c = build(root / "c.duckdb", only_x)
    return {"together": together, "a": alone_a, "b": alone_b, "c": alone_c}


def test_every_mart_and_display_table_is_keyed_by_suite(warehouses):
    tables = suite_tables(warehouses["together"])
    unkeyed = sorted(name for name, columns in tables.items() if "suite_id" not in columns)
    assert unkeyed == ["display.filter_options"], "a table without suite_id mixes suites"
    assert len(tables) > 25


@pytest.mark.parametrize("suite", ["a", "b", "c"])
def test_each_suite_has_the_marts_it_would_have_alone(warehouses, suite):
    together, alone = warehouses["together"], warehouses[suite]
    tables = [name for name, cols in suite_tables(together).items() if "suite_id" in cols]
    for table in tables:
        got, expected = rows_of(together, table, suite), rows_of(alone, table, suite)
        pd.testing.assert_frame_equal(got, expected, check_dtype=False, obj=f"{table} of {suite}")


def test_the_suites_rank_differently(warehouses):
    # the same agents, tasks and run ids: only keeping the suites apart gives each its winner
    with duckdb.connect(str(warehouses["together"]), read_only=True) as con:
        winners = con.execute(
            "select suite_id, agent_id from marts.leaderboard "
            "where variant = 'best_budget' and rank = 1 order by suite_id"
        ).fetchall()
    assert winners == [("a", "x"), ("b", "y"), ("c", "x")]
