"""Issue 15 in Dagster: the raw load reads the settings just run, reports a data version of what
the warehouse holds, and nothing downstream is rebuilt when nothing changed."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import dagster as dg
import pytest

from runner.config import REPO_ROOT
from runner.suites.benchmark_settings import suite_settings
from tests.support.run_folders import write
from tests.support.tiny_suites import tiny_suite_resources
from tools.records import make_record

# integration: the Dagster graph materialized over real dbt builds
pytestmark = pytest.mark.integration

BANK = "bank-customer-churn-ict-u-ai"
S6E1 = "playground-series-s6e1"
AGENTS = ["baseline-constant", "baseline-linear"]


@pytest.fixture
def tiny(tmp_path: Path):
    """A two-agent, two-task suite in temporary folders; resources; a Dagster instance that
    holds the suite's partitions; the definitions."""
    from orchestration.definitions import build_defs
    from orchestration.sensors import sync_suite
    from orchestration.suites import SuiteFile, scan_specs

    suite = {
        "id": "tiny", "title": "tiny", "tasks": [BANK, S6E1], "agents": AGENTS,
        "budgets": [30], "attempts": 2, "twin_rows": 300, "data_subdir": "tiny",
        "runs_subdir": "tiny",
    }  # fmt: skip
    resources = tiny_suite_resources(tmp_path, suite)
    bench = resources["bench"]
    with dg.instance_for_test() as instance:
        sync_suite(instance, SuiteFile("tiny"), scan_specs(bench.paths()).keys["tiny"])
        yield bench, resources, instance, build_defs([SuiteFile("tiny")], resources)


def record_setting(bench, key: str, attempts: int = 2, first: int = 0, suite: str = "tiny") -> None:
    """Write ``attempts`` records of setting ``key`` (indices from ``first``) as the bench would."""
    spec = bench.suite(suite)
    setting = {s.key: s for s in suite_settings(spec, bench.paths())}[key]
    for index in range(first, first + attempts):
        record = make_record(
            agent=setting.agent.id, task=setting.task.id, budget=setting.budget_seconds,
            minute=index, run_id=setting.plan(index).run_id, suite_id=suite,
        )  # fmt: skip
        write(bench.layout(spec).runs_dir, record)


def ran(instance: dg.DagsterInstance, *settings: str) -> None:
    """What a materialization of these settings' tiny/agent_runs partitions leaves behind."""
    from orchestration.partitions import settings_partition_key
    from runner.suites.benchmark_settings import parse_setting_key

    for setting in settings:
        partition = str(settings_partition_key(*parse_setting_key(setting)))
        instance.report_runless_asset_event(
            dg.AssetMaterialization(["tiny", "agent_runs"], partition=partition)
        )


def load_raw(
    defs: dg.Definitions, resources: dict, instance: dg.DagsterInstance, config: dict | None = None
) -> dg.ExecuteInProcessResult:
    """Materialize the raw load (the raw tables' one multi-asset) in this process."""
    from orchestration.assets.warehouse import RAW_KEYS

    return dg.materialize(
        [*defs.assets, *defs.asset_checks],
        selection=dg.AssetSelection.assets(*RAW_KEYS),
        resources=resources,
        instance=instance,
        run_config={"ops": {"raw_warehouse": {"config": config or {}}}},
    )


def load(tiny, config: dict | None = None) -> dict:
    """Materialize the raw load; the metadata and data version of raw/runs."""
    from orchestration.assets.warehouse import RAW_RUNS

    _, resources, instance, defs = tiny
    result = load_raw(defs, resources, instance, config)
    assert result.success
    (event,) = [
        e.materialization
        for e in result.get_asset_materialization_events()
        if e.materialization.asset_key == RAW_RUNS
    ]
    meta = {k: v.value for k, v in event.metadata.items()}
    meta["data_version"] = event.tags["dagster/data_version"]
    return meta


def key(agent: str, task: str = BANK) -> str:
    return f"{agent}|{task}|30"


