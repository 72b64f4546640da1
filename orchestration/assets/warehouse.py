"""The raw load (run records and specs into DuckDB) and the published read-only marts snapshot.

Nothing new, nothing rebuilt: the raw assets report a data version derived from their tables'
content, so a load that changed nothing leaves them as they were, and the dbt models and the
snapshot (``orchestration.conditions.on_new_data``) are not rebuilt by automation. The snapshot
records what it was built from (``marts_inputs_version``): `make run` skips dbt and the snapshot
when that is what the warehouse holds now.
"""

from collections.abc import Iterable, Iterator
from pathlib import Path

import dagster as dg
from pydantic import Field

from orchestration.conditions import on_new_agent_runs, on_new_data, with_the_raw_load
from orchestration.instance_history import settings_run_since_last_load
from orchestration.metadata import Metadata
from orchestration.remedies import failures_named
from orchestration.resources import BenchConfig, DuckDBWarehouse
from runner.config import Paths
from warehouse.marts_inputs import marts_inputs_version
from warehouse.raw_load import SPEC_TABLES, LoadScope, RawLoad, load_raw
from warehouse.snapshot import publish_snapshot

# One writer at a time on the DuckDB file: every step that opens it is in this pool
# (limit 1 in the instance's dagster.yaml), so no two steps hold the file at once.
DUCKDB_POOL = "duckdb"
RAW_RUNS = dg.AssetKey(["raw", "runs"])
RAW_TASKS = dg.AssetKey(["raw", "tasks"])
RAW_AGENTS = dg.AssetKey(["raw", "agents"])
RAW_SUITES = dg.AssetKey(["raw", "suites"])
RAW_SUITE_SETTINGS = dg.AssetKey(["raw", "suite_settings"])
RAW_BASELINES = dg.AssetKey(["raw", "baselines"])
RAW_RESUMPTIONS = dg.AssetKey(["raw", "resumptions"])
# Every raw table dbt's sources read (dbt_project/models/staging/_raw__sources.yml): each is an
# output of the raw load, so dbt's staging models wait for it and run with it.
RAW_KEYS = (
    RAW_RUNS,
    RAW_TASKS,
    RAW_AGENTS,
    RAW_SUITES,
    RAW_SUITE_SETTINGS,
    RAW_BASELINES,
    RAW_RESUMPTIONS,
)
SNAPSHOT = dg.AssetKey("marts_snapshot")
STATUS_CHECK = "one_status_per_attempt"


class RawLoadConfig(dg.Config):
    """Which run folders a materialization of the raw load reads."""

    settings: dict[str, list[str]] | None = Field(
        default=None,
        description="suite id -> setting keys (agent|task|budget) whose run folders to load; "
        "unset: the settings any suite's agent_runs materialized since the last load, or, when "
        "there are none, a rescan of every record (cheap: unchanged files are only stat'ed)",
    )
    full_rescan: bool = Field(default=False, description="scan every record, whatever ran")
    rehash: bool = Field(
        default=False, description="read and hash every record file, not only changed ones"
    )


@dg.multi_asset(
    name="raw_warehouse",
    group_name="warehouse",
    pool=DUCKDB_POOL,
    specs=[
        dg.AssetSpec(
            RAW_RUNS,
            # deps: every suite's agent runs (definitions.py adds them; one warehouse for all)
            description="One row per attempt, loaded idempotently from every suite's run "
            "records: the settings just run, or an index-based rescan of every record.",
            automation_condition=on_new_agent_runs(),
            kinds={"duckdb"},
        ),
        *(
            dg.AssetSpec(
                key,
                description=description,
                automation_condition=with_the_raw_load(RAW_RUNS),
                kinds={"duckdb"},
            )
            for key, description in (
                (RAW_TASKS, "Task specs."),
                (RAW_AGENTS, "Agent specs."),
                (RAW_SUITES, "Suite specs (their harness-error ceilings)."),
                (RAW_SUITE_SETTINGS, "Every setting (agent, task, budget) each suite file lists."),
                # written by `tmlbench warehouse import-tml-bench`, never by the load: it keeps
                # the rows and reports their version (dbt rebuilds after an import's next load)
                (
                    RAW_BASELINES,
                    "Reference scores imported from the original TML-bench's baselines table "
                    "(tmlbench warehouse import-tml-bench); the load keeps them as they are.",
                ),
                (
                    RAW_RESUMPTIONS,
                    "The faults resumptions forgave, one row per run id, loaded with the runs "
                    "from each suite's resumption log (`resumptions.jsonl` in its runs folder).",
                ),
            )
        ),
    ],
    check_specs=[
        dg.AssetCheckSpec(
            STATUS_CHECK, asset=RAW_RUNS, description="every attempt is one row with one status"
        )
    ],
    can_subset=False,
)
def raw_warehouse(
    context: dg.AssetExecutionContext,
    config: RawLoadConfig,
    bench: BenchConfig,
    warehouse: DuckDBWarehouse,
) -> Iterator[dg.MaterializeResult[None] | dg.AssetCheckResult]:
    paths = bench.paths()  # every suite's runs_subdir is under its runs_dir
    with failures_named():  # settings the config names that are no suite's: named, nothing loaded
        scope = _load_scope(context, config, paths)
    with warehouse.connection() as con:
        load = load_raw(con, paths, scope, rehash=config.rehash)
    for line in load.warnings():
        context.log.warning(line)
    context.log.info(load.summary())
    yield from _load_results(load, warehouse.file())


