"""Dagster resources: where the specs and runs live, which sandbox runs agents, the DuckDB file, dbt.

Every location left unset falls back, at run time, to what the rest of tmlbench uses: the
``TMLBENCH_*`` environment variables, else the repository's defaults. Nothing is read at import.
"""

import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from functools import cached_property
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict, cast

import dagster as dg
import duckdb
from dagster_dbt import DbtCliResource, DbtProject
from packaging import version
from pydantic import Field

from runner.config import Paths
from runner.sandbox import Sandbox, get_sandbox
from runner.specs import SuiteSpec, load_suite
from runner.suites import SuiteLayout
from warehouse.db import apply_ddl, connect, warehouse_path
from warehouse.dbt import DBT_PROJECT_DIR, dbt_executable, vars_args
from warehouse.snapshot import reports_path, snapshot_path

if TYPE_CHECKING:
    from dbt.adapters.base.impl import BaseAdapter

# The sandbox backend of runs whose resource leaves it unset (the deployments set it).
BACKEND_ENV = "TMLBENCH_SANDBOX_BACKEND"


class BenchConfig(dg.ConfigurableResource["BenchConfig"]):
    """Where the specs, prepared data and run records live (which suite: the asset's group)."""

    tasks_dir: str | None = None
    agents_dir: str | None = None
    suites_dir: str | None = None
    data_dir: str | None = None
    runs_dir: str | None = None
    concurrency: int | None = Field(
        default=None, description="attempts at once; None = the suite's, else one per CPU share"
    )

    def paths(self) -> Paths:
        base = Paths.from_env()
        overrides = {
            name: Path(value).expanduser().resolve()
            for name in ("tasks_dir", "agents_dir", "suites_dir", "data_dir", "runs_dir")
            if (value := getattr(self, name))
        }
        return replace(base, **overrides)

    def suite(self, suite_id: str) -> SuiteSpec:
        """``<suites_dir>/<suite_id>.yaml``, read now (a broken file is a SpecError naming it)."""
        return load_suite(self.paths().suites_dir, suite_id)

    def layout(self, suite: SuiteSpec) -> SuiteLayout:
        return SuiteLayout.of(suite, self.paths())


class SandboxBackend(dg.ConfigurableResource["SandboxBackend"]):
    """The sandbox every attempt runs in (``bwrap`` isolates; ``process`` only for trusted code)."""

    backend: str | None = Field(
        default=None,
        description="bwrap, docker or process; None = $TMLBENCH_SANDBOX_BACKEND, else bwrap",
    )
    allow_unsafe: bool = Field(
        default=False, description="let untrusted agents run on a backend that does not isolate"
    )

    def name(self) -> str:
        """The backend's name: this resource's, else the deployment's (a run container's env)."""
        return self.backend or os.environ.get(BACKEND_ENV) or "bwrap"

    def sandbox(self) -> Sandbox:
        return get_sandbox(self.name())


class DuckDBWarehouse(dg.ConfigurableResource["DuckDBWarehouse"]):
    """The warehouse file (one writer at a time: assets that open it share the ``duckdb`` pool)."""

    path: str | None = Field(default=None, description="None = $TMLBENCH_WAREHOUSE or the default")
    snapshot: str | None = Field(
        default=None, description="published read-only marts; None = <warehouse>.snapshot.duckdb"
    )
    reports: str | None = Field(
        default=None,
        description="folder of the published report bundles (one per suite); None = reports/ "
        "next to the warehouse, where `tmlbench report` writes too",
    )

    def file(self) -> Path:
        return Path(self.path).expanduser().resolve() if self.path else warehouse_path()

    def snapshot_file(self) -> Path:
        return (
            Path(self.snapshot).expanduser().resolve()
            if self.snapshot
            else snapshot_path(self.file())
        )

    def reports_dir(self) -> Path:
        """Where the ``reports`` asset publishes each suite's bundle, ``<reports_dir>/<suite>/``."""
        if self.reports:
            return Path(self.reports).expanduser().resolve()
        return reports_path(self.file())

    @contextmanager
    def connection(self, read_only: bool = False) -> Iterator[duckdb.DuckDBPyConnection]:
        con = connect(self.file(), read_only=read_only)
        try:
            if not read_only:
                apply_ddl(con)
            yield con
        finally:
            con.close()

    def dbt_args(self) -> list[str]:
        """What points a dbt command at this warehouse (warehouse/dbt.py's vars)."""
        return vars_args(self.file())


# Where the definitions read the dbt manifest from, when not dbt_project/target: a folder that
# `dbt parse --target-path` wrote (the tests parse into a temp folder of their own).
DBT_TARGET_ENV = "TMLBENCH_DBT_TARGET"


def dbt_project() -> DbtProject:
    """The dbt project; its manifest is read from ``$TMLBENCH_DBT_TARGET`` if set, else from
    ``dbt_project/target``, where `make manifest` builds it (never at import)."""
    return DbtProject(
        project_dir=DBT_PROJECT_DIR,
        profiles_dir=DBT_PROJECT_DIR,
        target_path=os.environ.get(DBT_TARGET_ENV) or "target",
    )


class WarehouseDbt(DbtCliResource):
    """dagster-dbt's dbt resource without two things it does before every dbt command, 3 s of
    CPU and of wall time in each run that builds the marts (benchmarks/dbt_resource.py), on the
    way from a finished setting to the published snapshot:

    - it runs ``dbt --version`` to learn the CLI's version: the CLI is the one beside this
      interpreter (``warehouse.dbt.dbt_executable``), so its version is the installed dbt-core's;
    - it loads dbt's project, profile and macros in this process to make an adapter, which only
      its row-count and column-metadata fetches use; the dbt asset fetches neither.
    """

    @cached_property
    def _cli_version(self) -> version.Version:
        return version.parse(metadata.version("dbt-core"))

    def _initialize_dbt_core_adapter(self, args: Sequence[str]) -> "BaseAdapter":
        # Its caller takes None for no adapter (the invocation's adapter is optional), though
        # this method's annotation, which an override keeps, says otherwise.
        return cast("BaseAdapter", None)


def dbt_resource() -> DbtCliResource:
    project = dbt_project()
    return WarehouseDbt(
        project_dir=str(project.project_dir),
        profiles_dir=str(project.profiles_dir),
        dbt_executable=str(dbt_executable()),
    )


class Resources(TypedDict):
    """The resources the assets ask for, by the names they ask by."""

    bench: BenchConfig
    sandbox: SandboxBackend
    warehouse: DuckDBWarehouse
    dbt: DbtCliResource


def default_resources() -> Resources:
    return Resources(
        bench=BenchConfig(),
        sandbox=SandboxBackend(),
        warehouse=DuckDBWarehouse(),
        dbt=dbt_resource(),
    )
