"""One raw load as the orchestrator runs it: what to load, then the specs and those run records,
and what the raw tables hold afterwards.

What to load is a ``LoadScope``: every record under the runs root (cheap: the loader's index
stats unchanged files), or the run folders of named settings
(``runner.suites.suite_runs.settings_run_prefixes``). ``load_raw`` loads the spec files (a bad one is
skipped and named), then the scope's records, and reads back each raw table's rows and content
version (Dagster's data version: the same rows, the same version, however often loaded).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import duckdb

from runner.config import Paths
from runner.errors import TmlbenchError
from runner.suites import settings_run_prefixes
from warehouse.audit import status_problems
from warehouse.loader import LoadReport, content_version, load_runs, load_specs

# Every raw table dbt's sources read (dbt_project/models/staging/_raw__sources.yml).
RAW_TABLES = (
    "raw.runs",
    "raw.tasks",
    "raw.agents",
    "raw.suites",
    "raw.suite_settings",
    "raw.baselines",
    "raw.resumptions",
)
# The tables the spec files fill (``load_specs``): a skipped spec file concerns these.
SPEC_TABLES = ("raw.tasks", "raw.agents", "raw.suites", "raw.suite_settings")
NO_RUNS_DIR = "no runs directory"


@dataclass(frozen=True)
class LoadScope:
    """Which run records a load reads: every one (``prefixes`` None), or the run folders below
    the runs root that start with ``prefixes``, those of ``settings`` settings."""

    prefixes: tuple[str, ...] | None = None
    settings: int = 0

    @classmethod
    def of_settings(
        cls, paths: Paths, settings: Mapping[str, Collection[str]], *, unknown_ok: bool = False
    ) -> LoadScope:
        """The run folders of ``settings`` (suite id -> setting keys). A suite or setting that
        cannot be located (its file gone or broken, a key it no longer lists) is an error
        naming it, or with ``unknown_ok`` makes the scope every record: a rescan finds them."""
        try:
            prefixes = settings_run_prefixes(paths, settings)
        except TmlbenchError:
            if unknown_ok:
                return cls()
            raise
        return cls(tuple(prefixes), sum(len(keys) for keys in settings.values()))

    def describe(self) -> str:
        return "every record" if self.prefixes is None else f"{self.settings} settings"


@dataclass(frozen=True)
class RawLoad:
    """What one raw load did, and what every raw table holds after it (by table name)."""

    scope: str  # what was read, for a person: "every record", "3 settings", NO_RUNS_DIR
    runs_dir: Path
    runs: LoadReport
    skipped_specs: list[str]  # one line per spec file skipped: the file and what is wrong
    rows: dict[str, int]
    versions: dict[str, str]  # ``content_version`` of each raw table
    status_problems: list[str] = field(default_factory=list)  # warehouse.audit.status_problems

    def warnings(self) -> list[str]:
        """What a person should look at: a missing runs folder, each record refused, each spec
        file skipped (every valid spec loaded; what a skipped file had before is kept)."""
        lines = []
        if self.scope == NO_RUNS_DIR:
            lines.append(f"no runs directory at {self.runs_dir}: no records to load")
        lines += [f"rejected {path}: {why}" for path, why in self.runs.rejected]
        return lines + [f"skipped spec file {problem}" for problem in self.skipped_specs]

    def summary(self) -> str:
        report = self.runs
        return (
            f"raw load ({self.scope}): {report.new} new, {report.unchanged} unchanged, "
            f"{len(report.rejected)} rejected, {report.parsed} files parsed"
        )


def load_raw(
    con: duckdb.DuckDBPyConnection, paths: Paths, scope: LoadScope, *, rehash: bool = False
) -> RawLoad:
    """Load the spec files and the records of ``scope`` (every suite's runs folder is below
    ``paths.runs_dir``); ``rehash`` reads and hashes every file, not only changed ones."""
    specs = load_specs(con, paths)
    if paths.runs_dir.is_dir():
        described = scope.describe()
        report = load_runs(con, paths.runs_dir, prefixes=scope.prefixes, rehash=rehash)
    else:
        described, report = NO_RUNS_DIR, LoadReport(0, 0, [])
    return RawLoad(
        scope=described,
        runs_dir=paths.runs_dir,
        runs=report,
        skipped_specs=[problem.message for problem in specs.skipped],
        # rows, not valid files: a skipped file's rows from an earlier load are kept
        rows={table: _count(con, table) for table in RAW_TABLES},
        versions={table: content_version(con, table) for table in RAW_TABLES},
        status_problems=status_problems(con),
    )


def _count(con: duckdb.DuckDBPyConnection, table: str) -> int:
    row = con.execute(f"select count(*) from {table}").fetchone()
    return int(row[0]) if row else 0
