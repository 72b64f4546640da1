"""A new agent, run from the real Dagster UI without a restart (issue 15), through GraphQL.

Starts ``dagster dev`` (webserver and daemon, ``tools.dagster_ui``) with a PATH that lacks the
venv, a throwaway DAGSTER_HOME and copies of the agents and a one-setting suite in temporary
folders.
Then, as a person in the UI would:

1. waits for the ``sync_suite_partitions`` sensor to give the suite its partitions, and
   backfills them all (prepared task + the constant baseline's one setting: two assets of
   different partitionings, which the UI launches as a backfill);
2. once that backfill's runs have finished, adds an invalid agent file, then an agent file (a
   copy of the constant baseline) and its line in the suite file; waits for the tick that adds
   the new setting's partition: it failed, naming the invalid file and its field, and the code
   location stays loaded. The backfill daemon marks the first backfill done meanwhile (it looks
   every 30 s, as the sensor ticks: the two waits overlap);
3. materializes exactly the new partition, as the Materialize button does for one partition
   (one run, not a backfill): the new agent's record appears, the old one is untouched, and the
   run's events hold an observation per attempt with its progress and run folder.

The process group of `dagster dev` is always terminated.
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from orchestration.schedules import AUTOMATION_SENSOR_NAME
from orchestration.sensors import SENSOR_NAME
from runner.config import REPO_ROOT
from tools.dagster_ui import MODULE, DagsterUI, dagster_env, running_dagster

# The Dagster processes it starts read dbt_manifest's temp target ($TMLBENCH_DBT_TARGET), never the
# repository's dbt_project/target, which a `tmlbench warehouse build` elsewhere may be rewriting.
pytestmark = [pytest.mark.slow, pytest.mark.sandbox, pytest.mark.usefixtures("dbt_manifest")]

BANK = "bank-customer-churn-ict-u-ai"
SUITE = "mini"
TICK_TIMEOUT = 180.0  # a 30 s sensor interval on a busy 2-core machine
RUN_TIMEOUT = 600.0
RUN_FINISHED = ("SUCCESS", "FAILURE", "CANCELED")

PARTITIONS = """
query ($key: AssetKeyInput!) {
  assetNodeOrError(assetKey: $key) { ... on AssetNode { partitionKeys } }
}
"""
AUTOMATION_RUNS = """
query {
  runsOrError(filter: {tags: [{key: "dagster/from_automation_condition", value: "true"}]}) {
    ... on Runs { results { runId } }
  }
}
"""
SENSOR = """
query ($selector: SensorSelector!) {
  sensorOrError(sensorSelector: $selector) {
    __typename
    ... on Sensor {
      id
      sensorState {
        ticks(limit: 5) {
          id status timestamp skipReason
          error { message causes { message } }
        }
      }
    }
  }
}
"""
BACKFILL = """
mutation ($params: LaunchBackfillParams!) {
  launchPartitionBackfill(backfillParams: $params) {
    __typename
    ... on LaunchBackfillSuccess { backfillId }
    ... on PythonError { message }
    ... on PartitionSetNotFoundError { message }
    ... on InvalidStepError { invalidStepKey }
    ... on InvalidOutputError { invalidOutputName }
  }
}
"""
BACKFILL_STATUS = """
query ($id: String!) {
  partitionBackfillOrError(backfillId: $id) {
    ... on PartitionBackfill {
      status
      runs(limit: 20) { runId status }
    }
    ... on PythonError { message }
  }
}
"""

RUN_EVENTS = """
query ($id: ID!) {
  runOrError(runId: $id) {
    ... on Run {
      eventConnection(limit: 1000) {
        events {
          __typename
          ... on ObservationEvent {
            assetKey { path }
            partition
            metadataEntries {
              label
              ... on TextMetadataEntry { text }
              ... on IntMetadataEntry { intValue }
              ... on PathMetadataEntry { path }
            }
          }
          ... on MaterializationEvent {
            partition
            metadataEntries { label ... on PathMetadataEntry { path } }
          }
        }
      }
    }
  }
}
"""


def message(tick: dict) -> str:
    """A tick's skip reason or error, with every cause (the sensor's own exception is one)."""
    error = tick.get("error") or {}
    causes = [c["message"] for c in error.get("causes") or []]
    return "\n".join([tick.get("skipReason") or "", error.get("message") or "", *causes])


def entries(event: dict) -> dict[str, Any]:
    """label → the entry's value (text, int or path) of a metadata list."""
    out = {}
    for entry in event["metadataEntries"]:
        values = [entry[k] for k in ("text", "intValue", "path") if entry.get(k) is not None]
        out[entry["label"]] = values[0] if values else None
    return out


