"""The Docker deployment's cost in time: "materialize" → first attempt under the DockerRunLauncher
vs. `dagster dev`, and a 4-setting backfill's wall time with 2 run containers vs. 1.

    uv run python benchmarks/docker_deployment.py                   # both, 3 launches per side
    uv run python benchmarks/docker_deployment.py --only latency --repeat 5
    uv run python benchmarks/docker_deployment.py --only backfill

Latency: a run of `agent_runs` for one demo setting (baseline-constant, a prepared task) is
launched through the webserver's GraphQL API, as the UI's Materialize does; measured from the
launch to the first attempt's start (its record's created_at), with the run's own milestones
(dequeued and started, the step started). Both sides run attempts on the docker sandbox
backend from the same image, so the difference is the launcher: a run container (Docker) vs.
a subprocess (`dagster dev`, SQLite instance, this checkout). Both are up at once and the
launches alternate, one run at a time, so both sides see the same load.

Backfill: 4 settings (baseline-constant at 240/600/1200 s and baseline-linear at 240 s, five
successes each) launched as 4 runs at once, the stack's max_concurrent_runs 1 vs. 2; from the
first launch to the last run's end. Each run schedules its attempts on the host's CPUs.

Needs root, the Docker engine and `make deploy-deps`; brings the stack up and down itself
(/srv/tmlbench, see tools/docker_stack.py). Prints the machine and its load: other
work on a shared machine moves every number here.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from machine import describe_machine

from orchestration.schedules import AUTOMATION_SENSOR_NAME
from runner.config import REPO_ROOT
from tools.docker_stack import (
    DOCKER_DIR,
    SRV,
    DagsterApi,
    DockerStack,
    build_images,
    host_problem,
    setting_tags,
    suite_asset,
    task_tags,
)

TASK = "bank-customer-churn-ict-u-ai"
# Each latency launch needs a setting with no attempt recorded yet: up to 9 launches per side.
LATENCY_SETTINGS = [
    (agent, TASK, budget)
    for agent in ("baseline-constant", "baseline-linear", "baseline-gbm")
    for budget in (240, 600, 1200)
]
BACKFILL_SETTINGS = [*LATENCY_SETTINGS[:3], ("baseline-linear", TASK, 240)]
AGENT_RUNS = suite_asset("agent_runs")
AGENT_RUNS_STEP = "demo__agent_runs"
Setting = tuple[str, str, int]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def first_attempt(runs_dir: Path, setting: Setting) -> float | None:
    """Start (epoch seconds) of the setting's first attempt, from its records' created_at."""
    agent, task, budget = setting
    starts = [
        dt.datetime.fromisoformat(json.loads(p.read_text())["created_at"]).timestamp()
        for p in runs_dir.glob(f"{agent}__{task}__{budget}s__*/record.json")
    ]
    return min(starts) if starts else None


def step_start(api: DagsterApi, run_id: str, step: str) -> float | None:
    for event in api.events(run_id):
        if event["step"] == step and event["type"] == "ExecutionStepStartEvent":
            return float(event["time"])
    return None


def prepare(api: DagsterApi) -> None:
    """The demo suite's partitions (the sensor's first tick), no automatic warehouse runs, the
    task prepared."""
    api.stop_sensor(AUTOMATION_SENSOR_NAME)
    keys = [setting_tags(*s)["dagster/partition"] for s in LATENCY_SETTINGS]
    api.wait_for_partitions(AGENT_RUNS, keys)
    (run,) = api.wait([api.launch([suite_asset("prepared_tasks")], task_tags(TASK))])
    assert run.status == "SUCCESS", run


def latency(api: DagsterApi, runs_dir: Path, setting: Setting) -> dict[str, float]:
    """Launch → milestones of one agent run of ``setting`` (no attempt of it recorded yet)."""
    launched = time.time()
    run_id = api.launch([AGENT_RUNS], setting_tags(*setting))
    (run,) = api.wait([run_id])
    assert run.status == "SUCCESS", run
    attempt = first_attempt(runs_dir, setting)
    step = step_start(api, run_id, AGENT_RUNS_STEP)
    assert attempt is not None and step is not None and run.start is not None
    return {
        "run started": run.start - launched,
        "step started": step - launched,
        "first attempt": attempt - launched,
    }


@contextlib.contextmanager
def dagster_dev() -> Iterator[tuple[DagsterApi, Path]]:
    """`dagster dev` on this checkout (SQLite instance, runs as subprocesses), its runs folder."""
    root = Path(tempfile.mkdtemp(prefix="tmlbench-bench-dev-"))
    home = root / "dagster"
    home.mkdir()
    (home / "dagster.yaml").write_text((REPO_ROOT / "orchestration" / "dagster.yaml").read_text())
    env = {
        **os.environ,
        "DAGSTER_HOME": str(home),
        "TMLBENCH_DATA_DIR": str(root / "data"),
        "TMLBENCH_RUNS_DIR": str(root / "runs"),
        "TMLBENCH_WAREHOUSE": str(root / "warehouse.duckdb"),
        "TMLBENCH_SANDBOX_BACKEND": "docker",
    }
    api = DagsterApi(port=free_port(), location="orchestration.definitions")
    dagster = Path(sys.executable).parent / "dagster"
    command = [str(dagster), "dev", "-m", "orchestration.definitions"]
    command += ["-h", "127.0.0.1", "-p", str(api.port)]
    with open(root / "dagster-dev.log", "wb") as log:
        proc = subprocess.Popen(
            command, cwd=REPO_ROOT, env=env, stdout=log, stderr=log, start_new_session=True
        )
        try:
            wait_until(api.location_loaded, 600, "dagster dev did not load the definitions")
            yield api, root / "runs" / "demo"
        finally:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            shutil.rmtree(root, ignore_errors=True)


@contextlib.contextmanager
def docker_stack() -> Iterator[tuple[DagsterApi, Path]]:
    stack = DockerStack(port=free_port())
    try:
        print(f"docker stack up in {stack.up():.0f} s")
        yield stack, SRV / "runs" / "demo"
    finally:
        stack.down()


def compare_latency(repeat: int) -> dict[str, list[dict[str, float]]]:
    """Both sides up at once, launches alternating (one run at a time), so both see the same
    load; a different setting each time, so every run has attempts to make."""
    rows: dict[str, list[dict[str, float]]] = {"dagster dev": [], "docker": []}
    with dagster_dev() as dev, docker_stack() as dock:
        sides = {"dagster dev": dev, "docker": dock}
        for api, _ in sides.values():
            prepare(api)
        for setting in LATENCY_SETTINGS[:repeat]:
            for name, (api, runs_dir) in sides.items():
                rows[name].append(latency(api, runs_dir, setting))
                shown = ", ".join(f"{k} +{v:.1f} s" for k, v in rows[name][-1].items())
                print(f"  {name:11} {'|'.join(map(str, setting))}: {shown}", flush=True)
    return rows


def wait_until(ready: Callable[[], bool], timeout: float, message: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if ready():
                return
        except (OSError, ValueError, KeyError, RuntimeError):
            pass
        time.sleep(2)
    raise TimeoutError(message)


def backfill(run_containers: int) -> float:
    """Wall time of the 4 settings as 4 runs launched at once, ``run_containers`` at a time."""
    text = (DOCKER_DIR / "dagster.yaml").read_text()
    assert "max_concurrent_runs: 4" in text
    instance = Path(tempfile.mkstemp(prefix="tmlbench-bench-", suffix=".yaml")[1])
    instance.write_text(
        text.replace("max_concurrent_runs: 4", f"max_concurrent_runs: {run_containers}")
    )
    instance.chmod(0o644)
    stack = DockerStack(port=free_port(), instance_yaml=instance)
    try:
        print(f"docker stack up ({run_containers} run container(s) at once) in {stack.up():.0f} s")
        prepare(stack)
        start = time.time()
        run_ids = [stack.launch([AGENT_RUNS], setting_tags(*s)) for s in BACKFILL_SETTINGS]
        runs = stack.wait(run_ids, timeout=3600)
        assert all(r.status == "SUCCESS" for r in runs), runs
        wall = max(r.end or 0 for r in runs) - start
        print(f"  4 settings, {run_containers} run container(s) at once: {wall:.0f} s")
        return wall
    except Exception:
        print(stack.logs(tail=60))
        raise
    finally:
        stack.down()
        instance.unlink(missing_ok=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=("latency", "backfill"))
    parser.add_argument(
        "--repeat", type=int, default=3, choices=range(1, len(LATENCY_SETTINGS) + 1)
    )
    args = parser.parse_args()
    # A TERM ends the script through its finally blocks: the stack and `dagster dev` go too.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    problem = host_problem()
    if problem:
        print(f"cannot run here: {problem}")
        return 1
    print(describe_machine())
    print(f"load average at start: {os.getloadavg()}")
    print(f"images built/checked in {build_images():.0f} s")
    results: dict[str, object] = {}
    if args.only in (None, "latency"):
        measured = compare_latency(args.repeat)
        dev, dock = measured["dagster dev"], measured["docker"]
        for name, rows in measured.items():
            firsts = [r["first attempt"] for r in rows]
            results[name] = {
                "first attempt median s": statistics.median(firsts),
                "range s": [min(firsts), max(firsts)],
                "run started median s": statistics.median(r["run started"] for r in rows),
                "step started median s": statistics.median(r["step started"] for r in rows),
            }
        extra = statistics.median(r["first attempt"] for r in dock) - statistics.median(
            r["first attempt"] for r in dev
        )
        results["docker extra per run (median) s"] = extra
    if args.only in (None, "backfill"):
        one, two = backfill(1), backfill(2)
        results["backfill 4 settings s"] = {"1 run container": one, "2 run containers": two}
        results["backfill speed-up"] = one / two
    print(f"load average at end: {os.getloadavg()}")
    print(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
