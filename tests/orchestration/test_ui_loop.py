"""One click, whole loop: a setting materialized in the Dagster UI reaches the published snapshot
with no other launch, while another suite has never run a setting.

`dagster dev` (webserver + daemon, the instance settings of `make ui`) on a throwaway home,
warehouse, data, runs and suites folder; two suites: ``loop`` (one baseline, one task, one
budget, one attempt) and ``idle`` (never run: every partition of its agent_runs stays missing,
which held the old ``eager()`` raw load back for ever). The test prepares the task as
`tmlbench tasks prepare` does (the fix an unprepared setting's failed run names; materializing
``prepared_tasks`` in the UI is test_suites_in_ui's backfill, and here it would cost a run worker
for a step outside the loop), materializes one setting through GraphQL as the Materialize button
does, then waits for the snapshot to hold that setting's scores: the automation sensor alone has
to load the record, build the marts, publish the snapshot and write the report bundles, in one
run.
"""

from __future__ import annotations

import time
from pathlib import Path

import duckdb
import pytest
import yaml

from orchestration.partitions import settings_partition_key
from tests.support.tmlbench_cli import invoke
from tools.dagster_ui import DagsterUI, dagster_env, running_dagster

# The Dagster processes it starts read dbt_manifest's temp target ($TMLBENCH_DBT_TARGET), never the
# repository's dbt_project/target, which a `tmlbench warehouse build` elsewhere may be rewriting.
pytestmark = [pytest.mark.slow, pytest.mark.sandbox, pytest.mark.usefixtures("dbt_manifest")]

BANK = "bank-customer-churn-ict-u-ai"
S6E1 = "playground-series-s6e1"
AGENT, BUDGET = "baseline-constant", 30
SUITES = {
    "loop": {"tasks": [BANK], "agents": [AGENT], "attempts": 1},
    "idle": {"tasks": [BANK, S6E1], "agents": [AGENT, "baseline-linear"], "attempts": 2},
}
RUN_TIMEOUT = 300.0
LOOP_TIMEOUT = 180.0  # from the setting's run to the snapshot; the target is 30 s (benchmark)

LAST_RUNS = """
query LastRuns($keys: [AssetKeyInput!]!) {
  assetNodes(assetKeys: $keys) { assetKey { path } assetMaterializations(limit: 1) { runId } }
}
"""


def write_suites(folder: Path) -> None:
    folder.mkdir()
    for suite_id, fields in SUITES.items():
        suite = {
            "id": suite_id, "title": suite_id, "budgets": [BUDGET], "twin_rows": 300,
            "data_subdir": suite_id, "runs_subdir": suite_id, **fields,
        }  # fmt: skip
        (folder / f"{suite_id}.yaml").write_text(yaml.safe_dump(suite))


def prepare_task(env: dict[str, str], suite: str, task: str) -> None:
    """`tmlbench tasks prepare --suite SUITE TASK` in this process, with the UI's folders."""
    result = invoke(env, "tasks", "prepare", "--suite", suite, task)
    assert result.exit_code == 0, result.output


def last_run_ids(ui: DagsterUI, keys: list[list[str]]) -> dict[str, str]:
    """Asset key → the run of its latest materialization, for those of ``keys`` that have one."""
    nodes = ui.graphql(LAST_RUNS, {"keys": [{"path": k} for k in keys]})["assetNodes"]
    return {
        "/".join(n["assetKey"]["path"]): n["assetMaterializations"][0]["runId"]
        for n in nodes
        if n["assetMaterializations"]
    }


def wait_for_partition(ui: DagsterUI, key: list[str], partition: str) -> None:
    """The sync_suite_partitions sensor adds the suite's partitions on the daemon's first tick."""
    query = "query P($k: [AssetKeyInput!]!) { assetNodes(assetKeys: $k) { partitionKeys } }"
    deadline = time.monotonic() + 90
    while (
        partition not in ui.graphql(query, {"k": [{"path": key}]})["assetNodes"][0]["partitionKeys"]
    ):
        assert time.monotonic() < deadline, f"no partition {partition} of {key} after 90 s"
        time.sleep(1)


def snapshot_scores(snapshot: Path) -> list[tuple]:
    if not snapshot.is_file():
        return []
    con = duckdb.connect(str(snapshot), read_only=True)
    try:
        return con.execute(
            "select agent_id, task_id, budget_seconds, n_counted from marts.setting_scores"
            " where suite_id = 'loop'"
        ).fetchall()
    except duckdb.CatalogException:
        return []
    finally:
        con.close()


def test_a_setting_materialized_in_the_ui_reaches_the_snapshot(tmp_path: Path) -> None:
    write_suites(tmp_path / "suites")
    env = dagster_env(tmp_path, suites_dir=tmp_path / "suites")
    snapshot = tmp_path / "warehouse.snapshot.duckdb"
    setting = str(settings_partition_key(AGENT, BANK, BUDGET))
    prepare_task(env, "loop", BANK)
    with running_dagster(tmp_path, env) as ui:
        wait_for_partition(ui, ["loop", "agent_runs"], setting)
        ran = ui.wait_for_run(
            ui.materialize_partition(["loop", "agent_runs"], setting), RUN_TIMEOUT
        )
        assert ran["status"] == "SUCCESS", ran
        assert {"key": "dagster/partition", "value": setting} in ran["tags"]

        deadline = time.monotonic() + LOOP_TIMEOUT
        while not (scores := snapshot_scores(snapshot)):
            assert time.monotonic() < deadline, (
                f"no setting_scores of suite loop after {LOOP_TIMEOUT:.0f} s"
            )
            time.sleep(1)
        assert scores == [(AGENT, BANK, BUDGET, 1)]

        # the raw load, the marts, the snapshot and the report bundles went out as one run of
        # the automation; the reports are its last step, written after the snapshot is published
        deadline = time.monotonic() + 30
        while "marts_snapshot" not in (published := last_run_ids(ui, [["marts_snapshot"]])):
            assert time.monotonic() < deadline, "a snapshot file, but no materialization of it"
            time.sleep(0.5)
        automation = ui.wait_for_run(published["marts_snapshot"], RUN_TIMEOUT)
        assert automation["status"] == "SUCCESS"
        assert {"key": "dagster/from_automation_condition", "value": "true"} in automation["tags"]
        keys = [["raw", "runs"], ["raw", "suite_settings"], ["marts", "setting_scores"], ["marts_snapshot"], ["reports"]]  # fmt: skip
        run_ids = last_run_ids(ui, keys)
        assert len(run_ids) == len(keys) and set(run_ids.values()) == {automation["id"]}, run_ids
        assert (tmp_path / "reports" / "loop" / "report.html").is_file()  # next to the snapshot