def test_the_raw_load_reads_the_settings_run_since_it_last_ran(tiny):
    bench, _, instance, _ = tiny
    record_setting(bench, key("baseline-constant"))
    first = load(tiny)  # never loaded: every record
    assert (first["scope"], first["new"]) == ("every record", 2)

    record_setting(bench, key("baseline-linear"))
    record_setting(bench, key("baseline-linear", S6E1))  # on disk, but its setting did not run
    ran(instance, key("baseline-linear"))
    partial = load(tiny)
    assert partial["scope"] == "1 settings"
    assert (partial["new"], partial["unchanged"], partial["parsed"]) == (2, 0, 2)

    # run on its own (no setting ran since): an index-based rescan finds the rest
    full = load(tiny)
    assert full["scope"] == "every record"
    assert (full["new"], full["unchanged"], full["parsed"]) == (2, 4, 2)
    assert full["dagster/row_count"] == 6

    chosen = load(tiny, {"settings": {"tiny": [key("baseline-constant")]}})
    assert (chosen["scope"], chosen["unchanged"], chosen["parsed"]) == ("1 settings", 2, 0)
    with pytest.raises(dg.Failure, match="not settings of suite tiny"):
        load(tiny, {"settings": {"tiny": ["nobody|nothing|1"]}})


def test_the_raw_assets_are_the_raw_tables_the_load_reports():
    from orchestration.assets.warehouse import RAW_KEYS
    from warehouse.raw_load import RAW_TABLES

    assert tuple(".".join(key.path) for key in RAW_KEYS) == RAW_TABLES


def test_the_data_version_changes_with_the_content_only(tiny):
    bench = tiny[0]
    record_setting(bench, key("baseline-constant"))
    first = load(tiny)
    again = load(tiny, {"full_rescan": True})
    assert again["new"] == 0 and again["data_version"] == first["data_version"]
    record_setting(bench, key("baseline-linear"))
    changed = load(tiny, {"full_rescan": True})
    assert changed["new"] == 2 and changed["data_version"] != first["data_version"]


def test_automation_rebuilds_the_marts_only_when_the_raw_data_changed(tiny, dbt_manifest):
    """The dbt models and the snapshot follow raw/runs's data version, not its materializations."""
    bench, _, instance, defs = tiny
    graph = defs.resolve_asset_graph()
    downstream = {k for k in graph.get_all_asset_keys() if k.path[0] not in ("tiny", "raw")}
    stg_runs = dg.AssetKey("stg_raw__runs")
    assert stg_runs in downstream and dg.AssetKey("marts_snapshot") in downstream

    def tick(cursor):
        result = dg.evaluate_automation_conditions(defs=defs, instance=instance, cursor=cursor)
        return result.cursor, {k for k in downstream if result.get_requested_partitions(k)}

    ran(instance, *[f"{a}|{t}|30" for a in AGENTS for t in (BANK, S6E1)])
    record_setting(bench, key("baseline-constant"))
    load(tiny)
    for k in downstream:  # as if dbt and the snapshot had been built from this load
        instance.report_runless_asset_event(dg.AssetMaterialization(k))
    cursor, _ = tick(None)
    cursor, requested = tick(cursor)
    assert requested == set()

    load(tiny, {"full_rescan": True})  # nothing new
    cursor, requested = tick(cursor)
    assert requested == set(), "a load that changed nothing rebuilt the marts"

    record_setting(bench, key("baseline-linear"))
    load(tiny, {"full_rescan": True})
    cursor, requested = tick(cursor)
    assert stg_runs in requested and dg.AssetKey("marts_snapshot") in requested


