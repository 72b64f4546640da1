"""How tmlbench runs dbt: one executable, one project, the warehouse file as a dbt var.

Every dbt invocation — `build_marts` (the CLI's `warehouse build`), the Dagster dbt asset and
`make manifest` — takes its arguments from here. The warehouse file reaches the profile
(dbt_project/profiles.yml) as the var ``tmlbench_warehouse``, so no caller writes the process
environment; and dbt always runs as a subprocess of the venv's own dbt CLI, so the DuckDB
handle dbt-duckdb caches per process dies with that process instead of locking the file.

    python -m warehouse.dbt parse --quiet     # any dbt command, on the default warehouse
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from runner.config import REPO_ROOT
from runner.errors import TmlbenchError
from warehouse.db import warehouse_path

DBT_PROJECT_DIR = REPO_ROOT / "dbt_project"
# The var dbt_project/profiles.yml reads the DuckDB file from.
WAREHOUSE_VAR = "tmlbench_warehouse"


def dbt_executable() -> Path:
    """The dbt CLI installed beside this interpreter (not whichever `dbt` is first on PATH)."""
    candidate = Path(sys.executable).parent / "dbt"
    if not candidate.is_file():
        raise TmlbenchError(
            f"no dbt CLI at {candidate} (beside {sys.executable}); install the project: make install"
        )
    return candidate


def dbt_vars(warehouse: Path, overrides: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The vars of one invocation: the warehouse file, then overrides of the project vars."""
    overrides = dict(overrides or {})
    if WAREHOUSE_VAR in overrides:
        raise TmlbenchError(
            f"dbt var {WAREHOUSE_VAR!r} is the warehouse file; pass the warehouse path instead"
        )
    return {WAREHOUSE_VAR: str(Path(warehouse).resolve()), **overrides}


# A target folder's record of the warehouse its parse cache and manifest were made for (the
# Makefile's WAREHOUSE_STAMP is dbt_project/target's): `make manifest` parses again when it names
# another file than the one `make run` uses, so a `tmlbench warehouse build` of another warehouse
# (a test's) leaves no manifest made for the wrong file behind it.
WAREHOUSE_STAMP = ".warehouse"


def stamp_target(target_dir: Path, warehouse: Path) -> None:
    """Record in ``target_dir`` that dbt is about to parse there for ``warehouse``; the file is
    left as it is (its time too, which make compares) when it already says so."""
    stamp, text = target_dir / WAREHOUSE_STAMP, f"{Path(warehouse).resolve()}\n"
    if not stamp.is_file() or stamp.read_text(encoding="utf-8") != text:
        target_dir.mkdir(parents=True, exist_ok=True)
        stamp.write_text(text, encoding="utf-8")


def vars_args(warehouse: Path, overrides: Mapping[str, Any] | None = None) -> list[str]:
    """``--vars <json>`` for one invocation (what the Dagster asset adds to its dbt command)."""
    return ["--vars", json.dumps(dbt_vars(warehouse, overrides), sort_keys=True)]


def project_args() -> list[str]:
    """Where the project and its profile are (dagster-dbt passes these itself)."""
    return ["--project-dir", str(DBT_PROJECT_DIR), "--profiles-dir", str(DBT_PROJECT_DIR)]


# What dbt builds the marts from (dbt_project.yml's paths, and the files at the project's top);
# target/, logs/ and the like are dbt's output.
PROJECT_SOURCES = ("models", "macros", "tests", "seeds", "snapshots", "analyses")


def project_fingerprint(project_dir: Path = DBT_PROJECT_DIR) -> str:
    """A hash of every file dbt builds from: the same files, the same marts from the same raw
    tables (with the raw tables' content versions, what a rebuild can be skipped on)."""
    digest = hashlib.sha256()
    files = [p for p in project_dir.iterdir() if p.is_file() and p.suffix in (".yml", ".yaml")]
    for folder in PROJECT_SOURCES:
        if (project_dir / folder).is_dir():
            files += [p for p in (project_dir / folder).rglob("*") if p.is_file()]
    for path in sorted(files):
        digest.update(f"{path.relative_to(project_dir)}\0".encode())
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()[:16]


# Each dbt command a Dagster run makes writes its artifacts (manifest, run results, dbt's log
# and a copy of the parse cache: ~14 MB) to a folder of its own under STEPS_DIR; a `make ui`
# left running would keep one per automation run for ever. The newest KEPT_STEPS stay (a failed
# build's log among them), and any folder touched in the last hour: another process's build may
# be writing it.
STEPS_DIR = DBT_PROJECT_DIR / "target" / "steps"
KEPT_STEPS = 10
IN_USE_SECONDS = 3600


def step_target(run_id: str, steps_dir: Path = STEPS_DIR) -> Path:
    """A new folder for one Dagster dbt command's artifacts, the oldest others removed."""
    ages: list[tuple[float, Path]] = []
    if steps_dir.is_dir():
        for folder in steps_dir.iterdir():
            try:  # another process may be removing it
                if folder.is_dir() and not folder.is_symlink():
                    ages.append((folder.stat().st_mtime, folder))
            except FileNotFoundError:
                continue
    ages.sort(reverse=True)
    stale = time.time() - IN_USE_SECONDS
    for modified, folder in ages[KEPT_STEPS - 1 :]:
        if modified < stale:
            shutil.rmtree(folder, ignore_errors=True)
    return steps_dir / f"{run_id[:8]}-{uuid.uuid4().hex[:8]}"


def dbt_command(args: Sequence[str]) -> list[str]:
    """The full command line of ``dbt <args>`` on this project."""
    return [str(dbt_executable()), *args, *project_args()]


def run_dbt(args: Sequence[str]) -> subprocess.CompletedProcess[str]:
    """Run ``dbt <args>`` on this project and capture its output; a failing exit is not raised."""
    return subprocess.run(
        dbt_command(args), capture_output=True, text=True, check=False, cwd=DBT_PROJECT_DIR
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Run one dbt command on the default warehouse, as the rest of tmlbench would."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not args:
        print(__doc__, file=sys.stderr)
        return 2
    command = dbt_command([*args, *vars_args(warehouse_path())])
    return subprocess.run(command, check=False, cwd=DBT_PROJECT_DIR).returncode


if __name__ == "__main__":
    sys.exit(main())
