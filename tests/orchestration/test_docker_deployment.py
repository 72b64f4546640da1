"""orchestration/deployments/docker/ brought up for real, and a small suite materialized through it.

The images are built without Docker Hub (orchestration/deployments/docker/build.sh, cached by
content hash), Postgres is Debian's in an image of our own, and the compose stack runs the
code server, the webserver and the daemon. Runs are launched through the webserver's GraphQL
API, as the UI's Materialize does; the daemon's DockerRunLauncher starts each in a container
of its own, and each run starts its attempts as containers of the docker sandbox backend on
the same engine. A subset of the demo suite goes end to end: one task prepared, one setting's
attempts (baseline-constant, 240 s, five successes), then the raw load, every dbt model and
the snapshot, in a run launched together with a second run that also loads the warehouse: the
duckdb pool (limit 1, in Postgres) must keep their warehouse steps from overlapping.

Nothing is skipped: `make test` installs docker-compose and builds the images first
(`make deploy-deps`). Everything the stack made is removed afterwards, also on failure.
"""

from __future__ import annotations

import datetime as dt
import json
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest

from orchestration.assets.warehouse import RAW_KEYS
from orchestration.schedules import AUTOMATION_SENSOR_NAME
from runner.sandbox.docker_engine import IMAGE
from tools.docker_stack import (
    FOLDERS,
    LOCK_PATIENCE,
    MADE_BY_TESTS,
    MARKER,
    SERVICES,
    SNAPSHOT,
    SRV,
    WAREHOUSE,
    DockerStack,
    Run,
    build_images,
    docker,
    host_problem,
    overlapping,
    setting_tags,
    stack_containers,
    stack_problem,
    suite_asset,
    task_tags,
)

# Not exclusive: it runs beside the other workers' tests (186 s, against ~100 s alone, while
# they ran tests/agents and tests/dbt_project), and what it asserts about containers is about its
# own (its runs and their attempts). It was exclusive while the code server's health probe
# imported Dagster every 2 s: then it took 614 s beside them, and slowed them.
# xdist_group: its two tests take this host's stack lock in turn on one worker, rather than the
# first waiting on another worker for the second to take its stack down.
pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(3600),
    pytest.mark.xdist_group("docker_deployment"),
]

TASK = "bank-customer-churn-ict-u-ai"
AGENT = "baseline-constant"
BUDGET = 240
SETTING = setting_tags(AGENT, TASK, BUDGET)
ATTEMPTS = 5  # the demo suite's successes per setting
POOLED_STEPS = ("raw_warehouse", "tmlbench_dbt_models", "marts_snapshot")
RAW = tuple("/".join(key.path) for key in RAW_KEYS)  # one multi-asset: all or none


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def stack() -> Iterator[DockerStack]:
    problem = host_problem()
    if problem:
        pytest.fail(f"the Docker deployment test cannot run here: {problem}")
    timings["build images"] = build_images()
    stack = DockerStack(port=_free_port())
    try:
        timings["stack up"] = stack.up()
        # The test launches the warehouse runs itself, and counts every run.
        stack.stop_sensor(AUTOMATION_SENSOR_NAME)
        start = time.monotonic()
        stack.wait_for_partitions(suite_asset("agent_runs"), [SETTING["dagster/partition"]])
        timings["suite partitions (sensor tick)"] = time.monotonic() - start
        yield stack
    finally:
        start = time.monotonic()
        stack.down()
        timings["stack down"] = time.monotonic() - start
        print("\n".join(f"{k}: {v:.0f} s" for k, v in timings.items()))


timings: dict[str, float] = {}


def _finished_ok(stack: DockerStack, runs: list[Run]) -> None:
    for run in runs:
        if run.status != "SUCCESS":
            container = run.tags.get("docker/container_id", "")
            logs = stack.logs([container] if container else [], tail=80)
            pytest.fail(f"run {run.run_id} ended {run.status}:\n{logs}\n{stack.logs()}")


