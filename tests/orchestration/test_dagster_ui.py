"""The real Dagster UI serves tmlbench's asset graph.

Starts ``dagster-webserver -m orchestration.definitions`` on a free loopback port with a
throwaway DAGSTER_HOME, waits for ``/server_info``, then asks the GraphQL API for the asset
nodes: the benchmark's assets are there, ``agent_runs`` has one partition per setting of the
default suite, and every asset that writes the warehouse is in the ``duckdb`` pool. The
webserver (no daemon) never launches a run. Its process group is always terminated.
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
from collections.abc import Iterator
from pathlib import Path

import pytest

from runner.config import REPO_ROOT
from runner.specs.registry import load_suite
from tools.dagster_ui import graphql
from tools.servers import free_port, stop

# The Dagster processes it starts read dbt_manifest's temp target ($TMLBENCH_DBT_TARGET), never the
# repository's dbt_project/target, which a `tmlbench warehouse build` elsewhere may be rewriting.
pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("dbt_manifest")]

MODULE = "orchestration.definitions"
STARTUP_TIMEOUT = 90.0
BIN = Path(sys.executable).parent
MANIFEST = REPO_ROOT / "dbt_project" / "target" / "manifest.json"
SUITE = "demo"  # one asset group per suite file; this one's partitions are checked

ASSET_NODES = """
query AssetNodes {
  assetNodes {
    assetKey { path }
    groupName
    isPartitioned
    partitionKeys
    pools
    description
    jobNames
  }
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
        locationOrLoadError {
          __typename
          ... on PythonError { message }
        }
      }
    }
  }
}
"""


def http_get(url: str, timeout: float = 5.0) -> bytes:
    with urllib.request.urlopen(url, timeout=timeout) as response:
        return response.read()


def ensure_manifest(tmp: Path) -> None:
    """The definitions load dbt's manifest (``dbt parse``, no database needed)."""
    if MANIFEST.is_file():
        return
    env = {**os.environ, "TMLBENCH_WAREHOUSE": str(tmp / "parse.duckdb")}
    project = str(REPO_ROOT / "dbt_project")
    subprocess.run(
        [str(BIN / "dbt"), "parse", "--project-dir", project, "--profiles-dir", project, "--quiet"],
        cwd=REPO_ROOT,
        env=env,
        check=True,
        timeout=300,
    )
    assert MANIFEST.is_file()


@pytest.fixture
def webserver(tmp_path: Path) -> Iterator[str]:
    ensure_manifest(tmp_path)
    home = tmp_path / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text(
        "telemetry:\n  enabled: false\nconcurrency:\n  pools:\n    default_limit: 1\n"
    )
    sync_default_suite(home)  # what the sensor does once the daemon runs (this test has none)
    env = {
        **os.environ,
        "DAGSTER_HOME": str(home),
        # Nothing should run, but if anything did it would only touch these.
        "TMLBENCH_WAREHOUSE": str(tmp_path / "warehouse.duckdb"),
        "TMLBENCH_DATA_DIR": str(tmp_path / "data"),
        "TMLBENCH_RUNS_DIR": str(tmp_path / "runs"),
        "PYTHONUNBUFFERED": "1",
    }
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    log = (tmp_path / "webserver.log").open("w+b")
    exe = shutil.which("dagster-webserver", path=str(BIN)) or str(BIN / "dagster-webserver")
    proc = subprocess.Popen(
        [exe, "-m", MODULE, "-h", "127.0.0.1", "-p", str(port)],
        cwd=REPO_ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,  # its own process group: the code server child goes too
    )
    try:
        deadline = time.monotonic() + STARTUP_TIMEOUT
        while True:
            if proc.poll() is not None:
                log.seek(0)
                pytest.fail(
                    f"webserver exited with {proc.returncode}:\n{log.read()[-4000:].decode()}"
                )
            try:
                info = json.loads(http_get(f"{base}/server_info"))
                assert "dagster_webserver_version" in info or "dagit_version" in info, info
                break
            except (urllib.error.URLError, ConnectionError, TimeoutError, json.JSONDecodeError):
                pass
            if time.monotonic() > deadline:
                log.seek(0)
                pytest.fail(
                    f"no /server_info after {STARTUP_TIMEOUT}s:\n{log.read()[-4000:].decode()}"
                )
            time.sleep(0.5)
        yield base
    finally:
        stop(proc)
        log.close()


