"""Build the dbt marts (dbt_project/) over a DuckDB warehouse.

`build_marts` runs `dbt build` (models, data tests, unit tests) through warehouse/dbt.py, which
owns how dbt is invoked, and reads the outcome from dbt's run_results.json. It first applies
the raw schema so a fresh warehouse builds too (with empty marts).
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from runner.errors import TmlbenchError
from warehouse.db import apply_ddl, connect
from warehouse.dbt import DBT_PROJECT_DIR, run_dbt, stamp_target, vars_args

__all__ = [
    "CROSS_MART_TESTS",
    "DBT_PROJECT_DIR",
    "UNIT_TESTS",
    "MartsResult",
    "NodeResult",
    "build_marts",
    "ensure_raw_schema",
]

# The data tests that compare one model with another (dbt_project/macros/
# test_composite_relationships.sql tags them): they check the models' SQL rather than the data,
# so a test's many small builds may skip them (exclude=CROSS_MART_TESTS); every build of real
# data runs them.
CROSS_MART_TESTS = "tag:cross_mart"
# dbt's unit tests: the models' SQL on fixed inputs, whatever the warehouse holds, so one build
# proves them (the Dagster asset never runs them); a test's build of its own data may skip them
# (exclude=UNIT_TESTS, or with CROSS_MART_TESTS: f"{CROSS_MART_TESTS} {UNIT_TESTS}").
UNIT_TESTS = "resource_type:unit_test"

FAILED_STATUSES = frozenset({"error", "fail", "runtime error"})
OUTPUT_TAIL_LINES = 20


@dataclass(frozen=True)
class NodeResult:
    unique_id: str
    status: str
    seconds: float
    message: str | None = None


@dataclass(frozen=True)
class MartsResult:
    warehouse_path: Path
    seconds: float
    nodes: list[NodeResult] = field(default_factory=list)

    def count(self, status: str) -> int:
        return sum(1 for node in self.nodes if node.status == status)


def ensure_raw_schema(warehouse_path: Path) -> None:
    """Create the warehouse file and the raw schema if missing (the DDL is idempotent)."""
    con = connect(Path(warehouse_path).resolve())
    try:
        apply_ddl(con)
    finally:
        con.close()


def build_marts(
    warehouse_path: Path,
    *,
    select: str | None = None,
    dbt_vars: Mapping[str, Any] | None = None,
    artifacts_dir: Path | None = None,
    exclude: str | None = None,
    run: Callable[[Sequence[str]], subprocess.CompletedProcess[str]] = run_dbt,
) -> MartsResult:
    """Run `dbt build` on the warehouse; raise TmlbenchError naming every failing node.

    select: a dbt selection (e.g. "marts.leaderboard+"); all nodes when None.
    dbt_vars: overrides of the project vars (counted_successes, bootstrap_replicates, ...).
    artifacts_dir: where dbt writes target/ and logs/ (default: dbt_project/target, logs).
    exclude: a dbt selection of nodes not to build (e.g. CROSS_MART_TESTS, UNIT_TESTS, or both
        separated by a space); nothing when None.
    run: what runs the dbt command (``run_dbt``'s contract): by default the venv's dbt CLI, in
        a subprocess; the tests' warehouses are built in-process (tools/dbt_in_process.py).
    """
    warehouse_path = Path(warehouse_path).resolve()
    ensure_raw_schema(warehouse_path)
    target_dir = (artifacts_dir / "target") if artifacts_dir else DBT_PROJECT_DIR / "target"
    log_dir = (artifacts_dir / "logs") if artifacts_dir else DBT_PROJECT_DIR / "logs"
    run_results = target_dir / "run_results.json"
    run_results.unlink(missing_ok=True)  # a build that dies early must not report an old one
    stamp_target(target_dir, warehouse_path)
    args = ["build", "--target-path", str(target_dir), "--log-path", str(log_dir)]
    args += ["--quiet", "--no-use-colors", *vars_args(warehouse_path, dbt_vars)]
    if select:
        # cautious: a test runs only when every model it reads is selected (a relationships test
        # from an unselected mart to a selected one would read a table this build never made).
        args += ["--select", select, "--indirect-selection", "cautious"]
    if exclude:
        args += ["--exclude", exclude]

    started = time.perf_counter()
    outcome = run(args)
    seconds = time.perf_counter() - started

    nodes = _node_results(run_results)
    failed = [node for node in nodes if node.status in FAILED_STATUSES]
    if outcome.returncode != 0 or failed:
        lines = [f"  {node.unique_id}: {node.status}: {node.message}" for node in failed]
        skipped = sum(1 for node in nodes if node.status == "skipped")
        if skipped:
            lines.append(f"  ({skipped} downstream nodes skipped)")
        if not failed:  # dbt stopped before any node ran (project, profile, var): say why
            output = (outcome.stdout + outcome.stderr).strip().splitlines()
            lines += [f"  dbt: {line}" for line in output[-OUTPUT_TAIL_LINES:]]
            lines.append(f"  (the full dbt log is in {log_dir})")
        raise TmlbenchError(
            f"dbt build of {warehouse_path} failed ({len(failed)} failing nodes):\n"
            + "\n".join(lines)
        )
    return MartsResult(warehouse_path=warehouse_path, seconds=seconds, nodes=nodes)


def _node_results(run_results: Path) -> list[NodeResult]:
    """Every node of dbt's run_results.json (none when dbt stopped before writing it)."""
    if not run_results.is_file():
        return []
    results = json.loads(run_results.read_text(encoding="utf-8")).get("results", [])
    return [
        NodeResult(
            unique_id=result["unique_id"],
            status=str(result["status"]),
            seconds=float(result.get("execution_time") or 0.0),
            message=result.get("message"),
        )
        for result in results
    ]