def _timed(stack: DockerStack, label: str, run_ids: list[str]) -> list[Run]:
    start = time.monotonic()
    runs = stack.wait(run_ids)
    timings[label] = time.monotonic() - start
    _finished_ok(stack, runs)
    return runs


def _assert_run_container(stack: DockerStack, run: Run) -> None:
    """The run had a container of its own, from the user-code image, hardened, not privileged."""
    container = run.tags.get("docker/container_id")
    assert container, f"run {run.run_id} has no container: not launched by the DockerRunLauncher"
    info = stack.inspect(container)
    assert info["Config"]["Labels"]["dagster/run_id"] == run.run_id
    assert info["Config"]["Image"].startswith("tmlbench-user-code")
    host = info["HostConfig"]
    assert host["Privileged"] is False
    assert host["CapDrop"] == ["ALL"]
    assert set(host["CapAdd"] or []) <= {"CHOWN", "DAC_OVERRIDE", "FOWNER"}
    assert "no-new-privileges=true" in host["SecurityOpt"]
    assert not any("unconfined" in opt for opt in host["SecurityOpt"])
    assert host["Memory"] > 0 and host["PidsLimit"] > 0 and host["NanoCpus"] > 0
    for name in ("data", "runs", "warehouse"):
        folder = str(SRV / name)
        assert f"{folder}:{folder}" in host["Binds"], "host folders at the same paths"


def _records() -> list[dict]:
    pattern = f"{AGENT}__{TASK}__{BUDGET}s__*/record.json"
    return [json.loads(p.read_text()) for p in sorted((SRV / "runs" / "demo").glob(pattern))]


def test_a_stack_a_killed_test_left_is_removed_and_one_no_test_made_is_refused() -> None:
    """A test killed with its stack up leaves it to come back with the engine (it once failed the
    next run's test); the next test removes it. A stack someone deployed, never."""
    problem = host_problem()
    if problem:
        pytest.fail(f"the Docker deployment test cannot run here: {problem}")
    stack = DockerStack()
    stack.lock_host(LOCK_PATIENCE)  # planted under the lock: no live stack owns these names
    planted: list[str] = []

    def plant(name: str, *labels: str) -> str:
        # Created, never started: listed under the stack's name, as a stopped leftover is.
        args = [f"--label={label}" for label in labels]
        planted.append(docker("create", "--name", name, *args, IMAGE, "true").stdout.strip())
        return planted[-1]

    try:
        stack.claim_host()  # a host with no stack to plant on (it removes a real leftover)
        deployed = plant("tmlbench_webserver")  # no label: someone's deployment
        assert "tmlbench_webserver" in (stack_problem() or ""), stack_problem()
        with pytest.raises(RuntimeError, match=r"no test brought up.*tmlbench_webserver"):
            stack.claim_host()
        assert docker("inspect", deployed, check=False).returncode == 0, "left untouched"
        stack.lock_host(LOCK_PATIENCE)  # the refusal let it go
        docker("rm", deployed)

        left = plant("tmlbench_daemon", f"{MADE_BY_TESTS}=true")
        # The host folders (and marker) the first claim made stand for the killed test's.
        stale = SRV / "runs" / "record-of-a-killed-run.json"
        stale.write_text("{}")
        assert stack_problem() is None
        assert stack_containers() == {"tmlbench_daemon": True}

        stack.claim_host()
        assert docker("inspect", left, check=False).returncode != 0, "the leftover is removed"
        assert not stale.exists(), "and so are its host folders"
        assert MARKER.exists() and all((SRV / name).is_dir() for name in FOLDERS)
    finally:
        for container in planted:
            docker("rm", "-f", container, check=False)
        stack.down()
    assert not SRV.exists()


