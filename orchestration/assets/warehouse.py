"""The raw load (run records and specs into DuckDB) and the published read-only marts snapshot."""

from collections.abc import Iterable

import dagster as dg

from orchestration.resources import BenchConfig, DuckDBWarehouse
from warehouse.audit import status_problems
from warehouse.loader import load_runs, load_specs
from warehouse.snapshot import publish_snapshot

# One writer at a time on the DuckDB file: every step that opens it is in this pool
# (limit 1 in the instance's dagster.yaml), so no two steps hold the file at once.
DUCKDB_POOL = "duckdb"
RAW_RUNS = dg.AssetKey(["raw", "runs"])
RAW_TASKS = dg.AssetKey(["raw", "tasks"])
RAW_AGENTS = dg.AssetKey(["raw", "agents"])
RAW_SUITES = dg.AssetKey(["raw", "suites"])
STATUS_CHECK = "one_status_per_attempt"


@dg.multi_asset(
    name="raw_warehouse",
    group_name="warehouse",
    pool=DUCKDB_POOL,
    specs=[
        dg.AssetSpec(
            RAW_RUNS,
            # deps: every suite's agent runs (definitions.py adds them; one warehouse for all)
            description="One row per attempt, loaded idempotently from every suite's run records.",
            automation_condition=dg.AutomationCondition.eager(),
            kinds={"duckdb"},
        ),
        dg.AssetSpec(RAW_TASKS, description="Task specs.", kinds={"duckdb"}),
        dg.AssetSpec(RAW_AGENTS, description="Agent specs.", kinds={"duckdb"}),
        dg.AssetSpec(
            RAW_SUITES, description="Suite specs (their harness-error ceilings).", kinds={"duckdb"}
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
    context: dg.AssetExecutionContext, bench: BenchConfig, warehouse: DuckDBWarehouse
) -> Iterable[dg.MaterializeResult | dg.AssetCheckResult]:
    runs_dir = bench.paths().runs_dir  # every suite's runs_subdir is under it
    with warehouse.connection() as con:
        specs = load_specs(con, bench.paths())
        if runs_dir.is_dir():
            report = load_runs(con, runs_dir)
        else:
            context.log.warning(f"no runs directory at {runs_dir}: no records to load")
            report = None
        total = con.execute("select count(*) from raw.runs").fetchone()[0]
        problems = status_problems(con)
    rejected = report.rejected if report else []
    for path, why in rejected:
        context.log.warning(f"rejected {path}: {why}")
    yield dg.MaterializeResult(
        asset_key=RAW_RUNS,
        metadata={
            "warehouse": str(warehouse.file()),
            "runs_dir": str(runs_dir),
            "new": report.new if report else 0,
            "unchanged": report.unchanged if report else 0,
            "rejected": len(rejected),
            "rejected_examples": [why for _, why in rejected[:5]],
            "dagster/row_count": total,
        },
    )
    yield dg.MaterializeResult(asset_key=RAW_TASKS, metadata={"dagster/row_count": specs["tasks"]})
    yield dg.MaterializeResult(
        asset_key=RAW_AGENTS, metadata={"dagster/row_count": specs["agents"]}
    )
    yield dg.MaterializeResult(
        asset_key=RAW_SUITES, metadata={"dagster/row_count": specs["suites"]}
    )
    yield dg.AssetCheckResult(
        asset_key=RAW_RUNS,
        check_name=STATUS_CHECK,
        passed=not problems,
        metadata={"problems": problems, "runs": total},
    )


def build_snapshot_asset(mart_keys: Iterable[dg.AssetKey]) -> dg.AssetsDefinition:
    @dg.asset(
        name="marts_snapshot",
        group_name="publish",
        deps=list(mart_keys),
        pool=DUCKDB_POOL,
        automation_condition=dg.AutomationCondition.eager(),
        kinds={"duckdb"},
        description="Read-only copy of the marts for the dashboard, swapped in atomically.",
    )
    def marts_snapshot(warehouse: DuckDBWarehouse) -> dg.MaterializeResult:
        target = warehouse.snapshot_file()
        counts = publish_snapshot(warehouse.file(), target)
        return dg.MaterializeResult(
            metadata={
                "path": str(target),
                "tables": len(counts),
                "rows": dg.MetadataValue.json(counts),
            }
        )

    return marts_snapshot