def _load_scope(
    context: dg.AssetExecutionContext, config: RawLoadConfig, paths: Paths
) -> LoadScope:
    """Every record when asked to, the settings the config names, else those any suite's
    ``agent_runs`` materialized since the last load started (none: every record)."""
    if config.full_rescan:
        return LoadScope()
    if config.settings is not None:
        return LoadScope.of_settings(paths, config.settings)
    upstream = context.assets_def.asset_deps.get(RAW_RUNS, set())
    ran = settings_run_since_last_load(context.instance, RAW_RUNS, sorted(upstream))
    # settings that left their suite since they ran: a rescan of every record finds them
    return LoadScope() if ran is None else LoadScope.of_settings(paths, ran, unknown_ok=True)


def _load_results(
    load: RawLoad, warehouse_file: Path
) -> Iterator[dg.MaterializeResult[None] | dg.AssetCheckResult]:
    """A materialization of each raw table with its data version, and the status check."""
    report = load.runs
    yield dg.MaterializeResult(
        asset_key=RAW_RUNS,
        data_version=dg.DataVersion(load.versions[_table(RAW_RUNS)]),
        metadata={
            "warehouse": str(warehouse_file),
            "runs_dir": str(load.runs_dir),
            "scope": load.scope,
            "new": report.new,
            "unchanged": report.unchanged,
            "rejected": len(report.rejected),
            "rejected_examples": [why for _, why in report.rejected[:5]],
            "parsed": report.parsed,
            "dagster/row_count": load.rows[_table(RAW_RUNS)],
        },
    )
    for key in RAW_KEYS:
        if key == RAW_RUNS:
            continue
        table = _table(key)
        metadata: Metadata = {"dagster/row_count": load.rows[table]}
        if table in SPEC_TABLES:
            metadata["skipped_spec_files"] = load.skipped_specs
        yield dg.MaterializeResult(
            asset_key=key, data_version=dg.DataVersion(load.versions[table]), metadata=metadata
        )
    yield dg.AssetCheckResult(
        asset_key=RAW_RUNS,
        check_name=STATUS_CHECK,
        passed=not load.status_problems,
        metadata={"problems": load.status_problems, "runs": load.rows[_table(RAW_RUNS)]},
    )


def _table(key: dg.AssetKey) -> str:
    return ".".join(key.path)


def build_snapshot_asset(mart_keys: Iterable[dg.AssetKey]) -> dg.AssetsDefinition:
    @dg.asset(
        name=SNAPSHOT.path[0],
        group_name="publish",
        deps=list(mart_keys),
        pool=DUCKDB_POOL,
        automation_condition=on_new_data(),
        kinds={"duckdb"},
        description="Read-only copy of the marts for the dashboard, swapped in atomically.",
    )
    def marts_snapshot(warehouse: DuckDBWarehouse) -> dg.MaterializeResult[None]:
        with warehouse.connection(read_only=True) as con:
            built_from = marts_inputs_version(con)
        target = warehouse.snapshot_file()
        counts = publish_snapshot(warehouse.file(), target)
        return dg.MaterializeResult(
            metadata={
                "path": str(target),
                "tables": len(counts),
                "rows": dg.MetadataValue.json(counts),
                "built_from": built_from,
            }
        )

    return marts_snapshot
