"""The Dagster definitions of tmlbench (loaded by `dg check defs`, `dagster dev`, `make run`)."""

import dagster as dg

from orchestration.assets.benchmark import build_benchmark_assets
from orchestration.assets.dbt import build_dbt_assets, mart_keys
from orchestration.assets.warehouse import build_snapshot_asset, raw_warehouse
from orchestration.checks import build_checks
from orchestration.resources import default_resources
from orchestration.schedules import build_automation, build_automation_sensor
from runner.config import REPO_ROOT
from runner.registry import load_suite
from runner.specs import SuiteSpec

# Partitions are fixed when definitions load, so the UI shows the default suite's settings;
# `python -m orchestration.materialize --suite <id>` builds definitions for any other suite.
DEFAULT_SUITE = "demo"


def build_defs(suite: SuiteSpec, resources: dict | None = None) -> dg.Definitions:
    prepared_tasks, agent_runs = build_benchmark_assets(suite)
    models = build_dbt_assets()
    job, schedule = build_automation(suite, agent_runs)
    return dg.Definitions(
        assets=[
            prepared_tasks,
            agent_runs,
            raw_warehouse,
            models,
            build_snapshot_asset(mart_keys(models)),
        ],
        asset_checks=build_checks(prepared_tasks, agent_runs),
        jobs=[job],
        schedules=[schedule],
        sensors=[build_automation_sensor()],
        resources=resources or default_resources(suite.id),
    )


defs = build_defs(load_suite(REPO_ROOT / "suites", DEFAULT_SUITE))
