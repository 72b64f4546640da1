"""Materializing an unprepared setting from the real Dagster UI records no attempt, and the
failed run's page says which ``prepared_tasks`` partition to materialize.

Starts ``dagster-webserver`` on a free loopback port with a throwaway DAGSTER_HOME whose run
coordinator launches runs at once (Dagster's default, the queued coordinator, waits for a
daemon: this test has none), launches one ``demo/agent_runs`` partition through the GraphQL
API as the Materialize button does (``launchRun`` of the asset job with the partition's tags),
and opens the failed run's page in chromium. Its process group is always terminated.
"""

from __future__ import annotations

import contextlib
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

from runner.attempts.records import RECORD_FILE
from runner.config import REPO_ROOT, Paths
from tools.dagster_ui import graphql
from tools.servers import free_port, stop
from tools.streamlit_server import CHROMIUM, CHROMIUM_ARGS

# The Dagster processes it starts read dbt_manifest's temp target ($TMLBENCH_DBT_TARGET), never the
# repository's dbt_project/target, which a `tmlbench warehouse build` elsewhere may be rewriting.
pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("dbt_manifest")]

MODULE = "orchestration.definitions"
TIMEOUT = 180.0
BIN = Path(sys.executable).parent
SUITE = "demo"
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


def wait_for(what: str, check, timeout: float = TIMEOUT):
    deadline = time.monotonic() + timeout
    while True:
        try:
            found = check()
        except (urllib.error.URLError, ConnectionError, TimeoutError, json.JSONDecodeError):
            found = None
        if found:
            return found
        assert time.monotonic() < deadline, f"no {what} after {timeout:.0f} s"
        time.sleep(0.5)


@pytest.fixture
def ui(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """The webserver's base URL and the runs folder its runs write to."""
    import dagster as dg

    from orchestration.sensors import sync_suite
    from orchestration.suites import SuiteFile, scan_specs

    manifest = REPO_ROOT / "dbt_project" / "target" / "manifest.json"
    assert manifest.is_file(), "the definitions load dbt's manifest: run `make manifest`"
    home = tmp_path / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text(DAGSTER_YAML)
    env = {
        **os.environ,
        "DAGSTER_HOME": str(home),
        "TMLBENCH_WAREHOUSE": str(tmp_path / "warehouse.duckdb"),
        "TMLBENCH_DATA_DIR": str(tmp_path / "data"),  # nothing prepared
        "TMLBENCH_RUNS_DIR": str(tmp_path / "runs"),
        "PYTHONUNBUFFERED": "1",
    }
    with dg.DagsterInstance.from_config(str(home)) as instance:  # what the sensor would do
        paths = Paths.from_env(env)
        sync_suite(instance, SuiteFile(SUITE), scan_specs(paths).keys[SUITE])
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
        start_new_session=True,  # its own process group: the code server and run workers go too
    )
    try:

        def loaded() -> bool:
            assert proc.poll() is None, f"webserver exited with {proc.returncode}"
            data = graphql(
                base, "{ workspaceOrError { ... on Workspace { locationEntries { loadStatus } } } }"
            )
            entries = data["workspaceOrError"]["locationEntries"]
            return bool(entries) and all(e["loadStatus"] == "LOADED" for e in entries)

        try:
            wait_for("loaded code location", loaded)
        except AssertionError:
            log.seek(0)
            raise AssertionError(log.read()[-4000:].decode()) from None
        yield base, tmp_path / "runs"
    finally:
        stop(proc)
        log.close()


def launch(base: str) -> str:
    """What the Materialize button does for one partition of ``demo/agent_runs``."""
    params = {
        "selector": {
            "repositoryLocationName": MODULE,
            "repositoryName": "__repository__",
            "jobName": "__ASSET_JOB",
            "assetSelection": [{"path": [SUITE, "agent_runs"]}],
            "assetCheckSelection": [],
        },
        "runConfigData": {},
        "executionMetadata": {
            "tags": [
                {"key": "dagster/partition", "value": PARTITION},
                {"key": "dagster/partition/agent_budget", "value": AGENT_BUDGET},
                {"key": "dagster/partition/task", "value": TASK},
            ]
        },
    }
    data = graphql(
        base,
        """mutation($p: ExecutionParams!) { launchRun(executionParams: $p) { __typename
        ... on LaunchRunSuccess { run { runId } } ... on PythonError { message }
        ... on RunConfigValidationInvalid { errors { message } }
        ... on InvalidSubsetError { message } } }""",
        {"p": params},
    )["launchRun"]
    assert data["__typename"] == "LaunchRunSuccess", data
    return str(data["run"]["runId"])


def test_an_unprepared_setting_fails_its_run_naming_the_partition_to_materialize(ui) -> None:
    base, runs_dir = ui
    run_id = launch(base)

    def finished() -> str | None:
        run = graphql(
            base,
            "query($id: ID!) { runOrError(runId: $id) { ... on Run { status } } }",
            {"id": run_id},
        )["runOrError"]
        return run["status"] if run["status"] in ("SUCCESS", "FAILURE", "CANCELED") else None

    assert wait_for("finished run", finished) == "FAILURE"
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
