"""Where tmlbench keeps things on disk. Every location can be moved with an environment variable."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]


def default_clis_dir(environ: dict[str, str] | None = None) -> Path:
    """Where agent CLIs are installed: ``$TMLBENCH_CLIS_DIR``, else ``~/.cache/tmlbench/clis``.

    Outside the repository on purpose: installs are keyed by version and shared by clones.
    """
    env = os.environ if environ is None else environ
    if env.get("TMLBENCH_CLIS_DIR"):
        return Path(env["TMLBENCH_CLIS_DIR"]).expanduser().resolve()
    cache = env.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache).expanduser().resolve() / "tmlbench" / "clis"


@dataclass(frozen=True)
class Paths:
    tasks_dir: Path  # task specs: tasks/<task_id>/task.yaml
    agents_dir: Path  # agent specs: agents/<agent_id>.yaml
    suites_dir: Path  # suite files: suites/<suite>.yaml
    data_dir: Path  # prepared data: <data_dir>/tasks/<task_id>/{public,private}
    runs_dir: Path  # attempts: <runs_dir>/<run_id>/record.json
    clis_dir: Path = field(default_factory=default_clis_dir)  # agent CLIs (runner.agents.installs)

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
            clis_dir=default_clis_dir(dict(env)),
        )