@pytest.mark.sandbox
def test_make_run_then_again_with_nothing_new_skips_dbt_and_the_snapshot(tmp_path, dbt_manifest):
    """`make run` twice, as a person runs it (``python -m orchestration.materialize`` with a
    DAGSTER_HOME holding orchestration/dagster.yaml, as the Makefile sets it): the first shows
    bars and a summary, logs everything to a file and builds dbt, the snapshot and the reports;
    the second, with every attempt recorded, loads the raw tables again and skips them. Then a
    record the marts have not seen, loaded as the next `make run` would load it, puts the
    warehouse ahead of what the snapshot was built from: ``marts_current``, what decides the
    skip, says so, and that `make run` would take the first one's path. The instance's history
    says what ran."""
    from orchestration.assets.warehouse import RAW_KEYS, SNAPSHOT
    from orchestration.definitions import build_defs
    from orchestration.materialize import marts_current
    from orchestration.suites import SuiteFile

    suite = {
        "id": "one", "title": "one", "tasks": [BANK], "agents": ["baseline-constant"],
        "budgets": [30], "attempts": 2, "twin_rows": 300, "data_subdir": "one", "runs_subdir": "one",
    }  # fmt: skip
    resources = tiny_suite_resources(tmp_path, suite)  # the folders the make runs are given
    bench = resources["bench"]
    home = tmp_path / "dagster_home"
    home.mkdir()
    shutil.copy(REPO_ROOT / "orchestration" / "dagster.yaml", home / "dagster.yaml")
    env = {name: value for name, value in os.environ.items() if not name.startswith("DAGSTER_")}
    env |= {
        "DAGSTER_HOME": str(home),
        "TMLBENCH_SUITES_DIR": str(tmp_path / "suites"),
        "TMLBENCH_DATA_DIR": str(tmp_path / "data"),
        "TMLBENCH_RUNS_DIR": str(tmp_path / "runs"),
        "TMLBENCH_WAREHOUSE": str(tmp_path / "wh.duckdb"),
    }
    seen_runs: set[str] = set()

    def make_run() -> tuple[str, list[str]]:
        """The terminal of one `make run`, and the jobs of the runs it added to the instance."""
        result = subprocess.run(
            [sys.executable, "-m", "orchestration.materialize", "--suite", "one"],
            env=env, cwd=REPO_ROOT, capture_output=True, text=True, timeout=900, check=False,
        )  # fmt: skip
        terminal = result.stdout + result.stderr
        assert result.returncode == 0, terminal
        with dg.DagsterInstance.from_config(str(home)) as instance:
            runs = [r for r in reversed(instance.get_runs()) if r.run_id not in seen_runs]
        seen_runs.update(r.run_id for r in runs)
        assert all(r.status == dg.DagsterRunStatus.SUCCESS for r in runs), terminal
        # the Runs page names the suite: in each job's name and its tag
        assert {r.tags.get("tmlbench/suite") for r in runs} == {"one"}
        return terminal, [r.job_name for r in runs]

    def versions() -> dict[str, str | None]:
        """The latest data version of the raw tables and the snapshot's latest storage id."""
        out: dict[str, str | None] = {}
        with dg.DagsterInstance.from_config(str(home)) as instance:
            for k in RAW_KEYS:
                event = instance.get_latest_materialization_event(k)
                assert event is not None and event.asset_materialization is not None
                out[k.to_user_string()] = event.asset_materialization.tags["dagster/data_version"]
            snap = instance.fetch_materializations(SNAPSHOT, limit=1).records
        out["snapshot"] = str(snap[0].storage_id) if snap else None
        return out

    loaded = ["one_prepare_tasks", "one_agent_runs", "one_warehouse_load"]
    terminal, jobs = make_run()
    assert jobs == [*loaded, "one_warehouse"]
    # the terminal: a bar per phase and a summary, no Dagster log lines, no dbt output
    assert " - dagster - " not in terminal and "Warning" not in terminal
    assert "Running with dbt" not in terminal and " START " not in terminal
    assert "prepare tasks: ok" in terminal and "1 tasks" in terminal
    assert "agent runs: ok" in terminal and "2 new attempts (2 success)" in terminal
    assert "warehouse, dbt, snapshot, reports: ok" in terminal
    assert f"report bundles: {tmp_path / 'reports'}" in terminal  # next to the snapshot
    assert (tmp_path / "reports" / "one" / "report.html").is_file()
    assert len(terminal.splitlines()) <= 12, terminal
    (log,) = (tmp_path / "data" / "logs").glob("*.log")
    assert f"full log: {log}" in terminal
    # the log file: every Dagster event and dbt's whole output
    text = log.read_text(encoding="utf-8")
    assert " - dagster - INFO - " in text and "ASSET_CHECK_EVALUATION" in text
    assert "Running with dbt=" in text and "Completed successfully" in text

    snapshot = tmp_path / "wh.snapshot.duckdb"
    published = snapshot.stat().st_mtime_ns
    report = tmp_path / "reports" / "one"  # next to the snapshot
    reported = report.stat().st_ino
    before = versions()
    terminal, jobs = make_run()  # every attempt recorded: nothing new
    assert jobs == loaded
    assert "nothing new: dbt, the snapshot and the reports are up to date" in terminal, terminal
    assert "0 new attempts" in terminal
    assert snapshot.stat().st_mtime_ns == published and report.stat().st_ino == reported
    # the raw load ran again and reported the same data versions; no new snapshot
    assert versions() == before

    # A record the marts have not seen (written by hand), loaded in this process as `make run`
    # loads it first. A third `make run` would then rebuild the marts as the first one did, at
    # the first one's cost (~50 s of CPU); what decides between that and the skip is
    # marts_current, asked here of the same instance and warehouse.
    record_setting(bench, f"baseline-constant|{BANK}|30", attempts=1, first=2, suite="one")
    defs = build_defs([SuiteFile("one")], resources)
    with dg.DagsterInstance.from_config(str(home)) as instance:
        assert marts_current(resources["warehouse"], instance)  # as the second run found them
        assert load_raw(defs, resources, instance).success
        assert not marts_current(resources["warehouse"], instance), "the marts are behind"
    after = versions()
    assert after["raw/runs"] != before["raw/runs"] and after["raw/tasks"] == before["raw/tasks"]
    assert after["snapshot"] == before["snapshot"]


