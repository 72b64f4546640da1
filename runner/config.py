"""Where tmlbench keeps things on disk. Every location can be moved with an environment variable."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Paths:
    tasks_dir: Path  # task specs: tasks/<task_id>/task.yaml
    agents_dir: Path  # agent specs: agents/<agent_id>.yaml
    suites_dir: Path  # suite files: suites/<suite>.yaml
    data_dir: Path  # prepared data: <data_dir>/tasks/<task_id>/{public,private}
    runs_dir: Path  # attempts: <runs_dir>/<run_id>/record.json

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None) -> Paths:
        env = os.environ if environ is None else environ

        def pick(name: str, default: Path) -> Path:
            value = env.get(name)
            return Path(value).expanduser().resolve() if value else default

        return cls(
            tasks_dir=pick("TMLBENCH_TASKS_DIR", REPO_ROOT / "tasks"),
            agents_dir=pick("TMLBENCH_AGENTS_DIR", REPO_ROOT / "agents"),
            suites_dir=pick("TMLBENCH_SUITES_DIR", REPO_ROOT / "suites"),
            data_dir=pick("TMLBENCH_DATA_DIR", REPO_ROOT / "data"),
            runs_dir=pick("TMLBENCH_RUNS_DIR", REPO_ROOT / "runs"),
        )
