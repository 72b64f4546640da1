"""The Docker deployment (orchestration/deployments/docker/) brought up on this host, and driven.

Used by tests/orchestration/test_docker_deployment.py and benchmarks/docker_deployment.py:
build the images (cached), start the compose stack (Postgres, code server, webserver,
daemon), launch runs through the webserver's GraphQL API as the UI does, wait for them, read
their events, and take everything down again: containers (the stack's and every run container its daemon
started), the network, the volumes, and the host folders under /srv/tmlbench.

The host folders are fixed (/srv/tmlbench/{data,runs,warehouse}: run containers bind them at
the same paths, see the deployments README), so a host can hold one stack at a time: a second
test or benchmark waits for the first one's lock. Every container of a stack brought up here
carries the label MADE_BY_TESTS, so a stack left by a killed test (it comes back with the
engine) is removed by the next one, while a stack someone deploys on this host, or anything
in /srv/tmlbench this module did not create, is never touched: the stack refuses to start.
"""

from __future__ import annotations

import fcntl
import json
import os
import secrets
import shutil
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from orchestration.partitions import settings_partition_key
from runner.config import REPO_ROOT
from tools.dagster_ui import stop_sensor
from tools.postgres_container import sessions

DOCKER_DIR = REPO_ROOT / "orchestration" / "deployments" / "docker"
COMPOSE_FILE = DOCKER_DIR / "docker-compose.yaml"
BUILD_SCRIPT = DOCKER_DIR / "build.sh"
SRV = Path("/srv/tmlbench")
FOLDERS = ("data", "runs", "warehouse")
MARKER = SRV / ".made-by-tmlbench-tests"
PROJECT = "tmlbench"
SERVICES = ("tmlbench_postgres", "tmlbench_user_code", "tmlbench_webserver", "tmlbench_daemon")
NETWORK = "tmlbench_dagster"
VOLUMES = ("tmlbench_postgres", "tmlbench_dagster_home")
LOCATION = "tmlbench"
SUITE = "demo"  # suites/demo.yaml: its assets are demo/prepared_tasks and demo/agent_runs
WAREHOUSE = SRV / "warehouse" / "tmlbench.duckdb"
SNAPSHOT = SRV / "warehouse" / "tmlbench.snapshot.duckdb"
FINISHED = {"SUCCESS", "FAILURE", "CANCELED"}
# Held from up() to the end of down(): a second test or benchmark on this host (another clone,
# another engineer) waits for it instead of taking over or tearing down this one's stack.
LOCK = Path("/run/tmlbench-docker-stack.lock")
LOCK_PATIENCE = 1800.0  # seconds: the test holds the lock 3-12 min, the benchmark up to ~25
# On every container of a stack this module brings up (a compose override). Found on a stack
# while the lock is free, it marks a killed test's or benchmark's leftover, safe to remove.
MADE_BY_TESTS = "tmlbench.made-by-tests"


def docker(
    *args: str, timeout: float = 120, check: bool = True
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["docker", *args], capture_output=True, text=True, timeout=timeout, check=check
    )


def compose_command() -> list[str] | None:
    """``docker compose`` (the plugin) where installed, else Debian's ``docker-compose``."""
    plugin = subprocess.run(["docker", "compose", "version"], capture_output=True, check=False)
    if plugin.returncode == 0:
        return ["docker", "compose"]
    exe = shutil.which("docker-compose")
    return [exe] if exe else None


def host_problem() -> str | None:
    """What this machine lacks to bring the stack up (root, the engine, compose), or None."""
    if os.geteuid() != 0:
        return "the Docker deployment's test needs root (it owns /srv/tmlbench and the engine)"
    if shutil.which("docker") is None or docker("info", check=False).returncode != 0:
        return "no Docker engine: make docker-engine"
    if compose_command() is None:
        return "no docker-compose: make deploy-deps (Debian's docker-compose)"
    return None


def stack_problem() -> str | None:
    """Why the stack's names or host folders are not free for a test's stack, or None. Asked
    under the host's lock: without it, another test's stack going up or down, or the containers
    this module's own test plants, could pass for someone's."""
    if foreign := sorted(name for name, ours in stack_containers().items() if not ours):
        return (
            f"a tmlbench stack that no test brought up exists on this host ({', '.join(foreign)});"
            " not touching it (if it is a leftover of a test from before its containers were"
            " labelled, remove it: DockerStack().down(leftover=True) in tools/docker_stack.py)"
        )
    if SRV.exists() and any(SRV.iterdir()) and not MARKER.exists():
        return f"{SRV} holds data this test did not make; not touching it"
    return None


