"""What the instance remembers, asked of a real (temporary) Dagster instance after real runs: the
settings materialized since the raw load last started, what the snapshot was built from, the
suites a run is tagged with.

No ``from __future__ import annotations``: Dagster reads the assets' ``context`` annotations.
"""

import dagster as dg
import pytest

from orchestration import instance_history
from orchestration.instance_history import (
    last_materialization_started,
    run_suites,
    settings_run_since_last_load,
    snapshot_built_from,
    tag_run_with_suite,
)
from orchestration.partitions import settings_partition_key
from orchestration.suites import SUITE_TAG

# integration: real Dagster instances and materializations
pytestmark = pytest.mark.integration

RAW_RUNS = dg.AssetKey(["raw", "runs"])
SNAPSHOT = dg.AssetKey("marts_snapshot")
REPORTS = dg.AssetKey("reports")
TINY_RUNS = dg.AssetKey(["tiny", "agent_runs"])
OTHER_RUNS = dg.AssetKey(["other", "agent_runs"])


def setting(agent: str, task: str = "t1") -> str:
    return str(settings_partition_key(agent, task, 30))


def ran(instance: dg.DagsterInstance, key: dg.AssetKey, *partitions: str) -> None:
    """Materializations of ``key``'s partitions, as an agent_runs run records them."""
    for partition in partitions:
        instance.report_runless_asset_event(dg.AssetMaterialization(key, partition=partition))


def load(instance: dg.DagsterInstance, while_loading: tuple[str, ...] = ()) -> str:
    """A real run materializing raw/runs; ``while_loading``: tiny settings that finish while it
    runs (after it started, before its materialization). Returns the run's id."""

    @dg.asset(key=RAW_RUNS)
    def raw_runs(context: dg.AssetExecutionContext) -> None:
        ran(context.instance, TINY_RUNS, *while_loading)

    result = dg.materialize([raw_runs], instance=instance)
    assert result.success
    return result.run_id


def test_the_settings_run_since_the_last_load_started(monkeypatch: pytest.MonkeyPatch):
    with dg.instance_for_test() as instance:
        ran(instance, TINY_RUNS, setting("a"))
        # never loaded: no answer (the load reads every record)
        assert settings_run_since_last_load(instance, RAW_RUNS, [TINY_RUNS]) is None

        first = load(instance, while_loading=(setting("b"),))
        # b finished while the load ran, which may have missed it: it counts; a did not
        assert settings_run_since_last_load(instance, RAW_RUNS, [TINY_RUNS, OTHER_RUNS]) == {
            "tiny": ["b|t1|30"]
        }
        run = instance.get_run_record_by_id(first)
        assert (
            run is not None and last_materialization_started(instance, RAW_RUNS) == run.start_time
        )

        load(instance)
        assert settings_run_since_last_load(instance, RAW_RUNS, [TINY_RUNS]) is None  # nothing new

        # many settings of two suites, read page by page
        monkeypatch.setattr(instance_history, "PAGE", 2)
        agents = [f"agent{n}" for n in range(5)]
        ran(instance, TINY_RUNS, *(setting(a) for a in agents), setting("agent0"))
        ran(instance, OTHER_RUNS, setting("x", "t2"))
        assert settings_run_since_last_load(instance, RAW_RUNS, [TINY_RUNS, OTHER_RUNS]) == {
            "tiny": [f"{a}|t1|30" for a in agents],
            "other": ["x|t2|30"],
        }


def test_a_load_no_run_records_counts_from_its_materialization():
    """A materialization reported without a run (the run storage has none of it)."""
    with dg.instance_for_test() as instance:
        assert last_materialization_started(instance, RAW_RUNS) is None
        instance.report_runless_asset_event(dg.AssetMaterialization(RAW_RUNS))
        event = instance.get_latest_materialization_event(RAW_RUNS)
        assert event is not None and instance.get_run_record_by_id(event.run_id) is None
        assert last_materialization_started(instance, RAW_RUNS) == event.timestamp


def test_the_snapshot_is_built_from_its_recorded_version_once_the_reports_follow_it():
    def publish(instance: dg.DagsterInstance, built_from: str | None) -> None:
        metadata = {} if built_from is None else {"built_from": built_from}

        @dg.asset(key=SNAPSHOT)
        def snapshot() -> dg.MaterializeResult[None]:
            return dg.MaterializeResult(metadata=metadata)

        assert dg.materialize([snapshot], instance=instance).success

    def report(instance: dg.DagsterInstance) -> None:
        @dg.asset(key=REPORTS)
        def reports() -> None:
            pass

        assert dg.materialize([reports], instance=instance).success

    with dg.instance_for_test() as instance:
        assert snapshot_built_from(instance, SNAPSHOT, REPORTS) is None  # no history
        publish(instance, "v1")
        assert snapshot_built_from(instance, SNAPSHOT, REPORTS) is None  # no reports yet
        report(instance)
        assert snapshot_built_from(instance, SNAPSHOT, REPORTS) == "v1"
        publish(instance, "v2")  # the reports are now older than the snapshot
        assert snapshot_built_from(instance, SNAPSHOT, REPORTS) is None
        report(instance)
        assert snapshot_built_from(instance, SNAPSHOT, REPORTS) == "v2"
        publish(instance, None)  # a snapshot that does not say what it was built from
        report(instance)
        assert snapshot_built_from(instance, SNAPSHOT, REPORTS) is None


def test_a_run_is_tagged_with_every_suite_it_works_for():
    @dg.asset
    def works_for_suites(context: dg.AssetExecutionContext) -> None:
        for suite in ("tiny", "other", "tiny"):
            tag_run_with_suite(context.instance, context.run, suite)

    with dg.instance_for_test() as instance:
        result = dg.materialize([works_for_suites], instance=instance, tags={SUITE_TAG: "demo"})
        assert result.success
        run = instance.get_run_by_id(result.run_id)
        assert run is not None
        assert run.tags[SUITE_TAG] == "demo,other,tiny"
        assert run_suites(run) == {"demo", "other", "tiny"}