@dataclass(frozen=True)
class UI:
    """The real UI (``tools.dagster_ui``) and what this test watches in it: the suite's
    partitions, the suite sensor's ticks, backfills."""

    dagster: DagsterUI
    tmp: Path

    def graphql(self, query: str, **variables: Any) -> dict:
        return self.dagster.graphql(query, variables)

    def wait(self, what: str, probe: Callable[[], Any], timeout: float) -> Any:
        """``probe()`` once it is truthy; fails after ``timeout`` (the server's log follows)."""
        deadline = time.monotonic() + timeout
        while True:
            value = probe()
            if value:
                return value
            if time.monotonic() > deadline:
                pytest.fail(f"{what}: not within {timeout:.0f} s")
            time.sleep(1)

    def partition_keys(self, name: str) -> list[str]:
        node = self.graphql(PARTITIONS, key={"path": [SUITE, name]})["assetNodeOrError"]
        return node.get("partitionKeys") or []

    def sensor(self, name: str) -> dict:
        selector = {
            "repositoryLocationName": MODULE,
            "repositoryName": "__repository__",
            "sensorName": name,
        }
        sensor = self.graphql(SENSOR, selector=selector)["sensorOrError"]
        assert sensor["__typename"] == "Sensor", sensor
        return sensor

    def ticks(self) -> list[dict]:
        return self.sensor(SENSOR_NAME)["sensorState"]["ticks"]

    def backfill(self, **params: Any) -> str:
        result = self.graphql(BACKFILL, params=params)["launchPartitionBackfill"]
        assert result["__typename"] == "LaunchBackfillSuccess", result
        return result["backfillId"]

    def backfill_done(self, backfill_id: str) -> dict:
        def finished() -> dict | None:
            state = self.graphql(BACKFILL_STATUS, id=backfill_id)["partitionBackfillOrError"]
            done = state["status"] not in ("REQUESTED", "CANCELING", "FAILING")
            return state if done else None

        return self.wait(f"backfill {backfill_id}", finished, RUN_TIMEOUT)

    def backfill_runs_finished(self, backfill_id: str, runs: int) -> list[dict]:
        """The backfill's runs once it has launched ``runs`` of them and all have finished, or
        as soon as one failed (the daemon marks the backfill itself done at its next look, up
        to 30 s later)."""

        def finished() -> list[dict] | None:
            state = self.graphql(BACKFILL_STATUS, id=backfill_id)["partitionBackfillOrError"]
            launched = state["runs"]
            failed = any(r["status"] in ("FAILURE", "CANCELED") for r in launched)
            done = len(launched) == runs and all(r["status"] in RUN_FINISHED for r in launched)
            return launched if failed or done else None

        return self.wait(f"the {runs} runs of backfill {backfill_id}", finished, RUN_TIMEOUT)


def write_suite(folder: Path, agents: list[str]) -> None:
    spec = {
        "id": SUITE, "title": SUITE, "tasks": [BANK], "agents": agents, "budgets": [30],
        "attempts": 1, "max_attempts": 1, "twin_rows": 300, "data_subdir": SUITE,
        "runs_subdir": SUITE,
    }  # fmt: skip
    (folder / f"{SUITE}.yaml").write_text(yaml.safe_dump(spec))


def add_agent(agents: Path, agent_id: str, **changes: Any) -> Path:
    spec = yaml.safe_load((agents / "baseline-constant.yaml").read_text())
    path = agents / f"{agent_id}.yaml"
    path.write_text(yaml.safe_dump({**spec, "id": agent_id, **changes}))
    return path


def records(runs: Path) -> dict[str, str]:
    """run id → created_at of every record of the suite."""
    found = {}
    for path in sorted((runs / SUITE).glob("*/record.json")):
        record = json.loads(path.read_text())
        found[record["run_id"]] = record["created_at"]
    return found


@pytest.fixture
def ui(tmp_path: Path) -> Iterator[UI]:
    agents, suites = tmp_path / "agents", tmp_path / "suites"
    shutil.copytree(REPO_ROOT / "agents", agents, ignore=shutil.ignore_patterns("__pycache__"))
    suites.mkdir()
    write_suite(suites, ["baseline-constant"])
    env = dagster_env(tmp_path, agents_dir=agents, suites_dir=suites)
    # No activated virtualenv: dbt and every Dagster process come from beside the interpreter.
    env["PATH"] = "/usr/bin:/bin"
    env.pop("VIRTUAL_ENV", None)
    with running_dagster(tmp_path, env) as dagster:
        yield UI(dagster, tmp_path)