def stack_containers() -> dict[str, bool]:
    """The containers on this host named as the stack's services, each with whether a test or
    benchmark brought it up (it carries ``MADE_BY_TESTS``)."""
    listed = docker(
        "ps", "-a", "--format", f'{{{{.Names}}}}\t{{{{.Label "{MADE_BY_TESTS}"}}}}'
    ).stdout  # fmt: skip
    named = (line.split("\t") for line in listed.splitlines())
    return {name: label == "true" for name, label, *_ in named if name in SERVICES}


def build_images(timeout: float = 3600) -> float:
    """orchestration/deployments/docker/build.sh (cached by content hash); its seconds."""
    start = time.monotonic()
    subprocess.run([str(BUILD_SCRIPT)], check=True, timeout=timeout)
    return time.monotonic() - start


@dataclass
class Run:
    run_id: str
    status: str
    start: float | None
    end: float | None
    tags: dict[str, str]


@dataclass
class DagsterApi:
    """A Dagster webserver's GraphQL API on a loopback port: launch runs as the UI does, follow them."""

    port: int = 3000
    location: str = LOCATION  # `dagster dev -m orchestration.definitions` names it by the module

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/graphql"

    def gql(
        self, query: str, variables: dict[str, Any] | None = None, patience: float = 120
    ) -> dict[str, Any]:
        """One GraphQL request; a webserver that does not answer is asked again for
        ``patience`` seconds (a restart, or a machine too busy to accept at once)."""
        body = json.dumps({"query": query, "variables": variables or {}}).encode()
        request = urllib.request.Request(
            self.url, data=body, headers={"Content-Type": "application/json"}
        )
        deadline = time.monotonic() + patience
        while True:
            try:
                with urllib.request.urlopen(request, timeout=60) as reply:
                    answer = json.load(reply)
                break
            except (
                urllib.error.HTTPError
            ) as exc:  # it answered: a bad query is not a reason to wait
                said = exc.read().decode("utf-8", "replace")[-2000:]
                raise RuntimeError(f"GraphQL request failed: HTTP {exc.code}: {said}") from exc
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                if time.monotonic() > deadline:
                    raise
                time.sleep(3)
        if answer.get("errors"):
            raise RuntimeError(f"GraphQL errors: {answer['errors']}")
        return dict(answer["data"])

    def location_loaded(self) -> bool:
        data = self.gql(
            "{ workspaceOrError { ... on Workspace { locationEntries { name loadStatus"
            " locationOrLoadError { __typename } } } } }"
        )
        entries = data["workspaceOrError"]["locationEntries"]
        return any(
            e["name"] == self.location
            and e["loadStatus"] == "LOADED"
            and e["locationOrLoadError"]["__typename"] == "RepositoryLocation"
            for e in entries
        )

    def partition_keys(self, asset: str) -> list[str]:
        data = self.gql(
            "query($key: AssetKeyInput!) { assetNodeOrError(assetKey: $key)"
            " { ... on AssetNode { partitionKeys } } }",
            {"key": {"path": asset.split("/")}},
        )
        return list(data["assetNodeOrError"].get("partitionKeys") or [])

    def wait_for_partitions(self, asset: str, keys: Iterable[str], timeout: float = 300) -> None:
        """Until ``asset`` has the partitions ``keys``: the daemon's sync_suite_partitions sensor
        adds a suite's partitions from its file (its first tick, up to 30 s after the start)."""
        wanted = set(keys)
        deadline = time.monotonic() + timeout
        while not wanted <= set(self.partition_keys(asset)):
            if time.monotonic() > deadline:
                raise TimeoutError(f"{asset} has no partitions {sorted(wanted)} after {timeout} s")
            time.sleep(1)

    def stop_sensor(self, name: str) -> None:
        """Stop a sensor the definitions start by default (the warehouse's automation: the
        callers launch their warehouse runs themselves, and count every run)."""
        stop_sensor(self.gql, self.location, name, busy=RuntimeError)

    def executable_assets(self) -> list[dict[str, Any]]:
        data = self.gql("{ assetNodes { assetKey { path } groupName isExecutable } }")
        return [n for n in data["assetNodes"] if n["isExecutable"]]

    def warehouse_assets(self) -> list[str]:
        """Everything after the attempts: raw load, every dbt model, the snapshot, the reports."""
        return [
            "/".join(n["assetKey"]["path"])
            for n in self.executable_assets()
            if not n["groupName"].startswith("suite_")
        ]

    def launch(
        self,
        assets: Sequence[str],
        tags: dict[str, str] | None = None,
        run_config: dict[str, Any] | None = None,
    ) -> str:
        """``launchRun`` of the asset job over ``assets`` (what the UI's Materialize does)."""
        params = {
            "selector": {
                "repositoryLocationName": self.location,
                "repositoryName": "__repository__",
                "jobName": "__ASSET_JOB",
                "assetSelection": [{"path": a.split("/")} for a in assets],
            },
            "runConfigData": run_config or {},
            "executionMetadata": {
                "tags": [{"key": k, "value": v} for k, v in (tags or {}).items()]
            },
        }
        data = self.gql(
            """mutation($p: ExecutionParams!) { launchRun(executionParams: $p) { __typename
            ... on LaunchRunSuccess { run { runId } } ... on PythonError { message }
            ... on RunConfigValidationInvalid { errors { message } }
            ... on InvalidSubsetError { message } } }""",
            {"p": params},
        )["launchRun"]
        if data["__typename"] != "LaunchRunSuccess":
            raise RuntimeError(f"launchRun failed: {data}")
        return str(data["run"]["runId"])

    def run(self, run_id: str) -> Run:
        data = self.gql(
            """query($id: ID!) { runOrError(runId: $id) { __typename
            ... on Run { runId status startTime endTime tags { key value } } } }""",
            {"id": run_id},
        )["runOrError"]
        return Run(
            run_id=data["runId"],
            status=data["status"],
            start=data["startTime"],
            end=data["endTime"],
            tags={t["key"]: t["value"] for t in data["tags"]},
        )

    def wait(self, run_ids: Sequence[str], timeout: float = 1200) -> list[Run]:
        deadline = time.monotonic() + timeout
        while True:
            runs = [self.run(r) for r in run_ids]
            if all(r.status in FINISHED for r in runs):
                return runs
            if time.monotonic() > deadline:
                raise TimeoutError(f"runs not finished after {timeout:.0f} s: {runs}")
            time.sleep(1)

    def events(self, run_id: str) -> list[dict[str, Any]]:
        """Every event of a run: type, step key, timestamp (seconds)."""
        events: list[dict[str, Any]] = []
        cursor = None
        while True:
            data = self.gql(
                """query($id: ID!, $after: String) { logsForRun(runId: $id, afterCursor: $after)
                { __typename ... on EventConnection { cursor hasMore events {
                  __typename ... on MessageEvent { message timestamp stepKey } } } } }""",
                {"id": run_id, "after": cursor},
            )["logsForRun"]
            events += [
                {
                    "type": e["__typename"],
                    "step": e.get("stepKey"),
                    "time": float(e["timestamp"]) / 1000,
                    "message": e.get("message"),
                }
                for e in data["events"]
            ]
            cursor = data["cursor"]
            if not data["hasMore"]:
                return events

    def step_spans(self, run_id: str, steps: Iterable[str]) -> list[tuple[float, float, str]]:
        """(start, end, "run/step") of each step in ``steps`` that started in the run."""
        wanted = set(steps)
        starts: dict[str, float] = {}
        spans = []
        for e in self.events(run_id):
            if e["step"] not in wanted:
                continue
            if e["type"] == "ExecutionStepStartEvent":
                starts[e["step"]] = e["time"]
            elif e["type"] in ("ExecutionStepSuccessEvent", "ExecutionStepFailureEvent"):
                spans.append((starts[e["step"]], e["time"], f"{run_id[:8]}/{e['step']}"))
        return spans


