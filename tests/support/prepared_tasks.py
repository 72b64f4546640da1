"""A test's own benchmark folders: the repository's specs, data and runs under a temporary root,
and the prepared task in them."""

from __future__ import annotations

from pathlib import Path

from runner.config import REPO_ROOT, Paths
from runner.tasks.preparation import PreparedTask


def make_paths(root: Path) -> Paths:
    return Paths(
        tasks_dir=REPO_ROOT / "tasks",
        agents_dir=REPO_ROOT / "agents",
        suites_dir=REPO_ROOT / "suites",
        data_dir=root / "data",
        runs_dir=root / "runs",
    )


def prepared(paths: Paths, task_id: str) -> PreparedTask:
    return PreparedTask(paths.data_dir / "tasks" / task_id)


def shared_paths(data_dir: Path, runs_dir: Path) -> Paths:
    """The repository's specs, the session's prepared twins (``small_data``) and a runs folder
    of one's own: for a module fixture whose one attempt several tests read (``small_paths``
    is per test)."""
    return Paths(
        tasks_dir=REPO_ROOT / "tasks",
        agents_dir=REPO_ROOT / "agents",
        suites_dir=REPO_ROOT / "suites",
        data_dir=data_dir,
        runs_dir=runs_dir,
    )
