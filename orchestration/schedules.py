"""Automation: the nightly re-run of the suite; loading and marts follow by declarative automation.

The raw load, every dbt model and the snapshot carry ``AutomationCondition.eager()``: once new
agent runs are materialized, Dagster's automation sensor loads them and rebuilds what depends
on them. The nightly job only tops up settings that are short of successes (runs are resumable).
"""

import dagster as dg

from orchestration.partitions import setting_keys
from runner.specs import SuiteSpec


def build_automation(suite: SuiteSpec, agent_runs: dg.AssetsDefinition):
    job = dg.define_asset_job("suite_runs", selection=[agent_runs])
    keys = setting_keys(suite)

    @dg.schedule(
        name="nightly_suite_runs",
        job=job,
        cron_schedule="0 2 * * *",
        default_status=dg.DefaultScheduleStatus.STOPPED,
        description="Every night at 02:00, one run over all settings (resumes what is missing).",
    )
    def nightly_suite_runs(context: dg.ScheduleEvaluationContext) -> dg.RunRequest:
        return dg.RunRequest(
            run_key=context.scheduled_execution_time.isoformat()
            if context.scheduled_execution_time
            else None,
            tags=partition_range_tags(keys[0], keys[-1]),
        )

    return job, nightly_suite_runs


def build_automation_sensor() -> dg.AutomationConditionSensorDefinition:
    """Evaluates the eager conditions: new agent runs → raw load → dbt models → snapshot."""
    return dg.AutomationConditionSensorDefinition(
        "rebuild_warehouse_on_new_runs",
        target=dg.AssetSelection.all(),
        default_status=dg.DefaultSensorStatus.RUNNING,
        minimum_interval_seconds=30,
        description="Loads newly materialized agent runs and rebuilds the marts and the snapshot.",
    )


def partition_range_tags(first: str, last: str) -> dict[str, str]:
    """Tags that make one run cover a range of partitions (the assets use single-run backfills)."""
    return {
        "dagster/asset_partition_range_start": first,
        "dagster/asset_partition_range_end": last,
    }
