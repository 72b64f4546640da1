"""The raw load (run records and specs into DuckDB) and the published read-only marts snapshot.

Nothing new, nothing rebuilt: the raw assets report a data version derived from their tables'
content, so a load that changed nothing leaves them as they were, and the dbt models and the
snapshot (``orchestration.conditions.on_new_data``) are not rebuilt by automation. The snapshot
records what it was built from (``marts_inputs_version``): `make run` skips dbt and the snapshot
when that is what the warehouse holds now.
"""

import hashlib
from collections.abc import Iterable, Sequence
from typing import Any

import dagster as dg
import duckdb
from pydantic import Field

from orchestration.conditions import on_new_agent_runs, on_new_data, with_the_raw_load
from orchestration.partitions import setting_of
from orchestration.resources import BenchConfig, DuckDBWarehouse
from runner.errors import TmlbenchError
from runner.suites import suite_settings
from warehouse.audit import status_problems
from warehouse.dbt import project_fingerprint
from warehouse.loader import LoadReport, content_version, load_runs, load_specs
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
# The tables the spec files fill (load_specs): a skipped file is reported on each.
SPEC_KEYS = (RAW_TASKS, RAW_AGENTS, RAW_SUITES, RAW_SUITE_SETTINGS)
SNAPSHOT = dg.AssetKey("marts_snapshot")
STATUS_CHECK = "one_status_per_attempt"
MARTS_SOURCES = tuple(".".join(key.path) for key in RAW_KEYS)


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
) -> Iterable[dg.MaterializeResult | dg.AssetCheckResult]:
    runs_dir = bench.paths().runs_dir  # every suite's runs_subdir is under it
    settings = None if config.full_rescan else config.settings
    prefixes = None if settings is None else setting_prefixes(bench, settings)
    if settings is None and not config.full_rescan:
        upstream = context.assets_def.asset_deps.get(RAW_RUNS, set())
        settings = settings_run_since_last_load(context.instance, sorted(upstream))
        # settings that left their suite since they ran: a full rescan finds their records
        prefixes = setting_prefixes(bench, settings, unknown_ok=True) if settings else None
    with warehouse.connection() as con:
        specs = load_specs(con, bench.paths())
        if not runs_dir.is_dir():
            context.log.warning(f"no runs directory at {runs_dir}: no records to load")
            report, scope = LoadReport(0, 0, []), "no runs directory"
        elif prefixes is None:
            report, scope = load_runs(con, runs_dir, rehash=config.rehash), "every record"
        else:
            report = load_runs(con, runs_dir, prefixes=prefixes, rehash=config.rehash)
            scope = f"{sum(len(keys) for keys in (settings or {}).values())} settings"
        total = _count(con, "raw.runs")
        problems = status_problems(con)
        versions = {key: content_version(con, _table(key)) for key in RAW_KEYS}
        # rows, not valid files: a skipped file's rows from an earlier load are kept
        rows = {key: _count(con, _table(key)) for key in RAW_KEYS if key != RAW_RUNS}
    for path, why in report.rejected:
        context.log.warning(f"rejected {path}: {why}")
    for problem in specs.skipped:  # every valid spec loaded; what they had before is kept
        context.log.warning(f"skipped spec file {problem.message}")
    context.log.info(
        f"raw load ({scope}): {report.new} new, {report.unchanged} unchanged, "
        f"{len(report.rejected)} rejected, {report.parsed} files parsed"
    )
    yield dg.MaterializeResult(
        asset_key=RAW_RUNS,
        data_version=dg.DataVersion(versions[RAW_RUNS]),
        metadata={
            "warehouse": str(warehouse.file()),
            "runs_dir": str(runs_dir),
            "scope": scope,
            "new": report.new,
            "unchanged": report.unchanged,
            "rejected": len(report.rejected),
            "rejected_examples": [why for _, why in report.rejected[:5]],
            "parsed": report.parsed,
            "dagster/row_count": total,
        },
    )
    skipped = [problem.message for problem in specs.skipped]
    for key, count in rows.items():
        metadata: dict[str, Any] = {"dagster/row_count": count}
        if key in SPEC_KEYS:
            metadata["skipped_spec_files"] = skipped
        yield dg.MaterializeResult(
            asset_key=key, data_version=dg.DataVersion(versions[key]), metadata=metadata
        )
    yield dg.AssetCheckResult(
        asset_key=RAW_RUNS,
        check_name=STATUS_CHECK,
        passed=not problems,
        metadata={"problems": problems, "runs": total},
    )