@dataclass
class DockerStack(DagsterApi):
    """One compose stack on this host; ``up()`` then ``down()`` (also after a failure)."""

    instance_yaml: Path | None = None  # instead of docker/dagster.yaml (benchmark settings)
    password: str = field(default_factory=lambda: secrets.token_hex(16))
    _override: Path | None = None
    _lock: int | None = None

    def env(self) -> dict[str, str]:
        gid = os.stat("/var/run/docker.sock").st_gid
        return {
            **os.environ,
            "DAGSTER_POSTGRES_PASSWORD": self.password,
            "DOCKER_GID": str(gid),
            "TMLBENCH_UI_PORT": str(self.port),
        }

    def compose(self, *args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
        command = compose_command()
        assert command is not None, "no docker compose"
        files = ["-f", str(COMPOSE_FILE)]
        if self._override is not None:
            files += ["-f", str(self._override)]
        return subprocess.run(
            [*command, "-p", PROJECT, *files, *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            env=self.env(),
            check=False,
        )

    # -- lifecycle -------------------------------------------------------------------------

    def up(self, timeout: float = 600, lock_patience: float = LOCK_PATIENCE) -> float:
        """Claim the host, start the stack, wait until the code location is loaded."""
        start = time.monotonic()
        self.claim_host(lock_patience)
        self._override = self._write_override()
        got = self.compose("up", "-d", "--no-build", timeout=timeout)
        if got.returncode != 0:
            raise RuntimeError(f"docker-compose up failed:\n{got.stdout}\n{got.stderr}")
        deadline = start + timeout
        while time.monotonic() < deadline:
            try:
                if self.location_loaded():
                    return time.monotonic() - start
            except (OSError, urllib.error.URLError, ValueError, KeyError):
                pass
            time.sleep(2)
        raise TimeoutError(f"the code location did not load in {timeout:.0f} s:\n{self.logs()}")

    def claim_host(self, lock_patience: float = LOCK_PATIENCE) -> None:
        """Take the host's stack lock (waiting for another test's or benchmark's stack), refuse a
        stack or data no test made, remove a stack a killed test left, make the host folders."""
        self.lock_host(lock_patience)
        problem = host_problem() or stack_problem()
        if problem:
            self._release_lock()
            raise RuntimeError(f"not bringing the stack up: {problem}")
        if leftover := sorted(stack_containers()):
            # Ours (stack_problem found no foreign one) and no live test's (we hold the lock).
            print(f"removing the stack a killed test or benchmark left: {', '.join(leftover)}")
            self._remove_everything()
        SRV.mkdir(parents=True, exist_ok=True)
        MARKER.touch()
        for name in FOLDERS:
            (SRV / name).mkdir(exist_ok=True)

    def _write_override(self) -> Path:
        """A compose file over the deployment's: the label on every service, and the benchmark's
        instance settings where given."""
        services: dict[str, dict[str, Any]] = {
            s: {"labels": {MADE_BY_TESTS: "true"}} for s in SERVICES
        }
        if self.instance_yaml is not None:
            mount = f"{self.instance_yaml}:/opt/dagster/home/dagster.yaml:ro"
            for name in SERVICES[1:]:
                services[name]["volumes"] = [mount]
        path = Path(tempfile.mkstemp(prefix="tmlbench-compose-", suffix=".yaml")[1])
        path.write_text(json.dumps({"services": services}))
        return path

    def lock_host(self, patience: float = 0) -> None:
        """Hold the host's stack lock (at once if held already), waiting up to ``patience``
        seconds for another test or benchmark (another clone, another engineer) to let it go."""
        if self._lock is not None:
            return
        fd = os.open(LOCK, os.O_RDWR | os.O_CREAT, 0o644)
        deadline, waited = time.monotonic() + patience, False
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if patience and not waited:
                    print(f"waiting up to {patience:.0f} s for {LOCK}: another stack is up")
                    waited = True
                if time.monotonic() >= deadline:
                    os.close(fd)
                    raise RuntimeError(
                        f"another Docker deployment test or benchmark has held {LOCK} on this"
                        f" host for the {patience:.0f} s waited"
                    ) from None
                time.sleep(2)
        self._lock = fd

    def _release_lock(self) -> None:
        if self._lock is not None:
            os.close(self._lock)
            self._lock = None

    def down(self, leftover: bool = False) -> None:
        """Remove everything the stack made, whatever state it is in: only a stack this object
        brought up (it holds the lock), or with ``leftover`` one that a killed test or benchmark
        left behind (the lock is free then; the engine's restart policy brings it back up)."""
        if leftover:
            self.lock_host()
        if self._lock is None:
            return
        try:
            self._remove_everything()
        finally:
            self._release_lock()

    def _remove_everything(self) -> None:
        # Killed, not stopped: nothing of the stack is kept (its containers, volumes and host
        # folders all go), so nothing needs a clean shutdown, and a stop waits out compose's
        # timeout for each service that does not exit on SIGTERM.
        # No new run containers (run retries, the queue) while the old ones are removed.
        self.compose("kill", "tmlbench_daemon")
        self.remove_run_containers()
        # Run containers hold the network and the volume: gone first, then the stack.
        self.compose("kill")
        self.compose("down", "-v", "--remove-orphans", "--timeout", "0")
        # By name too: compose finds its containers by their project labels, which a container
        # made by hand or by another compose version may lack. Never one without our label.
        for name in [name for name, ours in stack_containers().items() if ours]:
            docker("rm", "-f", "-v", name, check=False)
        self.remove_run_containers()
        docker("network", "rm", NETWORK, check=False)
        for volume in VOLUMES:
            docker("volume", "rm", "-f", volume, check=False)
        if self._override is not None:
            self._override.unlink(missing_ok=True)
        if MARKER.exists():
            shutil.rmtree(SRV, ignore_errors=True)

    def remove_run_containers(self) -> None:
        """Every run container, and attempt containers a killed run could not remove itself."""
        runs = self.run_containers(all_states=True)
        for cid in [*self.attempt_containers(runs), *runs]:
            docker("rm", "-f", "-v", cid, check=False)

    # -- what the engine shows -------------------------------------------------------------

    def run_containers(self, all_states: bool = False) -> list[str]:
        """Containers the DockerRunLauncher started (labelled with a Dagster run id)."""
        args = ["ps", "-q", "--no-trunc", "--filter", "label=app=tmlbench"]
        args += ["--filter", "label=dagster/run_id"]
        return docker(*args, *(["-a"] if all_states else [])).stdout.split()

    def attempt_containers(self, runs: list[str] | None = None) -> list[str]:
        """Attempt containers (any state) that a harness in one of this stack's run containers
        started: its own, never those of a docker sandbox elsewhere on the same engine."""
        runs = self.run_containers(all_states=True) if runs is None else runs
        listed = docker(
            "ps", "-a", "--filter", "label=tmlbench.attempt",
            "--format", '{{.ID}} {{.Label "tmlbench.harness_container"}}',
        ).stdout  # fmt: skip
        return [
            cid for cid, _, harness in (line.partition(" ") for line in listed.splitlines())
            if harness in runs
        ]  # fmt: skip

    def inspect(self, container: str) -> dict[str, Any]:
        found: dict[str, Any] = json.loads(docker("inspect", container).stdout)[0]
        return found

    def postgres_sessions(self) -> int:
        """How many connections the instance's database has accepted since the stack came up
        (Postgres's own count, ``pg_stat_database.sessions``)."""
        return sessions(SERVICES[0])

    def logs(self, containers: Iterable[str] = SERVICES[1:], tail: int = 40) -> str:
        out = []
        for name in containers:
            got = docker("logs", "--tail", str(tail), name, check=False)
            out.append(f"--- {name}\n{got.stdout[-6000:]}{got.stderr[-6000:]}")
        return "\n".join(out)


def suite_asset(name: str) -> str:
    """``prepared_tasks`` → ``demo/prepared_tasks``: the demo suite's asset of that name."""
    return f"{SUITE}/{name}"


def task_tags(task_id: str) -> dict[str, str]:
    """Tags of a ``prepared_tasks`` run of one task (its partition)."""
    return {"dagster/partition": task_id}


def setting_tags(agent_id: str, task_id: str, budget_seconds: int) -> dict[str, str]:
    """Tags of an ``agent_runs`` run of one setting: its task × agent@budget partition, as the
    UI's Materialize sets them (the key and one tag per dimension)."""
    key = settings_partition_key(agent_id, task_id, budget_seconds)
    tags = {"dagster/partition": str(key)}
    tags |= {f"dagster/partition/{dim}": part for dim, part in key.keys_by_dimension.items()}
    return tags


def overlapping(spans: Sequence[tuple[float, float, str]]) -> list[tuple[str, str]]:
    """Pairs of spans that overlap in time."""
    ordered = sorted(spans)
    return [(a[2], b[2]) for i, a in enumerate(ordered) for b in ordered[i + 1 :] if b[0] < a[1]]
