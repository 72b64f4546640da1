"""The real Dagster UI: it serves tmlbench's asset graph, and materializing an unprepared setting
from it records no attempt, its failed run's page saying which ``prepared_tasks`` partition to
materialize.

One ``dagster-webserver -m orchestration.definitions`` for the module, on a free loopback port
with a throwaway DAGSTER_HOME (starting one costs ~20 s: both tests share it). Its run
coordinator launches runs at once (Dagster's default, the queued coordinator, waits for a
daemon: there is none). The asset graph is read from the GraphQL API: the benchmark's assets are
there, ``agent_runs`` has one partition per setting of the default suite, and every asset that
writes the warehouse is in the ``duckdb`` pool. Then one ``demo/agent_runs`` partition is
launched through the API as the Materialize button does (``DagsterUI.materialize_partition``:
the partition's tags and config from the job, then the launch), and the failed run's page is
opened in chromium. The webserver's process group is always terminated.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from runner.attempts.records import RECORD_FILE
from runner.config import REPO_ROOT, Paths
from runner.specs.registry import load_suite
from tools.dagster_ui import (
    BIN,
    LOCATIONS,
    MODULE,
    DagsterUI,
    DagsterUIError,
    graphql,
    wait_until_loaded,
)
from tools.servers import free_port, stop
from tools.streamlit_server import CHROMIUM, CHROMIUM_ARGS

# The Dagster processes it starts read dbt_manifest's temp target ($TMLBENCH_DBT_TARGET), never the
# repository's dbt_project/target, which a `tmlbench warehouse build` elsewhere may be rewriting.
# xdist_group: the module's webserver is started once, on one worker.
pytestmark = [
    pytest.mark.slow,
    pytest.mark.usefixtures("dbt_manifest"),
    pytest.mark.xdist_group("dagster_ui"),
]

TIMEOUT = 180.0
SUITE = "demo"  # one asset group per suite file; this one's partitions are checked
TASK = "bank-customer-churn-ict-u-ai"
AGENT_BUDGET = "baseline-constant@240s"
PARTITION = f"{AGENT_BUDGET}|{TASK}"  # Dagster's string form: dimensions in name order
FIX = f"materialize demo/prepared_tasks partition {TASK} first (or select both assets)"
DAGSTER_YAML = """\
telemetry:
  enabled: false
concurrency:
  pools:
    default_limit: 1
run_coordinator:
  module: dagster._core.run_coordinator
  class: DefaultRunCoordinator
"""


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


@pytest.fixture(scope="module")
def ui(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[DagsterUI, Path]]:
    """The webserver and the runs folder its runs write to (nothing is prepared)."""
    import dagster as dg

    from orchestration.sensors import sync_suite
    from orchestration.suites import SuiteFile, scan_specs

    tmp = tmp_path_factory.mktemp("dagster-ui")
    home = tmp / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text(DAGSTER_YAML)
    env = {
        **os.environ,
        "DAGSTER_HOME": str(home),
        "TMLBENCH_WAREHOUSE": str(tmp / "warehouse.duckdb"),
        "TMLBENCH_DATA_DIR": str(tmp / "data"),  # nothing prepared
        "TMLBENCH_RUNS_DIR": str(tmp / "runs"),
        "PYTHONUNBUFFERED": "1",
    }
    with dg.DagsterInstance.from_config(str(home)) as instance:  # what the sensor would do
        paths = Paths.from_env(env)
        sync_suite(instance, SuiteFile(SUITE), scan_specs(paths).keys[SUITE])
    port = free_port()
    ui = DagsterUI(f"http://127.0.0.1:{port}", home, tmp / "webserver.log")
    exe = shutil.which("dagster-webserver", path=str(BIN)) or str(BIN / "dagster-webserver")
    with ui.log.open("wb") as log:
        proc = subprocess.Popen(
            [exe, "-m", MODULE, "-h", "127.0.0.1", "-p", str(port)],
            cwd=REPO_ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own group: the code server and run workers go too
        )
    try:
        try:
            wait_until_loaded(ui, proc, TIMEOUT)
        except DagsterUIError as error:
            raise DagsterUIError(f"{error}:\n{ui.log_tail(4000)}") from None
        yield ui, tmp / "runs"
    finally:
        stop(proc)


def test_ui_serves_the_benchmark_assets(ui: tuple[DagsterUI, Path]) -> None:
    webserver = ui[0].base
    (entry,) = graphql(webserver, LOCATIONS)["workspaceOrError"]["locationEntries"]
    assert entry["name"] == MODULE
    location = entry["locationOrLoadError"]
    assert location["__typename"] == "RepositoryLocation", location.get("message")

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


def test_an_unprepared_setting_fails_its_run_naming_the_partition_to_materialize(
    ui: tuple[DagsterUI, Path],
) -> None:
    server, runs_dir = ui
    base = server.base
    run_id = server.materialize_partition([SUITE, "agent_runs"], PARTITION)

    assert server.wait_for_run(run_id, TIMEOUT)["status"] == "FAILURE"
    assert list(runs_dir.rglob(RECORD_FILE)) == [], "a refused run records no attempt"
    assert not runs_dir.exists() or not any(runs_dir.rglob("*__a00")), "nor starts one"

    from playwright.sync_api import TimeoutError as PlaywrightTimeout
    from playwright.sync_api import sync_playwright

    assert CHROMIUM.is_file(), f"{CHROMIUM} is missing (make browser-deps)"
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1600, "height": 1000})
            page.goto(f"{base}/runs/{run_id}")
            skip = page.get_by_role("button", name="Skip")  # Dagster's first-visit newsletter box
            with contextlib.suppress(PlaywrightTimeout):
                skip.click(timeout=10_000)
            message = page.get_by_text(FIX).first  # the step's failure, in the run's log
            message.wait_for(timeout=60_000)
            assert message.is_visible()
            shown = page.inner_text("body")
            assert f"task {TASK} is not prepared" in shown
            assert f"(partition {PARTITION})" in shown  # the setting as the UI names it
            assert "harness_error" not in shown  # a refusal, not a recorded fault
            page.screenshot(path=str(runs_dir.parent / "refused-run.png"))
        finally:
            browser.close()