def sync_default_suite(home: Path) -> None:
    import dagster as dg

    from orchestration.sensors import sync_suite
    from orchestration.suites import SuiteFile, scan_specs
    from runner.config import Paths

    with dg.DagsterInstance.from_config(str(home)) as instance:
        sync_suite(instance, SuiteFile(SUITE), scan_specs(Paths.from_env()).keys[SUITE])


def loaded_location(base: str) -> dict:
    """Wait until the code location has loaded (or failed, with its error)."""
    deadline = time.monotonic() + STARTUP_TIMEOUT
    while True:
        data = graphql(base, LOCATIONS)["workspaceOrError"]
        assert data["__typename"] == "Workspace", data
        entries = data["locationEntries"]
        if entries and all(e["loadStatus"] == "LOADED" for e in entries):
            (entry,) = entries
            location = entry["locationOrLoadError"]
            assert location["__typename"] == "RepositoryLocation", location.get("message")
            return entry
        assert time.monotonic() < deadline, f"code location not loaded: {entries}"
        time.sleep(0.5)


def test_ui_serves_the_benchmark_assets(webserver: str) -> None:
    entry = loaded_location(webserver)
    assert entry["name"] == MODULE

    nodes = {
        "/".join(node["assetKey"]["path"]): node
        for node in graphql(webserver, ASSET_NODES)["assetNodes"]
    }
    # The data flow of ARCHITECTURE.md: prepared tasks -> agent runs -> raw load -> dbt
    # models -> published snapshot.
    expected = {
        f"{SUITE}/prepared_tasks",
        f"{SUITE}/agent_runs",
        "tml-v1/agent_runs",
        "tml-v1-llm/agent_runs",
        "raw/runs",
        "raw/tasks",
        "raw/agents",
        "marts/setting_scores",
        "marts/normalized_scores",
        "marts/leaderboard",
        "marts/task_ranks",
        "marts/rank_stability",
        "marts/success_rates",
        "marts/run_stability",
        "marts/time_scaling",
        "marts/coverage",
        "marts/leaderboard_uncertainty",
        "marts_snapshot",
    }
    assert expected <= set(nodes), sorted(expected - set(nodes))

    # One agent_runs partition per setting (agent × task × budget) of the suite.
    from orchestration.partitions import settings_partition_key

    suite = load_suite(REPO_ROOT / "suites", SUITE)
    settings = {
        str(settings_partition_key(agent, task, budget))
        for agent in suite.agents
        for task in suite.tasks
        for budget in suite.budgets
    }
    runs = nodes[f"{SUITE}/agent_runs"]
    assert runs["isPartitioned"] and runs["groupName"] == f"suite_{SUITE}"
    assert len(runs["partitionKeys"]) == len(suite.agents) * len(suite.tasks) * len(suite.budgets)
    assert set(runs["partitionKeys"]) == settings
    assert set(nodes[f"{SUITE}/prepared_tasks"]["partitionKeys"]) == set(suite.tasks)

    # Every warehouse writer shares the single-writer pool; attempts do not.
    for key in ("raw/runs", "marts/leaderboard", "marts_snapshot"):
        assert nodes[key]["pools"] == ["duckdb"], (key, nodes[key]["pools"])
    assert nodes[f"{SUITE}/agent_runs"]["pools"] == ["attempts"]  # one process pins CPUs

    # What the UI renders: placeholders in code spans (raw <...> is dropped as HTML), a dbt
    # model's YAML description and its file, never its SQL; the suite's own job.
    assert "`<runs>/<runs_subdir>/`" in runs["description"]
    leaderboard = nodes["marts/leaderboard"]["description"]
    assert leaderboard.endswith("Defined in `dbt_project/models/marts/leaderboard.sql`.")
    assert "Raw SQL" not in leaderboard and "select" not in leaderboard
    assert f"{SUITE}_agent_runs" in runs["jobNames"]
