"""Shared fixtures: a private data/runs area per test session, the repo's specs, small twins;
and the machine shared between pytest-xdist workers (tests/README.md, "Running in parallel")."""

from __future__ import annotations

from pathlib import Path

import pytest

from runner.config import REPO_ROOT, Paths
from runner.specs.registry import load_task
from runner.tasks.preparation import prepare_twin
from tests.support.prepared_tasks import make_paths

# The hooks that share the machine between xdist workers (imported, a conftest's hooks are its).
from tests.support.workers import (  # noqa: F401
    pytest_collection_modifyitems,
    pytest_runtest_protocol,
    session_root,
    shared_session_dir,
)
from tools.dashboard_snapshot import build_snapshot
from tools.dbt_in_process import share_parses_in
from warehouse.db import apply_ddl, connect
from warehouse.snapshot import snapshot_path

SMALL_ROWS = 600


@pytest.fixture(scope="session", autouse=True)
def _one_dbt_parse_per_session(tmp_path_factory: pytest.TempPathFactory) -> None:
    """The workers' in-process dbt builds share each manifest they parse (tools/dbt_in_process.py):
    one parse per set of project vars for the session, not one per worker."""
    share_parses_in(session_root(tmp_path_factory) / "dbt-manifests")


@pytest.fixture(scope="session")
def app_snapshot(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One hand-made published snapshot for the session (the dashboard's and the report's tests):
    a dbt build, made once for every xdist worker. Read-only: its tests never write to it."""
    folder = shared_session_dir(tmp_path_factory, "app-snapshot", build_snapshot)
    return snapshot_path(folder / "warehouse.duckdb")  # the file build_snapshot publishes


@pytest.fixture
def paths(tmp_path: Path) -> Paths:
    return make_paths(tmp_path)


@pytest.fixture(scope="session")
def small_data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A data dir with every task's twin prepared at a small size, shared by the session."""
    data_dir = tmp_path_factory.mktemp("small-data")
    tasks_dir = REPO_ROOT / "tasks"
    for task_yaml in sorted(tasks_dir.glob("*/task.yaml")):
        prepare_twin(
            load_task(tasks_dir, task_yaml.parent.name), tasks_dir, data_dir, rows=SMALL_ROWS
        )
    return data_dir


@pytest.fixture
def small_paths(small_data: Path, tmp_path: Path) -> Paths:
    """Repo specs, the session's small prepared twins, a fresh runs dir."""
    return Paths(
        tasks_dir=REPO_ROOT / "tasks",
        agents_dir=REPO_ROOT / "agents",
        suites_dir=REPO_ROOT / "suites",
        data_dir=small_data,
        runs_dir=tmp_path / "runs",
    )


@pytest.fixture
def con(tmp_path: Path):
    """A fresh warehouse file with the raw schema applied."""
    con = connect(tmp_path / "wh.duckdb")
    apply_ddl(con)
    yield con
    con.close()
