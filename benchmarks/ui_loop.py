"""From a setting's last attempt to the published snapshot holding it, through the real Dagster UI.

Starts `dagster dev` (webserver + daemon, the instance settings of `make ui`) with a throwaway
DAGSTER_HOME, warehouse, data and runs folder, and the repository's suite files (demo, tml-v1,
tml-v1-llm, tml-v1-kilo: the other suites' settings are never run, as on a fresh clone). For
each sample, one setting of suite ``demo`` (``baseline-constant@240s`` × a task; 5 attempts)
is materialized through GraphQL as the Materialize button does (its task prepared just before,
the same way); nothing else is launched. The latency is from the end of the setting's last
attempt (the latest ``finished_at`` of its records) to the snapshot file holding its scores
(its ``n_counted`` in ``marts.setting_scores``, at the file's modification time), split into:
the setting's run ending after its last attempt, the automation's run starting after that, and
that run (raw load, dbt build, snapshot). Also printed: how long the automation sensor's ticks
take (its evaluation cost, from the sensor's tick history).

Target: <= 30 s per setting.

    uv run python benchmarks/ui_loop.py            # the demo suite's 4 tasks, one sample each
    uv run python benchmarks/ui_loop.py --samples 2
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import duckdb
from machine import describe_machine

from orchestration.partitions import settings_partition_key
from orchestration.schedules import AUTOMATION_INTERVAL_SECONDS, AUTOMATION_SENSOR_NAME
from runner.attempts.records import load_records
from runner.config import REPO_ROOT
from runner.specs.registry import load_suite
from tools.dagster_ui import MODULE, DagsterUI, dagster_env, running_dagster

SUITE, AGENT, BUDGET = "demo", "baseline-constant", 240
TARGET = 30.0  # seconds
TIMEOUT = 600.0

TICKS = """
query Ticks($selector: SensorSelector!) {
  sensorOrError(sensorSelector: $selector) {
    __typename
    ... on Sensor { sensorState { ticks(limit: 200) { timestamp endTimestamp } } }
  }
}
"""


def wait_for_partition(ui: DagsterUI, key: list[str], partition: str) -> None:
    query = "query P($k: [AssetKeyInput!]!) { assetNodes(assetKeys: $k) { partitionKeys } }"
    deadline = time.monotonic() + 120
    while (
        partition not in ui.graphql(query, {"k": [{"path": key}]})["assetNodes"][0]["partitionKeys"]
    ):
        if time.monotonic() > deadline:
            raise SystemExit(f"no partition {partition} of {key} after 120 s")
        time.sleep(1)


def counted_in_snapshot(snapshot: Path, task: str) -> int:
    if not snapshot.is_file():
        return 0
    try:
        con = duckdb.connect(str(snapshot), read_only=True)
    except duckdb.Error:  # being swapped in
        return 0
    try:
        row = con.execute(
            "select n_counted from marts.setting_scores where suite_id = ? and agent_id = ?"
            " and task_id = ? and budget_seconds = ?",
            [SUITE, AGENT, task, BUDGET],
        ).fetchone()
        return int(row[0]) if row and row[0] is not None else 0
    except duckdb.CatalogException:
        return 0
    finally:
        con.close()


def launched(ui: DagsterUI, key: list[str], partition: str) -> dict:
    run = ui.wait_for_run(ui.materialize_partition(key, partition), TIMEOUT)
    if run["status"] != "SUCCESS":
        raise SystemExit(f"{'/'.join(key)} [{partition}]: run {run['id']} {run['status']}")
    return run


def snapshot_run(ui: DagsterUI) -> dict:
    query = '{ assetNodes(assetKeys: [{path: ["marts_snapshot"]}]) { assetMaterializations(limit: 1) { runId } } }'
    (node,) = ui.graphql(query)["assetNodes"]
    return ui.wait_for_run(node["assetMaterializations"][0]["runId"], TIMEOUT)


def tick_seconds(ui: DagsterUI) -> list[float]:
    selector = {
        "repositoryLocationName": MODULE,
        "repositoryName": "__repository__",
        "sensorName": AUTOMATION_SENSOR_NAME,
    }
    found = ui.graphql(TICKS, {"selector": selector})["sensorOrError"]
    ticks = found["sensorState"]["ticks"] if found["__typename"] == "Sensor" else []
    return [t["endTimestamp"] - t["timestamp"] for t in ticks if t["endTimestamp"]]


def load_average() -> str:
    return "load average " + ", ".join(f"{x:.2f}" for x in os.getloadavg())


@contextlib.contextmanager
def parsed_for(tmp: str) -> Iterator[dict[str, str]]:
    """The throwaway warehouse's environment, with dbt's parse cache made for it, as `make ui`
    does (its `make manifest` parses for the warehouse it serves): dbt re-parses the whole
    project when the warehouse path differs from the cache's (the path is part of the profile's
    hash), which a user's runs never pay. The default warehouse's cache is made again after."""
    env = dagster_env(Path(tmp))
    parse = [sys.executable, "-m", "warehouse.dbt", "parse", "--quiet"]
    subprocess.run(parse, env=env, cwd=REPO_ROOT, check=True)
    try:
        yield env
    finally:
        default = {k: v for k, v in os.environ.items() if k != "TMLBENCH_WAREHOUSE"}
        subprocess.run(parse, env=default, cwd=REPO_ROOT, check=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--samples", type=int, default=4, help="settings to time (one per task)")
    args = parser.parse_args()
    # stopped (Ctrl-C, even from a background job, or a TERM): `dagster dev` is stopped too
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]  # each sample as it comes
    tasks = load_suite(REPO_ROOT / "suites", SUITE).tasks[: args.samples]
    print(describe_machine())
    print(f"automation sensor interval {AUTOMATION_INTERVAL_SECONDS} s; {load_average()}")
    latencies = []
    with tempfile.TemporaryDirectory(prefix="tmlbench-ui-loop-") as tmp, parsed_for(tmp) as env:
        root = Path(tmp)
        snapshot = root / "warehouse.snapshot.duckdb"
        with running_dagster(root, env) as ui:
            for task in tasks:
                setting = str(settings_partition_key(AGENT, task, BUDGET))
                wait_for_partition(ui, [SUITE, "agent_runs"], setting)
                launched(ui, [SUITE, "prepared_tasks"], task)
                ran = launched(ui, [SUITE, "agent_runs"], setting)
                deadline = time.monotonic() + TIMEOUT
                while not counted_in_snapshot(snapshot, task):
                    if time.monotonic() > deadline:
                        raise SystemExit(f"{setting}: not in the snapshot after {TIMEOUT:.0f} s")
                    time.sleep(0.2)
                published = snapshot.stat().st_mtime
                records = [
                    r
                    for r in load_records(root / "runs" / SUITE)
                    if r.agent_id == AGENT and r.task_id == task and r.budget_seconds == BUDGET
                ]
                last = max(r.finished_at or r.created_at for r in records)
                latency = published - last.timestamp()
                automation = snapshot_run(ui)
                latencies.append(latency)
                print(
                    f"{setting}: {latency:5.1f} s from the last of {len(records)} attempts to the "
                    f"snapshot (setting's run ends +{ran['endTime'] - last.timestamp():.1f} s, "
                    f"automation run starts +{automation['startTime'] - ran['endTime']:.1f} s, "
                    f"runs {automation['endTime'] - automation['startTime']:.1f} s); "
                    f"{load_average()}"
                )
            ticks = tick_seconds(ui)
    print(
        f"latency: median {statistics.median(latencies):.1f} s, max {max(latencies):.1f} s "
        f"over {len(latencies)} settings (target <= {TARGET:.0f} s: "
        f"{'met' if max(latencies) <= TARGET else 'MISSED'})"
    )
    if ticks:
        print(
            f"automation sensor ticks: median {statistics.median(ticks):.2f} s, "
            f"max {max(ticks):.2f} s over {len(ticks)} ticks"
        )
    print(f"at {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC")


if __name__ == "__main__":
    main()
