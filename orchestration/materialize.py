"""`make run`: materialize a suite end to end through Dagster, in this process.

    python -m orchestration.materialize --suite demo

Three runs, because the graph has two partitionings: prepared tasks (all task partitions in one
run), agent runs (all settings in one run, attempts in parallel on pinned CPUs), then the raw
load, every dbt model with its tests, and the snapshot. Each run is recorded in the Dagster
instance ($DAGSTER_HOME, when set), so `make ui` shows them.
"""

import argparse
import os
import sys
import time

import dagster as dg

from orchestration.definitions import build_defs
from orchestration.partitions import setting_keys
from orchestration.schedules import partition_range_tags
from runner.config import Paths
from runner.registry import load_suite

# Dagster logs each step at INFO; its DEBUG stream would bury the progress of a long run.
QUIET = {"loggers": {"console": {"config": {"log_level": "INFO"}}}}


def materialize_suite(
    suite_id: str, resources: dict | None = None, instance: dg.DagsterInstance | None = None
) -> list[dg.ExecuteInProcessResult]:
    suite = load_suite(Paths.from_env().suites_dir, suite_id)
    defs = build_defs(suite, resources)
    everything = [*defs.assets, *defs.asset_checks]
    downstream = dg.AssetSelection.all() - dg.AssetSelection.assets("prepared_tasks", "agent_runs")
    steps = [
        ("prepared tasks", dg.AssetSelection.assets("prepared_tasks"), suite.tasks),
        ("agent runs", dg.AssetSelection.assets("agent_runs"), setting_keys(suite)),
        ("warehouse, dbt, snapshot", downstream, None),
    ]
    results = []
    for title, selection, keys in steps:
        started = time.perf_counter()
        print(f"== {title}", flush=True)
        result = dg.materialize(
            everything,
            selection=selection,
            resources=defs.resources,
            instance=instance,
            tags=partition_range_tags(keys[0], keys[-1]) if keys else None,
            raise_on_error=False,
            run_config=QUIET,
        )
        print(
            f"== {title}: {'ok' if result.success else 'FAILED'} in {time.perf_counter() - started:.0f} s"
        )
        results.append(result)
        if not result.success:
            break
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suite", default="demo")
    args = parser.parse_args(argv)
    # Runs are recorded where `make ui` looks when DAGSTER_HOME is set; else in a throwaway instance.
    instance = dg.DagsterInstance.get() if os.environ.get("DAGSTER_HOME") else None
    results = materialize_suite(args.suite, instance=instance)
    return 0 if all(r.success for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
