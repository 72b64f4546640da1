"""What the automation sensor requests, evaluated tick by tick on a real instance (no runs).

Two suites: ``loop`` and ``idle``, whose settings are never run (every partition of its
agent_runs missing, as an LLM suite nobody paid for). One new materialization of one ``loop``
setting must request, in one tick, the raw load (all its outputs), every dbt model, the
snapshot and the report bundles: one run. Nothing new, nothing requested, including on a fresh
instance.
"""

from __future__ import annotations

import dagster as dg
import pytest

from tests.support.tiny_suites import tiny_suite_resources

# integration: a Dagster instance's automation ticks over the parsed dbt project
pytestmark = pytest.mark.integration

BANK = "bank-customer-churn-ict-u-ai"
S6E1 = "playground-series-s6e1"


def test_one_new_setting_requests_load_marts_and_snapshot_in_one_tick(tmp_path, dbt_manifest):
    from orchestration.definitions import build_defs
    from orchestration.partitions import settings_partition_key
    from orchestration.sensors import sync_suite
    from orchestration.suites import SuiteFile, scan_specs

    base = {"budgets": [30], "attempts": 1, "twin_rows": 300}
    idle = {"id": "idle", "title": "idle", "tasks": [BANK, S6E1], "agents": ["baseline-linear"]}
    tiny_suite_resources(tmp_path, {**base, **idle, "data_subdir": "idle", "runs_subdir": "idle"})
    loop = {"id": "loop", "title": "loop", "tasks": [BANK], "agents": ["baseline-constant"]}
    resources = tiny_suite_resources(
        tmp_path, {**base, **loop, "data_subdir": "loop", "runs_subdir": "loop"}
    )
    suites = [SuiteFile("idle"), SuiteFile("loop")]
    defs = build_defs(suites, resources)
    graph = defs.resolve_asset_graph()
    suite_assets = {s.prepared_tasks_key for s in suites} | {s.agent_runs_key for s in suites}
    downstream = {key for key in graph.get_all_asset_keys() if key not in suite_assets}

    with dg.instance_for_test() as instance:
        specs = scan_specs(resources["bench"].paths()).keys
        for suite in suites:
            sync_suite(instance, suite, specs[suite.stem])

        def tick(cursor=None):
            result = dg.evaluate_automation_conditions(defs, instance, cursor=cursor)
            requested = {r.key for r in result.results if r.true_subset.size}
            return requested, result.cursor

        # a fresh instance (`make ui` first, no warehouse): nothing runs on nothing
        requested, cursor = tick()
        assert requested == set()
        requested, cursor = tick(cursor)
        assert requested == set()

        setting = str(settings_partition_key("baseline-constant", BANK, 30))
        instance.report_runless_asset_event(
            dg.AssetMaterialization(["loop", "agent_runs"], partition=setting)
        )
        requested, cursor = tick(cursor)
        # every raw table, every dbt model, the snapshot, the reports: one tick, so one run
        assert requested == downstream, sorted(k.to_user_string() for k in downstream - requested)
        assert dg.AssetKey(["raw", "suite_settings"]) in requested
        assert dg.AssetKey("marts_snapshot") in requested
        assert dg.AssetKey("reports") in requested
        # ... and nothing of them partitioned: Dagster puts them in one run
        assert not [k for k in requested if graph.get(k).partitions_def is not None]

        # requested once: nothing new since, nothing requested again
        requested, cursor = tick(cursor)
        assert requested == set()
