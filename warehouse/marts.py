"""Build the dbt marts (dbt_project/) over a DuckDB warehouse, programmatically.

`build_marts` runs `dbt build` (models, data tests, unit tests) through dbt's Python entry
point with the project's own profile, pointing it at the warehouse file through
`TMLBENCH_WAREHOUSE`. It first applies the raw schema so a fresh warehouse builds too (with
empty marts).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from runner.config import REPO_ROOT
from runner.errors import TmlbenchError
from warehouse.db import WAREHOUSE_ENV, apply_ddl, connect

DBT_PROJECT_DIR = REPO_ROOT / "dbt_project"
FAILED_STATUSES = frozenset({"error", "fail", "runtime error"})


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
) -> MartsResult:
    """Run `dbt build` on the warehouse; raise TmlbenchError naming every failing node.

    select: a dbt selection (e.g. "marts.leaderboard+"); all nodes when None.
    dbt_vars: overrides of the project vars (counted_successes, bootstrap_replicates, ...).
    artifacts_dir: where dbt writes target/ and logs/ (default: dbt_project/target, logs).
    """
    from dbt.cli.main import dbtRunner  # dbt is heavy to import: only when building

    warehouse_path = Path(warehouse_path).resolve()
    ensure_raw_schema(warehouse_path)
    target_dir = (artifacts_dir / "target") if artifacts_dir else DBT_PROJECT_DIR / "target"
    log_dir = (artifacts_dir / "logs") if artifacts_dir else DBT_PROJECT_DIR / "logs"
    args = [
        "build",
        "--project-dir",
        str(DBT_PROJECT_DIR),
        "--profiles-dir",
        str(DBT_PROJECT_DIR),
        "--target-path",
        str(target_dir),
        "--log-path",
        str(log_dir),
        "--quiet",
        "--no-use-colors",
    ]
    if select:
        args += ["--select", select]
    if dbt_vars:
        args += ["--vars", json.dumps(dict(dbt_vars))]

    started = time.perf_counter()
    with _env(WAREHOUSE_ENV, str(warehouse_path)):
        try:
            outcome = dbtRunner().invoke(args)
        finally:
            _release_duckdb()
    seconds = time.perf_counter() - started

    nodes = [
        NodeResult(
            unique_id=result.node.unique_id,
            status=str(result.status),
            seconds=float(result.execution_time or 0.0),
            message=result.message,
        )
        for result in (getattr(outcome.result, "results", None) or [])
    ]
    failed = [node for node in nodes if node.status in FAILED_STATUSES]
    if not outcome.success or failed:
        lines = [f"  {node.unique_id}: {node.status}: {node.message}" for node in failed]
        skipped = sum(1 for node in nodes if node.status == "skipped")
        if skipped:
            lines.append(f"  ({skipped} downstream nodes skipped)")
        if outcome.exception is not None:
            lines.append(f"  dbt: {outcome.exception}")
        raise TmlbenchError(
            f"dbt build of {warehouse_path} failed ({len(failed)} failing nodes):\n"
            + "\n".join(lines or ["  (no node failed; see the dbt log in " + str(log_dir) + ")"])
        )
    return MartsResult(warehouse_path=warehouse_path, seconds=seconds, nodes=nodes)


def _release_duckdb() -> None:
    """Close the DuckDB database dbt-duckdb keeps open after a build.

    dbt-duckdb caches one DuckDB instance per process (DuckDBConnectionManager._ENV); left
    open it holds the file's lock, so other processes (the app, the loader) and read-only
    connections of this one could not open the warehouse.
    """
    from dbt.adapters.duckdb.connections import DuckDBConnectionManager

    with DuckDBConnectionManager._LOCK:
        environment = DuckDBConnectionManager._ENV
        DuckDBConnectionManager._ENV = None
    if environment is not None:
        environment.close()


@contextmanager
def _env(name: str, value: str) -> Iterator[None]:
    previous = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = previous
