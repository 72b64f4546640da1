"""Automation: the nightly re-run of a suite; loading and marts follow by declarative automation.

The raw load carries ``on_new_agent_runs()``, every dbt model, the snapshot and the report
bundles ``on_new_data()`` (``orchestration.conditions``): once any suite's agent runs have a new
materialization, the automation sensor's next tick requests the raw load, the dbt models, the
snapshot and the reports together, as one run. The nightly job only tops up settings that are
short of successes (runs are resumable).
"""

from typing import TYPE_CHECKING

import dagster as dg

from orchestration.suites import SuiteFile

if TYPE_CHECKING:  # what define_asset_job returns: dagster does not export its type
    from dagster._core.definitions.unresolved_asset_job_definition import (
        UnresolvedAssetJobDefinition,
    )


def build_automation(
    suite_file: SuiteFile, agent_runs: dg.AssetsDefinition
) -> tuple["UnresolvedAssetJobDefinition", dg.ScheduleDefinition]:
    """A suite's job over all its settings and its nightly schedule (stopped: a person turns on
    the suites worth a nightly run, an LLM suite costs money)."""
    job = dg.define_asset_job(
        f"{suite_file.ident}_agent_runs",
        selection=[agent_runs],
        description=f"The agent runs of `suites/{suite_file.stem}.yaml`: the settings a launch "
        "(or the nightly schedule) selects, in one run.",
        tags=suite_file.run_tags,  # job tags go on each of its runs, too
    )
    partitions = suite_file.partitions

    @dg.schedule(
        name=f"nightly_{suite_file.ident}",
        job=job,
        cron_schedule="0 2 * * *",
        default_status=dg.DefaultScheduleStatus.STOPPED,
        description=f"Every night at 02:00, one run over all settings of "
        f"`suites/{suite_file.stem}.yaml` (resumes what is missing).",
    )
    def nightly(context: dg.ScheduleEvaluationContext) -> dg.RunRequest | dg.SkipReason:
        keys = partitions.settings_range(partitions.current(context.instance))
        if keys is None:
            return dg.SkipReason(
                f"suite {suite_file.stem} has no partitions yet: the sensor sync_suite_partitions "
                "adds them from its file"
            )
        return dg.RunRequest(
            run_key=context.scheduled_execution_time.isoformat()
            if context.scheduled_execution_time
            else None,
            tags=partition_range_tags(*keys),
        )

    return job, nightly


# How often the automation conditions are evaluated. A finished setting waits up to this long for
# the tick that requests its load; that run then takes 20-30 s on a busy 2-core host (a run
# worker starting, the load, the dbt build, the snapshot). A tick over the shipped suites takes
# ~1.5 s there (benchmarks/ui_loop.py): a 5 s interval keeps the wait short at that cost. An idle
# UI pays it too: ~0.45 s of CPU a tick, ~9 % of a core while `make ui` runs (benchmarks/ui_idle.py).
AUTOMATION_INTERVAL_SECONDS = 5
AUTOMATION_SENSOR_NAME = "rebuild_warehouse_on_new_runs"


def build_automation_sensor() -> dg.AutomationConditionSensorDefinition:
    """Evaluates the conditions: new agent runs → raw load → dbt models → snapshot → reports."""
    return dg.AutomationConditionSensorDefinition(
        AUTOMATION_SENSOR_NAME,
        target=dg.AssetSelection.all(),
        default_status=dg.DefaultSensorStatus.RUNNING,
        minimum_interval_seconds=AUTOMATION_INTERVAL_SECONDS,
        description="Loads newly materialized agent runs and rebuilds the marts, the snapshot "
        "and the report bundles.",
    )


def partition_range_tags(first: str, last: str) -> dict[str, str]:
    """Tags that make one run cover a range of partitions (the assets use single-run backfills)."""
    return {
        "dagster/asset_partition_range_start": first,
        "dagster/asset_partition_range_end": last,
    }