def test_a_new_agent_is_backfilled_from_the_ui_within_a_sensor_tick(ui: UI) -> None:
    agents, suites, runs = ui.tmp / "agents", ui.tmp / "suites", ui.tmp / "runs"
    # Only the benchmark assets run in this test: no automatic warehouse load or dbt build.
    ui.dagster.stop_sensor(AUTOMATION_SENSOR_NAME)

    # 1. the sensor's first tick gives the suite its grid; backfill all of it
    old_key = f"baseline-constant@30s|{BANK}"
    ui.wait(
        "the suite's partitions", lambda: ui.partition_keys("agent_runs") == [old_key], TICK_TIMEOUT
    )
    assert ui.partition_keys("prepared_tasks") == [BANK]
    first = ui.backfill(
        assetSelection=[{"path": [SUITE, "prepared_tasks"]}, {"path": [SUITE, "agent_runs"]}],
        allPartitions=True,
    )
    backfilled = ui.backfill_runs_finished(first, runs=2)  # the task's run, then the setting's
    assert [r["status"] for r in backfilled] == ["SUCCESS", "SUCCESS"], backfilled
    before = records(runs)
    assert len(before) == 1 and next(iter(before)).startswith("baseline-constant__")

    # 2. an agent file with a mistake in it, then a new agent and its line in the suite
    # Only finished ticks are "before": a tick still running now may read the files written
    # next, and then it is the one that adds the new setting.
    seen = {tick["id"] for tick in ui.ticks() if tick["status"] != "STARTED"}
    broken = add_agent(agents, "broken-agent", limits={"cpus": 0})
    add_agent(agents, "baseline-copy")
    write_suite(suites, ["baseline-constant", "baseline-copy"])
    added = "mini: +1 agent_budgets (baseline-copy@30s)"

    def adding_tick() -> dict | None:
        """The tick that added the new agent's partition (later ticks find nothing to do)."""
        fresh = [t for t in ui.ticks() if t["id"] not in seen and t["status"] != "STARTED"]
        return next((t for t in fresh if added in message(t)), None)

    tick = ui.wait("the sensor tick that adds the new setting", adding_tick, TICK_TIMEOUT)
    new_key = f"baseline-copy@30s|{BANK}"
    assert ui.partition_keys("agent_runs") == [old_key, new_key]
    # the valid suite was updated, and the tick failed naming the broken file and its field
    assert tick["status"] == "FAILURE", tick
    error = message(tick)
    assert str(broken) in error and "limits.cpus: Input should be greater than 0" in error
    assert ui.dagster.locations_loaded()  # the broken file fails a tick, never the code location
    state = ui.backfill_done(first)  # the daemon has looked again meanwhile, or does so now
    assert state["status"] == "COMPLETED_SUCCESS", state
    assert {r["runId"] for r in state["runs"]} == {r["runId"] for r in backfilled}, state

    # 3. the Materialize button with exactly the new setting picked: one run
    run = ui.dagster.wait_for_run(
        ui.dagster.materialize_partition([SUITE, "agent_runs"], new_key), RUN_TIMEOUT
    )
    assert run["status"] == "SUCCESS", run
    assert {"key": "dagster/partition", "value": new_key} in run["tags"]
    after = records(runs)
    new = {run_id for run_id in after if run_id not in before}
    assert len(new) == 1 and next(iter(new)).startswith("baseline-copy__"), after
    assert {run_id: after[run_id] for run_id in before} == before  # not re-run

    # the run's page: an observation per finished attempt, and links to the run folders
    events = ui.graphql(RUN_EVENTS, id=run["id"])["runOrError"]["eventConnection"]["events"]
    (observed,) = [e for e in events if e["__typename"] == "ObservationEvent"]
    assert (
        observed["assetKey"]["path"] == [SUITE, "agent_runs"] and observed["partition"] == new_key
    )
    progress = entries(observed)
    (run_id,) = new
    assert progress["progress"] == "1/1 successes after 1 attempt(s) (at most 1)"
    assert progress["attempts"] == 1 and progress["last_status"] == "success"
    assert progress["last_run"] == str(runs / SUITE / run_id)
    (materialized,) = [e for e in events if e["__typename"] == "MaterializationEvent"]
    assert materialized["partition"] == new_key
    assert entries(materialized)["last_run"] == str(runs / SUITE / run_id)

    # The automation sensor, stopped at the start, launched nothing. A stop that the daemon's tick
    # undid once let it load the warehouse and build the marts here, unasked.
    assert ui.graphql(AUTOMATION_RUNS)["runsOrError"]["results"] == []