def test_a_broken_agent_file_stops_only_the_suite_that_lists_it(tmp_path: Path, dbt_manifest):
    """The definitions load, the raw load takes every run and every valid spec (naming the file
    it skipped), and only the suite listing the broken agent refuses to run, naming it."""
    import yaml

    from orchestration.assets.warehouse import RAW_AGENTS, RAW_RUNS
    from orchestration.definitions import build_defs
    from orchestration.materialize import materialize_suite
    from orchestration.sensors import sync_suite
    from orchestration.suites import SuiteFile, scan_specs, suite_files
    from runner.errors import SpecError

    agents = tmp_path / "agents"
    shutil.copytree(REPO_ROOT / "agents", agents, ignore=shutil.ignore_patterns("__pycache__"))
    broken = agents / "broken.yaml"
    broken.write_text("id: broken\nkind: wizard\n")
    suite = {
        "id": "tiny", "title": "tiny", "tasks": [BANK], "agents": AGENTS, "budgets": [30],
        "attempts": 2, "twin_rows": 300, "data_subdir": "tiny", "runs_subdir": "tiny",
    }  # fmt: skip
    resources = tiny_suite_resources(tmp_path, suite, agents_dir=agents)
    uses_broken = {**suite, "id": "uses-broken", "agents": ["broken"], "runs_subdir": "ub"}
    (tmp_path / "suites" / "uses-broken.yaml").write_text(yaml.safe_dump(uses_broken))
    bench = resources["bench"]

    files, _ = suite_files(bench.paths().suites_dir)
    defs = build_defs(files, resources)
    assert defs.resolve_asset_graph().get(dg.AssetKey(["uses-broken", "agent_runs"]))

    with dg.instance_for_test() as instance:
        with pytest.raises(SpecError) as refused:
            materialize_suite("uses-broken", resources, instance)
        assert f"{broken}: invalid AgentSpec: kind" in str(refused.value)
        assert "agents: 'broken' has an invalid spec file" in str(refused.value)

        sync_suite(instance, SuiteFile("tiny"), scan_specs(bench.paths()).keys["tiny"])
        record_setting(bench, key("baseline-constant"))
        result = load_raw(defs, resources, instance)
    assert result.success
    meta = {
        e.materialization.asset_key: {k: v.value for k, v in e.materialization.metadata.items()}
        for e in result.get_asset_materialization_events()
    }
    assert meta[RAW_RUNS]["new"] == 2
    [skipped] = meta[RAW_AGENTS]["skipped_spec_files"]
    assert skipped.startswith(f"{broken}: invalid AgentSpec: kind")
    assert meta[RAW_AGENTS]["dagster/row_count"] == len(list(agents.glob("*.yaml"))) - 1


def test_the_raw_load_reports_raw_resumptions_with_a_data_version_of_its_content(
    tiny, dbt_manifest
):
    """A suite's resumption log is loaded with its runs: raw/resumptions is materialized with a
    row per forgiven run and a data version that changes only when the log does."""
    import datetime as dt

    from orchestration.assets.warehouse import RAW_RESUMPTIONS
    from runner.suites.resumptions import Resumption, append_resumption

    bench, _, instance, _ = tiny
    runs_dir = bench.layout(bench.suite("tiny")).runs_dir
    record_setting(bench, key("baseline-constant"))
    now = dt.datetime(2026, 12, 5, tzinfo=dt.UTC)
    append_resumption(
        runs_dir, Resumption(key("baseline-constant"), ("r1", "r2"), now, "t", "tiny")
    )

    def resumptions() -> tuple[int, str]:
        event = instance.get_latest_materialization_event(RAW_RESUMPTIONS)
        assert event is not None and event.asset_materialization is not None
        materialization = event.asset_materialization
        rows = materialization.metadata["dagster/row_count"].value
        return rows, materialization.tags["dagster/data_version"]

    load(tiny, {"full_rescan": True})
    rows, version = resumptions()
    assert rows == 2
    load(tiny, {"full_rescan": True})
    assert resumptions() == (2, version)  # loading again changes nothing
    append_resumption(runs_dir, Resumption(key("baseline-linear"), ("r3",), now, "t", "tiny"))
    load(tiny)  # no setting ran: a rescan of every record, and of the logs
    rows, again = resumptions()
    assert rows == 3 and again != version
