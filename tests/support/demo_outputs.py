"""What tmlbench shows for the demo suite, from fixed records: every mart and the terminal leaderboard.

Issue 14 moved every rule into one home without changing a result. This module makes that
checkable: it writes seeded run records for the demo suite's real settings (its agents,
tasks and budgets, with every status and a setting short of successes), loads them with the
real loader, builds the marts with the real dbt project and reads back every mart and the
``tmlbench leaderboard`` text. ``tests/golden/`` holds these outputs as they were before the
renovation (``python -m tests.support.demo_outputs --write`` rewrites them, on purpose only);
``tests/test_same_outputs.py`` compares.
"""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import duckdb
import numpy as np

from runner.attempts.records import STATUSES, RunRecord, write_record
from runner.config import REPO_ROOT, Paths
from runner.specs.registry import load_suite, load_task
from tests.support.tmlbench_cli import invoke
from tools.dbt_in_process import run_in_process
from tools.records import make_record

GOLDEN_DIR = REPO_ROOT / "tests" / "golden"
MARTS_FILE = GOLDEN_DIR / "demo_marts.json"
LEADERBOARD_FILE = GOLDEN_DIR / "demo_leaderboard.txt"
SUITE = "demo"
DIGITS = (
    9  # floats compared to 9 significant digits: sums in another order may differ in the last bits
)


def demo_paths(root: Path) -> Paths:
    """The repository's specs, with data and runs under ``root``."""
    repo = Paths.from_env({})
    return Paths(
        tasks_dir=repo.tasks_dir,
        agents_dir=repo.agents_dir,
        suites_dir=repo.suites_dir,
        data_dir=root / "data",
        runs_dir=root / "runs",
        clis_dir=root / "clis",
    )


def demo_agents(paths: Paths) -> list[str]:
    return list(load_suite(paths.suites_dir, SUITE).agents)


def demo_records(paths: Paths) -> list[RunRecord]:
    """Seeded records for every setting of the demo suite: 5–7 successes (one setting 3), 0–2 failures."""
    suite = load_suite(paths.suites_dir, SUITE)
    rng = np.random.default_rng(14)
    failures = [s for s in STATUSES if s != "success"]
    records = []
    for a, agent in enumerate(suite.agents):
        for task_id in suite.tasks:
            task = load_task(paths.tasks_dir, task_id)
            direction = task.metric.direction
            for budget in suite.budgets:
                short = (agent, task_id, budget) == (suite.agents[0], suite.tasks[-1], 240)
                n_success = 3 if short else 5 + int(rng.integers(0, 3))
                statuses = ["success"] * n_success + [
                    failures[int(rng.integers(len(failures)))] for _ in range(rng.integers(0, 3))
                ]
                rng.shuffle(statuses)
                for i, status in enumerate(statuses):
                    base = 0.6 + 0.02 * a + budget / 40000
                    score = round(float(base + rng.normal(0, 0.04)), 4)
                    if direction == "minimize":
                        score = round(10.0 - 5 * score, 4)
                    records.append(
                        make_record(
                            agent=agent,
                            task=task_id,
                            budget=budget,
                            minute=i,
                            status=status,
                            score=score,
                            direction=direction,
                            metric_name=task.metric.name,
                            suite_id=suite.id,
                            task_spec_sha256="x",
                        )
                    )
    return records


def write_runs(paths: Paths) -> list[RunRecord]:
    records = demo_records(paths)
    for record in records:
        run_dir = paths.runs_dir / SUITE / record.run_id
        run_dir.mkdir(parents=True)
        write_record(run_dir, record)
    return records


def build_demo(root: Path) -> tuple[Paths, Path]:
    """The demo records under ``root``, loaded into ``root/warehouse.duckdb`` with marts built."""
    from warehouse.cli import _load_everything
    from warehouse.marts import UNIT_TESTS, build_marts

    paths = demo_paths(root)
    write_runs(paths)
    warehouse = root / "warehouse.duckdb"
    _load_everything(paths, paths.runs_dir, warehouse)
    # every data test and cross-mart test on the demo's data; dbt's unit tests (the models' SQL
    # on fixed inputs, not this data) are tests/dbt_project/test_dbt_build.py's fresh build's
    build_marts(warehouse, artifacts_dir=root / "dbt", exclude=UNIT_TESTS, run=run_in_process)
    return paths, warehouse


def terminal_leaderboard(paths: Paths, warehouse: Path) -> str:
    """What ``tmlbench leaderboard --suite demo`` prints for these records."""
    env = {
        "TMLBENCH_RUNS_DIR": str(paths.runs_dir),
        "TMLBENCH_DATA_DIR": str(paths.data_dir),
        "TMLBENCH_WAREHOUSE": str(warehouse),
    }
    result = invoke(env, "leaderboard", "--suite", SUITE)
    if result.exit_code:
        raise AssertionError(f"tmlbench leaderboard failed:\n{result.output}")
    return result.output


def _value(value: Any) -> Any:
    if isinstance(value, float):
        return None if math.isnan(value) else float(f"{value:.{DIGITS}g}")
    if isinstance(value, list | tuple):
        return [_value(v) for v in value]
    if value is None or isinstance(value, bool | int | str):
        return value
    return str(value)


def read_marts(warehouse: Path, agents: Sequence[str]) -> dict[str, list[dict[str, Any]]]:
    """Every table in schema ``marts``, rows sorted, floats to ``DIGITS`` significant digits.

    Rows of agents outside ``agents`` are left out: adding an agent spec to agents/ must not
    change the demo's outputs.
    """
    con = duckdb.connect(str(warehouse), read_only=True)
    try:
        names = [
            row[0]
            for row in con.execute(
                "select table_name from information_schema.tables"
                " where table_schema = 'marts' order by 1"
            ).fetchall()
        ]
        marts = {}
        for name in names:
            cursor = con.execute(f'select * from marts."{name}"')
            columns = [d[0] for d in cursor.description]
            rows = [
                {c: _value(v) for c, v in zip(columns, row, strict=True)}
                for row in cursor.fetchall()
            ]
            rows = [r for r in rows if r.get("agent_id", agents[0]) in agents]
            marts[name] = sorted(rows, key=lambda r: json.dumps(r, sort_keys=True, default=str))
        return marts
    finally:
        con.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--write", action="store_true", help="rewrite tests/golden (on purpose)")
    parser.add_argument("--root", type=Path, required=True, help="an empty scratch folder")
    args = parser.parse_args()
    paths, warehouse = build_demo(args.root)
    output = terminal_leaderboard(paths, warehouse)
    if args.write:
        GOLDEN_DIR.mkdir(exist_ok=True)
        MARTS_FILE.write_text(
            json.dumps(read_marts(warehouse, demo_agents(paths)), indent=1, sort_keys=True) + "\n"
        )
        LEADERBOARD_FILE.write_text(output)
    print(output)


if __name__ == "__main__":
    main()
