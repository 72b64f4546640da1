"""The Dagster definitions of tmlbench (loaded by `dg check defs`, `dagster dev`, `make run`).

One asset group per suite file (``suite_<stem>``: its prepared tasks and agent runs, their checks,
a job and a nightly schedule); one warehouse, its dbt models, snapshot and report bundles, shared
by all. The suite folder is listed here by file name only: what a suite contains is read by the
sensor that keeps its partitions in step, and by its assets when they run, so a broken file never
stops this module from loading.
"""

from collections.abc import Sequence

import dagster as dg

from orchestration.assets.benchmark import build_benchmark_assets
from orchestration.assets.dbt import build_dbt_assets, mart_keys
from orchestration.assets.report import reports
from orchestration.assets.warehouse import RAW_RUNS, build_snapshot_asset, raw_warehouse
from orchestration.checks import build_checks
from orchestration.resources import Resources, default_resources
from orchestration.schedules import build_automation, build_automation_sensor
from orchestration.sensors import build_suite_sensor
from orchestration.suites import SuiteFile, suite_files
from runner.config import Paths


def build_defs(suites: Sequence[SuiteFile], resources: Resources | None = None) -> dg.Definitions:
    assets: list[dg.AssetsDefinition] = []
    checks: list[dg.AssetChecksDefinition] = []
    automation = []
    for suite in suites:
        prepared_tasks, agent_runs = build_benchmark_assets(suite)
        automation.append(build_automation(suite, agent_runs))
        assets += [prepared_tasks, agent_runs]
        checks += build_checks(suite, prepared_tasks, agent_runs)
    models = build_dbt_assets()
    every_suites_runs = [suite.agent_runs_key for suite in suites]
    raw = raw_warehouse.map_asset_specs(
        lambda spec: (
            spec.replace_attributes(deps=every_suites_runs) if spec.key == RAW_RUNS else spec
        )
    )
    return dg.Definitions(
        assets=[*assets, raw, models, build_snapshot_asset(mart_keys(models)), reports],
        asset_checks=checks,
        jobs=[job for job, _ in automation],
        schedules=[schedule for _, schedule in automation],
        sensors=[build_suite_sensor(suites), build_automation_sensor()],
        resources=resources or default_resources(),
        # Every step of a run in the run's own process. The default (one process per step)
        # starts Python and loads these definitions again for each step, 5-15 s apiece on a
        # busy 2-core host, and buys nothing here: the warehouse steps run one after another
        # (pool duckdb, and each needs the one before), agent attempts run in threads of their
        # own step, and checks take a second. With it, a setting's run ends, and the load →
        # dbt → snapshot run that follows publishes, tens of seconds sooner (benchmarks/ui_loop.py).
        executor=dg.in_process_executor,
    )


# The suites the UI offers: the files of $TMLBENCH_SUITES_DIR (else suites/) when the code
# location loads; a suite file added later appears on a reload of the code location.
defs = build_defs(suite_files(Paths.from_env().suites_dir)[0])