def test_a_suite_end_to_end_through_the_docker_run_launcher(stack: DockerStack) -> None:
    assert stack_containers() == dict.fromkeys(SERVICES, True), "every container labelled"
    # 1. prepare the task (one task partition).
    (prepare,) = _timed(
        stack, "prepare run", [stack.launch([suite_asset("prepared_tasks")], task_tags(TASK))]
    )
    assert (SRV / "data" / "demo" / "tasks" / TASK / "public" / "train.csv").is_file()

    # 2. the setting's attempts, in docker sandboxes started from the run container.
    launched = time.time()
    (attempts,) = _timed(
        stack, "attempts run", [stack.launch([suite_asset("agent_runs")], SETTING)]
    )
    records = _records()
    assert len(records) == ATTEMPTS, [r["run_id"] for r in records]
    for record in records:
        assert record["status"] == "success", record.get("error_message")
        assert record["sandbox_backend"] == "docker" and record["sandbox_isolated"]
        notes = "\n".join(record["sandbox_notes"])
        assert "harness in a container" in notes, notes
        assert "copied to /srv/tmlbench/runs/.sandbox/" in notes, notes
    first = min(dt.datetime.fromisoformat(r["created_at"]) for r in records)
    timings["launch -> first attempt"] = first.timestamp() - launched
    # Nothing left behind: no attempt container, no staged copy, no socket folder.
    assert not stack.attempt_containers(), "attempt containers left behind"
    assert not list((SRV / "runs" / ".sandbox").iterdir())

    # 3. the warehouse, twice at once: everything after the attempts, and a second raw load.
    # The duckdb pool (limit 1, its slots in Postgres) makes their warehouse steps take turns:
    # the daemon holds a run in the queue while the pool of its first step is full
    # (op_granularity_run_buffer 0), and a step of a running run waits for the slot.
    both = [stack.launch(stack.warehouse_assets()), stack.launch(list(RAW))]
    full, load = _timed(stack, "warehouse runs (two at once)", both)
    spans = stack.step_spans(full.run_id, POOLED_STEPS) + stack.step_spans(
        load.run_id, POOLED_STEPS
    )
    assert len(spans) == len(POOLED_STEPS) + 1, spans
    assert not overlapping(spans), f"warehouse steps overlapped: {overlapping(spans)}"
    assert full.start and load.start and full.end and load.end
    timings["the two warehouse runs ran at the same time for"] = max(
        0.0, min(full.end, load.end) - max(full.start, load.start)
    )

    runs = (prepare, attempts, full, load)
    for run in runs:
        _assert_run_container(stack, run)
    assert len({r.tags["docker/container_id"] for r in runs}) == len(runs), "a container per run"

    # 4. what landed: rows in raw.runs, the marts, the published snapshot, the report.
    with duckdb.connect(str(WAREHOUSE), read_only=True) as con:
        rows = con.execute(
            "select count(*), count(distinct sandbox_backend), min(sandbox_backend) from raw.runs"
            " where agent_id = ? and task_id = ? and budget_seconds = ?",
            [AGENT, TASK, BUDGET],
        ).fetchone()
        assert rows == (ATTEMPTS, 1, "docker")
        scores = con.execute(
            "select n_counted from marts.setting_scores"
            " where agent_id = ? and task_id = ? and budget_seconds = ?",
            [AGENT, TASK, BUDGET],
        ).fetchall()
        assert scores == [(ATTEMPTS,)]
    assert SNAPSHOT.is_file()
    with duckdb.connect(str(SNAPSHOT), read_only=True) as con:
        assert con.execute("select count(*) from marts.setting_scores").fetchone() == (1,)
        assert con.execute("select count(*) from marts.coverage").fetchone()[0] >= 1
    assert Path(SNAPSHOT).stat().st_size > 0
    # the report bundle, written by the same run from the snapshot, next to it
    assert (Path(SNAPSHOT).parent / "reports" / "demo" / "report.html").is_file()

    # 5. Dagster's processes kept their connections to Postgres (orchestration/postgres_storage.py):
    # 260 sessions in all here, where dagster-postgres's connection per query opened ~3,000.
    sessions = stack.postgres_sessions()
    assert sessions < 1000, f"{sessions} connections to Postgres: one per query again?"
