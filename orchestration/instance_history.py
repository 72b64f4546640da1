"""What the Dagster instance remembers, asked in the terms the assets need.

Every question tmlbench asks of the instance's event log and run storage is here: which settings
ran since the raw load last started (what the load reads), what the published snapshot was built
from (whether `make run` can skip dbt), and which suites a run works for (its tag). The asset
keys are arguments, so each question can be asked of any instance, a test's included.
"""

from __future__ import annotations

from collections.abc import Sequence

import dagster as dg

from orchestration.partitions import setting_of
from orchestration.suites import SUITE_TAG

# Materializations fetched per query of the event log (Dagster pages them).
PAGE = 1000


def last_materialization_started(instance: dg.DagsterInstance, asset: dg.AssetKey) -> float | None:
    """When the run of ``asset``'s latest materialization started (the materialization's own
    time if that run is gone from the run storage, or never started); None if never materialized.
    """
    last = instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=asset), limit=1, ascending=False
    ).records
    if not last:
        return None
    run = instance.get_run_record_by_id(last[0].run_id)
    if run is not None and run.start_time is not None:
        return run.start_time
    return last[0].timestamp


def partitions_materialized_since(
    instance: dg.DagsterInstance, asset: dg.AssetKey, since: float
) -> set[str]:
    """The partitions of ``asset`` materialized after ``since`` (a Unix time), however many."""
    partitions: set[str] = set()
    cursor = None
    while True:
        page = instance.fetch_materializations(
            dg.AssetRecordsFilter(asset_key=asset, after_timestamp=since),
            limit=PAGE,
            cursor=cursor,
        )
        partitions |= {r.partition_key for r in page.records if r.partition_key}
        if not page.has_more:
            return partitions
        cursor = page.cursor


def settings_run_since_last_load(
    instance: dg.DagsterInstance, raw_runs: dg.AssetKey, agent_runs: Sequence[dg.AssetKey]
) -> dict[str, list[str]] | None:
    """Suite id -> the settings (``agent|task|budget``) its ``agent_runs`` materialized since
    the last load of ``raw_runs`` started; None when ``raw_runs`` never was materialized, or
    nothing was (then the load rescans every record).

    Since the last load *started*, not since it ended: a setting that finished while that load
    ran may have been missed by it, and loading one twice costs a stat per file.
    """
    since = last_materialization_started(instance, raw_runs)
    if since is None:
        return None
    found: dict[str, list[str]] = {}
    for key in agent_runs:
        partitions = partitions_materialized_since(instance, key, since)
        if partitions:  # the suite is the key's first part (orchestration.suites.SuiteFile)
            found[key.path[0]] = sorted(setting_of(p) for p in partitions)
    return found or None


def snapshot_built_from(
    instance: dg.DagsterInstance, snapshot: dg.AssetKey, reports: dg.AssetKey
) -> str | None:
    """What the latest materialization of ``snapshot`` was built from (its ``built_from``
    metadata), when ``reports`` was materialized after it (a report step that failed is run
    again); None when the instance has no such history (a throwaway one, a first run)."""
    event = instance.get_latest_materialization_event(snapshot)
    built = event.asset_materialization if event else None
    recorded = built.metadata.get("built_from") if built else None
    if event is None or recorded is None or not isinstance(recorded.value, str):
        return None
    reported = instance.get_latest_materialization_event(reports)
    if reported is None or reported.timestamp < event.timestamp:
        return None
    return recorded.value


def run_suites(run: dg.DagsterRun) -> set[str]:
    """The suites a run is tagged with (``tmlbench/suite``: comma-separated)."""
    return {suite for suite in run.tags.get(SUITE_TAG, "").split(",") if suite}


def tag_run_with_suite(instance: dg.DagsterInstance, run: dg.DagsterRun, suite: str) -> None:
    """Add ``suite`` to the run's ``tmlbench/suite`` tag (a run that spans suites is tagged with
    each), reading the tags as the run storage holds them now, not as the run started."""
    now = instance.get_run_by_id(run.run_id) or run
    suites = run_suites(now)
    if suite not in suites:
        instance.add_run_tags(run.run_id, {SUITE_TAG: ",".join(sorted({*suites, suite}))})
