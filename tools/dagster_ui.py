"""The real Dagster UI with its daemon (`dagster dev`), and launches through its GraphQL API as the
UI's buttons make them.

``running_dagster`` starts ``dagster dev -m orchestration.definitions`` on a free loopback port in
its own process group, with a throwaway DAGSTER_HOME holding ``orchestration/dagster.yaml`` (what
`make ui` copies), waits until the code location has loaded, and always stops the whole group;
when anything inside fails, the end of its log is printed (pytest shows it with the failure). ``DagsterUI`` speaks
GraphQL: ``materialize_partition`` is the Materialize button with one partition picked (the UI's
"Launch 1 run": the partition's tags and config from the job, then ``launchPipelineExecution``).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from runner.config import REPO_ROOT
from tools.servers import free_port, stop

MODULE = "orchestration.definitions"
BIN = Path(sys.executable).parent
STARTUP_TIMEOUT = 120.0
FINISHED = {"SUCCESS", "FAILURE", "CANCELED"}

ASSET_NODE = """
query AssetNode($keys: [AssetKeyInput!]!) {
  assetNodes(assetKeys: $keys) {
    assetKey { path }
    jobNames
    repository { name location { name } }
    assetChecksOrError { ... on AssetChecks { checks { name jobNames } } }
  }
}
"""

# ConfigFetch.tsx (CONFIG_PARTITION_FOR_ASSET_JOB_QUERY): the tags and config of one partition.
PARTITION = """
query Partition($repositoryName: String!, $repositoryLocationName: String!, $jobName: String!,
                $partitionName: String!, $assetKeys: [AssetKeyInput!]!) {
  pipelineOrError(params: {pipelineName: $jobName, repositoryName: $repositoryName,
                           repositoryLocationName: $repositoryLocationName}) {
    __typename
    ... on Pipeline {
      partition(partitionName: $partitionName, selectedAssetKeys: $assetKeys) {
        runConfigOrError { __typename ... on PartitionRunConfig { yaml } ... on PythonError { message } }
        tagsOrError { __typename ... on PartitionTags { results { key value } } ... on PythonError { message } }
      }
    }
  }
}
"""

# RunUtils.tsx (LAUNCH_PIPELINE_EXECUTION_MUTATION)
LAUNCH = """
mutation Launch($executionParams: ExecutionParams!) {
  launchPipelineExecution(executionParams: $executionParams) {
    __typename
    ... on LaunchRunSuccess { run { id } }
    ... on PythonError { message }
    ... on InvalidSubsetError { message }
    ... on PipelineNotFoundError { message }
    ... on RunConfigValidationInvalid { errors { message } }
  }
}
"""

RUN = """
query Run($id: ID!) {
  runOrError(runId: $id) { __typename ... on Run { id status startTime endTime tags { key value } } }
}
"""

LOCATIONS = """
query Locations {
  workspaceOrError {
    __typename
    ... on Workspace {
      locationEntries {
        name
        loadStatus
        locationOrLoadError { __typename ... on PythonError { message } }
      }
    }
  }
}
"""


class DagsterUIError(AssertionError):
    """The server answered, but not as the UI expects (the message says what it answered)."""


def graphql(base: str, query: str, variables: Mapping[str, object] | None = None) -> dict[str, Any]:
    """One GraphQL request to the webserver at ``base``, as the UI makes it; errors raise."""
    request = urllib.request.Request(
        f"{base}/graphql",
        data=json.dumps({"query": query, "variables": variables or {}}).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=60) as response:
        body = json.loads(response.read())
    if body.get("errors"):
        raise DagsterUIError(f"GraphQL errors: {body['errors']}")
    data: dict[str, Any] = body["data"]
    return data


SENSOR_STATE = """
query($s: SensorSelector!) {
  sensorOrError(sensorSelector: $s) {
    __typename
    ... on Sensor { id sensorState { status ticks(limit: 1) { status } } }
  }
}
"""
STOP_SENSOR = "mutation($id: String) { stopSensor(id: $id) { __typename } }"


def stop_sensor(
    graphql: Callable[[str, dict[str, Any]], dict[str, Any]],
    location: str,
    name: str,
    busy: type[Exception],
    patience: float = 120.0,
) -> None:
    """Stop sensor ``name`` of code location ``location`` as its toggle in the UI does, through
    ``graphql`` (a webserver's GraphQL, raising ``busy`` when it answers 500), and see it stay
    stopped.

    A stop can be lost: at the end of a tick the daemon writes the sensor's state back as it read
    it when the tick began, so a stop that lands during a tick is undone and the sensor runs on
    (its state in the instance back to "declared in code"): a test that had stopped the
    automation sensor saw it launch a warehouse run (a dbt build, ~30 s of CPU) and killed it at
    teardown. So the stop is asked again until two reads, a second apart and with no tick in
    progress, find the sensor stopped."""
    selector = {"repositoryLocationName": location, "repositoryName": "__repository__"}
    deadline = time.monotonic() + patience
    settled = 0  # consecutive reads that found it stopped, with no tick in progress
    while True:
        sensor = graphql(SENSOR_STATE, {"s": {**selector, "sensorName": name}})["sensorOrError"]
        if sensor["__typename"] != "Sensor":
            raise RuntimeError(f"no sensor {name}: {sensor}")
        state = sensor["sensorState"]
        ticking = any(tick["status"] == "STARTED" for tick in state["ticks"])
        if state["status"] != "STOPPED":
            settled = 0
            _request_stop(graphql, sensor["id"], name, busy)
        elif ticking:
            settled = 0
        else:
            settled += 1
            if settled == 2:
                return
        if time.monotonic() > deadline:
            raise RuntimeError(f"sensor {name} did not stay stopped for {patience:.0f} s")
        time.sleep(1)


def _request_stop(
    graphql: Callable[[str, dict[str, Any]], dict[str, Any]],
    sensor_id: str,
    name: str,
    busy: type[Exception],
) -> None:
    # The daemon may be writing the sensor's first state at that moment (it ticks every few
    # seconds): Dagster then answers 500 to the stop, which can simply be asked again.
    for attempt in range(5):
        try:
            stopped = graphql(STOP_SENSOR, {"id": sensor_id})["stopSensor"]
            break
        except busy:
            if attempt == 4:
                raise
            time.sleep(2)
    if stopped["__typename"] != "StopSensorMutationResult":
        raise RuntimeError(f"stopping {name} failed: {stopped}")


@dataclass(frozen=True)
class DagsterUI:
    base: str  # http://127.0.0.1:<port>
    home: Path  # its DAGSTER_HOME
    log: Path  # `dagster dev`'s output (webserver, daemon, runs)

    def graphql(self, query: str, variables: Mapping[str, object] | None = None) -> dict[str, Any]:
        return graphql(self.base, query, variables)

    def materialize_partition(self, asset_key: list[str], partition: str) -> str:
        """Launch one run of ``asset_key`` for ``partition`` as the UI's Materialize → one
        partition → "Launch 1 run" does; returns the run id."""
        (node,) = self.graphql(ASSET_NODE, {"keys": [{"path": asset_key}]})["assetNodes"]
        job = next(name for name in node["jobNames"] if name.startswith("__ASSET_JOB"))
        repository = node["repository"]["name"]
        location = node["repository"]["location"]["name"]
        found = self.graphql(
            PARTITION,
            {
                "repositoryName": repository,
                "repositoryLocationName": location,
                "jobName": job,
                "partitionName": partition,
                "assetKeys": [{"path": asset_key}],
            },
        )["pipelineOrError"]
        if found["__typename"] != "Pipeline":
            raise DagsterUIError(f"job {job}: {found}")
        tags = found["partition"]["tagsOrError"]
        config = found["partition"]["runConfigOrError"]
        if "results" not in tags or "yaml" not in config:
            raise DagsterUIError(f"partition {partition}: {tags} {config}")
        checks = node["assetChecksOrError"].get("checks", [])
        params = {
            "mode": "default",
            "runConfigData": config["yaml"] or "{}",
            "executionMetadata": {"tags": tags["results"]},
            "selector": {
                "repositoryLocationName": location,
                "repositoryName": repository,
                "pipelineName": job,
                "assetSelection": [{"path": asset_key}],
                "assetCheckSelection": [
                    {"name": c["name"], "assetKey": {"path": asset_key}}
                    for c in checks
                    if not c["jobNames"] or job in c["jobNames"]
                ],
            },
        }
        launched = self.graphql(LAUNCH, {"executionParams": params})["launchPipelineExecution"]
        if launched["__typename"] != "LaunchRunSuccess":
            raise DagsterUIError(f"launch of {'/'.join(asset_key)} [{partition}]: {launched}")
        return str(launched["run"]["id"])

    def locations_loaded(self) -> bool:
        """Has every code location loaded? DagsterUIError if one failed to load."""
        entries = self.graphql(LOCATIONS)["workspaceOrError"].get("locationEntries") or []
        if not entries or any(entry["loadStatus"] != "LOADED" for entry in entries):
            return False
        for entry in entries:
            location = entry["locationOrLoadError"]
            if location["__typename"] != "RepositoryLocation":
                raise DagsterUIError(
                    f"code location {entry['name']} failed: {location.get('message')}"
                )
        return True

    def stop_sensor(self, name: str) -> None:
        stop_sensor(self.graphql, MODULE, name, busy=urllib.error.HTTPError)

    def run(self, run_id: str) -> dict[str, Any]:
        found: dict[str, Any] = self.graphql(RUN, {"id": run_id})["runOrError"]
        if found["__typename"] != "Run":
            raise DagsterUIError(f"run {run_id}: {found}")
        return found

    def wait_for_run(self, run_id: str, timeout: float) -> dict[str, Any]:
        """The run once it has finished (whatever its status); DagsterUIError after ``timeout``."""
        deadline = time.monotonic() + timeout
        while True:
            run = self.run(run_id)
            if run["status"] in FINISHED:
                return run
            if time.monotonic() > deadline:
                raise DagsterUIError(f"run {run_id} still {run['status']} after {timeout:.0f} s")
            time.sleep(0.5)

    def log_tail(self, chars: int = 12_000) -> str:
        text = self.log.read_text(encoding="utf-8", errors="replace")
        return text[-chars:]


def dagster_env(tmp: Path, **folders: Path) -> dict[str, str]:
    """The environment of a `dagster dev` whose runs touch only ``tmp``: the warehouse, data and
    runs under it, plus any ``TMLBENCH_<NAME>`` folder given (e.g. ``suites_dir=...``)."""
    env = {name: value for name, value in os.environ.items() if not name.startswith("DAGSTER_")}
    env |= {
        "TMLBENCH_WAREHOUSE": str(tmp / "warehouse.duckdb"),
        "TMLBENCH_DATA_DIR": str(tmp / "data"),
        "TMLBENCH_RUNS_DIR": str(tmp / "runs"),
        "PYTHONUNBUFFERED": "1",
    }
    env |= {f"TMLBENCH_{name.upper()}": str(path) for name, path in folders.items()}
    return env


@contextmanager
def running_dagster(tmp: Path, env: Mapping[str, str]) -> Iterator[DagsterUI]:
    """`dagster dev` (webserver + daemon) on a free port with a throwaway DAGSTER_HOME under
    ``tmp``; stopped, with its whole process group, whatever happens."""
    home = tmp / "dagster_home"
    home.mkdir(parents=True, exist_ok=True)
    shutil.copy(REPO_ROOT / "orchestration" / "dagster.yaml", home / "dagster.yaml")
    port = free_port()
    log_path = tmp / "dagster_dev.log"
    ui = DagsterUI(f"http://127.0.0.1:{port}", home, log_path)
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            [str(BIN / "dagster"), "dev", "-m", MODULE, "-h", "127.0.0.1", "-p", str(port)],
            cwd=REPO_ROOT,
            env={**env, "DAGSTER_HOME": str(home)},
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,  # its own group: webserver, daemon, code servers, runs
        )
        try:
            wait_until_loaded(ui, proc)
            yield ui
        except BaseException:  # the test failed or the server did: show what the server said
            print(f"---- dagster dev log ({log_path}), last part:\n{ui.log_tail()}")
            raise
        finally:
            # A throwaway home, nothing to keep: what has not exited soon after the SIGTERM
            # is killed (a part of `dagster dev` that outlives it kept teardown at 30 s).
            stop(proc, grace=1)


def wait_until_loaded(
    ui: DagsterUI, proc: subprocess.Popen[bytes], timeout: float = STARTUP_TIMEOUT
) -> None:
    """Wait until the server ``proc`` (its process group's leader) has loaded every code
    location; DagsterUIError if one failed to load, the server exited, or ``timeout`` passed."""
    deadline = time.monotonic() + timeout
    while True:
        if proc.poll() is not None:
            raise DagsterUIError(
                f"the Dagster server (pid {proc.pid}) exited with {proc.returncode}"
            )
        try:
            if ui.locations_loaded():
                return
        except (urllib.error.URLError, ConnectionError, TimeoutError, json.JSONDecodeError):
            pass
        if time.monotonic() > deadline:
            raise DagsterUIError(f"no loaded code location after {timeout:.0f} s")
        time.sleep(0.5)