def settings_run_since_last_load(
    instance: dg.DagsterInstance, agent_runs: Sequence[dg.AssetKey]
) -> dict[str, list[str]] | None:
    """Suite id -> the settings its ``agent_runs`` materialized since the last load of raw/runs
    started; None when raw/runs never was materialized, or nothing was (then the load rescans
    every record).

    Since the last load *started*, not since it ended: a setting that finished while that load
    ran may have been missed by it, and loading one twice costs a stat per file.
    """
    last = instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=RAW_RUNS), limit=1, ascending=False
    ).records
    if not last:
        return None
    run = instance.get_run_record_by_id(last[0].run_id)
    since = run.start_time if run is not None and run.start_time is not None else last[0].timestamp
    found: dict[str, list[str]] = {}
    for key in agent_runs:
        partitions: set[str] = set()
        cursor = None
        while True:
            page = instance.fetch_materializations(
                dg.AssetRecordsFilter(asset_key=key, after_timestamp=since),
                limit=1000,
                cursor=cursor,
            )
            partitions |= {r.partition_key for r in page.records if r.partition_key}
            if not page.has_more:
                break
            cursor = page.cursor
        if partitions:  # the suite is the key's first part (orchestration.suites.SuiteFile)
            found[key.path[0]] = sorted(setting_of(p) for p in partitions)
    return found or None


def setting_prefixes(
    bench: BenchConfig, settings: dict[str, list[str]], unknown_ok: bool = False
) -> list[str] | None:
    """The run folders of the settings, as ``<runs_subdir>/<run id prefix>`` below the runs dir
    (``runner.suites.benchmark_settings.Setting.run_id_prefix``).

    A suite or setting that does not exist is an error, or with ``unknown_ok`` makes the answer
    None (load everything).
    """
    root = bench.paths().runs_dir.resolve()
    prefixes: set[str] = set()
    for suite_id, keys in settings.items():
        try:
            suite = bench.suite(suite_id)
        except TmlbenchError:
            if unknown_ok:
                return None
            raise
        runs_dir = bench.layout(suite).runs_dir
        prefix = {s.key: s.run_id_prefix for s in suite_settings(suite, bench.paths())}
        unknown = sorted(set(keys) - set(prefix))
        outside = not runs_dir.is_relative_to(root)
        if (unknown or outside) and unknown_ok:
            return None
        if unknown:
            raise dg.Failure(f"not settings of suite {suite_id}: {', '.join(unknown)}")
        if outside:
            raise dg.Failure(f"suite {suite_id} keeps its runs in {runs_dir}, not under {root}")
        folder = runs_dir.relative_to(root).as_posix()
        prefixes |= {prefix[k] if folder == "." else f"{folder}/{prefix[k]}" for k in keys}
    return sorted(prefixes)


def marts_inputs_version(con: duckdb.DuckDBPyConnection) -> str:
    """What the marts are a function of: the content of dbt's raw sources and the dbt project."""
    parts = [content_version(con, table) for table in MARTS_SOURCES]
    parts.append(project_fingerprint())
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


def _table(key: dg.AssetKey) -> str:
    return ".".join(key.path)


def _count(con: duckdb.DuckDBPyConnection, table: str) -> int:
    row = con.execute(f"select count(*) from {table}").fetchone()
    return int(row[0]) if row else 0


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
    def marts_snapshot(warehouse: DuckDBWarehouse) -> dg.MaterializeResult:
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
