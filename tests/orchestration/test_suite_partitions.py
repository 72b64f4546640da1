"""Every suite in the UI: partition keys, the spec scan, the sensor that keeps partitions in step.

Plain units on temporary spec folders and an ephemeral Dagster instance (no runs, no sandbox);
tests/orchestration/test_suites_in_ui.py drives the same through a real `dagster dev`.
"""

from __future__ import annotations

import datetime
import shutil
from pathlib import Path

import dagster as dg
import pytest
import yaml

from orchestration.partitions import (
    SuiteKeys,
    SuitePartitions,
    agent_budget_key,
    parse_agent_budget_key,
    setting_of,
    settings_partition_key,
)
from orchestration.resources import BenchConfig
from orchestration.sensors import SENSOR_NAME, SpecProblems, build_suite_sensor, sync_suite
from orchestration.suites import SuiteFile, scan_specs, suite_files
from runner.config import REPO_ROOT, Paths
from runner.specs.registry import load_suite

BANK = "bank-customer-churn-ict-u-ai"
S6E1 = "playground-series-s6e1"


def test_a_setting_is_a_cell_of_the_task_by_agent_budget_grid():
    key = settings_partition_key("baseline-gbm", BANK, 240)
    assert key == f"baseline-gbm@240s|{BANK}"  # Dagster orders dimensions by name
    assert key.keys_by_dimension == {"agent_budget": "baseline-gbm@240s", "task": BANK}
    assert setting_of(key) == setting_of(str(key)) == f"baseline-gbm|{BANK}|240"
    assert parse_agent_budget_key(agent_budget_key("a@b", 60)) == ("a@b", 60)
    with pytest.raises(ValueError, match="not of the form"):
        parse_agent_budget_key("baseline-gbm240")
    keys = SuiteKeys.of(load_suite(REPO_ROOT / "suites", "demo"))
    assert len(keys.tasks) == 4 and keys.agent_budgets[:2] == (
        "baseline-constant@240s",
        "baseline-constant@600s",
    )
    assert keys.problems() == []
    bad = SuiteKeys(tasks=("a,b",), agent_budgets=(agent_budget_key("x|y", 60),))
    assert bad.problems() == [
        "agents: 'x|y' contains '|', which Dagster reserves in partition keys; rename it",
        "tasks: 'a,b' contains ',', which Dagster reserves in partition keys; rename it",
    ]


def test_requests_add_new_keys_in_order_and_delete_dropped_ones():
    partitions = SuitePartitions("s")
    now = SuiteKeys(tasks=("t1",), agent_budgets=("a@60s", "b@60s"))
    wanted = SuiteKeys(tasks=("t1", "t2"), agent_budgets=("b@60s", "c@60s", "d@60s"))
    requests = partitions.requests(now, wanted)
    assert [(type(r).__name__, r.partitions_def_name, r.partition_keys) for r in requests] == [
        ("AddDynamicPartitionsRequest", "s__tasks", ["t2"]),
        ("AddDynamicPartitionsRequest", "s__agent_budgets", ["c@60s", "d@60s"]),
        ("DeleteDynamicPartitionsRequest", "s__agent_budgets", ["a@60s"]),
    ]
    assert partitions.requests(wanted, wanted) == []


def test_a_range_from_first_to_last_key_covers_the_whole_grid():
    suite = SuiteFile("s")
    instance = dg.DagsterInstance.ephemeral()
    keys = sync_suite(
        instance, suite, SuiteKeys(tasks=(BANK, S6E1), agent_budgets=("a@30s", "b@30s", "c@60s"))
    )
    first, last = suite.partitions.settings_range(keys)
    settings = suite.partitions.settings
    covered = settings.get_partition_keys_in_range(
        dg.PartitionKeyRange(first, last), dynamic_partitions_store=instance
    )
    assert len(covered) == 6 and set(covered) == set(
        settings.get_partition_keys(dynamic_partitions_store=instance)
    )
    assert suite.partitions.settings_range(SuiteKeys((), ())) is None


# ---------------------------------------------------------------- spec folders


@pytest.fixture
def specs(tmp_path: Path) -> Paths:
    """Copies of the agents and a small suite, in folders the test may edit."""
    agents = tmp_path / "agents"
    shutil.copytree(REPO_ROOT / "agents", agents, ignore=shutil.ignore_patterns("__pycache__"))
    suites = tmp_path / "suites"
    suites.mkdir()
    write_suite(suites, "mini", agents=["baseline-constant"], tasks=[BANK])
    return Paths(
        tasks_dir=REPO_ROOT / "tasks",
        agents_dir=agents,
        suites_dir=suites,
        data_dir=tmp_path / "data",
        runs_dir=tmp_path / "runs",
    )


def write_suite(suites: Path, suite_id: str, **fields) -> None:
    spec = {"id": suite_id, "title": suite_id, "budgets": [30], "attempts": 1, **fields}
    (suites / f"{suite_id}.yaml").write_text(yaml.safe_dump(spec))


def add_agent(paths: Paths, agent_id: str, **changes) -> Path:
    spec = yaml.safe_load((paths.agents_dir / "baseline-constant.yaml").read_text())
    path = paths.agents_dir / f"{agent_id}.yaml"
    path.write_text(yaml.safe_dump({**spec, "id": agent_id, **changes}))
    return path


def test_scan_names_the_file_and_the_field_of_every_problem(specs: Paths):
    assert scan_specs(specs).problems == []
    broken = add_agent(specs, "broken", kind="wizard")
    write_suite(specs.suites_dir, "uses-broken", agents=["broken", "ghost"], tasks=[BANK])
    (specs.suites_dir / "typo.yaml").write_text("id: typo\ntitle: t\ntasks: [x]\nagents: [y]\n")
    (specs.suites_dir / "bad name.yaml").write_text("id: x\n")
    scan = scan_specs(specs)
    assert set(scan.keys) == {"mini"}
    assert sorted(scan.invalid_suites) == ["typo", "uses-broken"]
    text = "\n".join(scan.problems)
    assert f"{broken}: invalid AgentSpec: kind: Input should be 'baseline'" in text
    suite_file = specs.suites_dir / "uses-broken.yaml"
    assert f"{suite_file}: agents: 'broken' has an invalid spec file ({broken})" in text
    assert f"{suite_file}: agents: 'ghost' has no spec file" in text
    assert f"{specs.suites_dir / 'typo.yaml'}: invalid SuiteSpec: budgets: Field required" in text
    assert "bad name.yaml: file name: 'bad name' cannot name Dagster assets" in text


def test_suite_files_are_known_by_name_and_never_clash(tmp_path: Path):
    for name in ("tml-v1", "tml_v1", "demo", "my suite"):
        (tmp_path / f"{name}.yaml").write_text("not: even a suite")
    files, skipped = suite_files(tmp_path)
    assert [f.stem for f in files] == ["demo", "tml-v1"]
    assert files[1].group == "suite_tml_v1"
    assert files[1].agent_runs_key == dg.AssetKey(["tml-v1", "agent_runs"])
    assert len(skipped) == 2 and "gives the same Dagster names as 'tml-v1'.yaml" in skipped[1]
    assert suite_files(tmp_path / "missing") == ([], [])


def test_definitions_load_whatever_the_suite_files_say(tmp_path: Path, specs: Paths):
    """Names only: a suite file that is not even YAML still gets its group, never a load error."""
    from orchestration.definitions import build_defs

    (specs.suites_dir / "garbage.yaml").write_text(": : [")
    files, _ = suite_files(specs.suites_dir)
    defs = build_defs(files)
    graph = defs.resolve_asset_graph()
    runs = graph.get(dg.AssetKey(["garbage", "agent_runs"]))
    assert runs.group_name == "suite_garbage" and runs.partitions_def is not None
    assert (
        dg.AssetKey(["mini", "agent_runs"]) in graph.get(dg.AssetKey(["raw", "runs"])).parent_keys
    )
    assert defs.get_schedule_def("nightly_garbage")


# ---------------------------------------------------------------- the sensor


def tick(paths: Paths, instance: dg.DagsterInstance, suites: list[str]):
    """One evaluation of the sensor; its result's partition requests applied, as the daemon does."""
    from orchestration.partitions import apply_requests

    sensor = build_suite_sensor([SuiteFile(s) for s in suites])
    assert sensor.name == SENSOR_NAME
    context = dg.build_sensor_context(
        instance=instance,
        resources={
            "bench": BenchConfig(
                agents_dir=str(paths.agents_dir),
                suites_dir=str(paths.suites_dir),
                runs_dir=str(paths.runs_dir),
            )
        },
    )
    result = sensor(context)
    apply_requests(instance, result.dynamic_partitions_requests or [])
    return result


def grid(instance: dg.DagsterInstance, suite: str) -> SuiteKeys:
    return SuitePartitions(suite).current(instance)


def test_sensor_follows_the_files_and_never_touches_runs(specs: Paths):
    instance = dg.DagsterInstance.ephemeral()
    first = tick(specs, instance, ["mini"])
    assert "mini: +1 tasks" in first.skip_reason.skip_message
    assert grid(instance, "mini") == SuiteKeys((BANK,), ("baseline-constant@30s",))
    assert "1 suite(s) unchanged" in tick(specs, instance, ["mini"]).skip_reason.skip_message

    # a new agent and its line in the suite: its settings appear, the old ones stay first
    add_agent(specs, "baseline-copy")
    write_suite(
        specs.suites_dir, "mini", agents=["baseline-constant", "baseline-copy"], tasks=[BANK]
    )
    assert (
        "+1 agent_budgets (baseline-copy@30s)"
        in tick(specs, instance, ["mini"]).skip_reason.skip_message
    )
    assert grid(instance, "mini").agent_budgets == ("baseline-constant@30s", "baseline-copy@30s")

    # an agent leaves the suite: its partitions go, its run folders stay
    run = specs.runs_dir / "baseline-constant__x__30__standard__00"
    run.mkdir(parents=True)
    (run / "record.json").write_text("{}")
    write_suite(specs.suites_dir, "mini", agents=["baseline-copy"], tasks=[BANK])
    assert (
        "-1 agent_budgets (baseline-constant@30s)"
        in tick(specs, instance, ["mini"]).skip_reason.skip_message
    )
    assert grid(instance, "mini").agent_budgets == ("baseline-copy@30s",)
    assert (run / "record.json").read_text() == "{}"

    # a suite file added after the definitions loaded: said plainly
    write_suite(specs.suites_dir, "later", agents=["baseline-copy"], tasks=[BANK])
    assert (
        "later.yaml (reload the code location"
        in tick(specs, instance, ["mini"]).skip_reason.skip_message
    )


def test_an_invalid_file_fails_the_tick_after_the_valid_suites_are_updated(specs: Paths):
    instance = dg.DagsterInstance.ephemeral()
    write_suite(specs.suites_dir, "other", agents=["baseline-constant"], tasks=[S6E1])
    tick(specs, instance, ["mini", "other"])
    before = grid(instance, "other")

    broken = add_agent(specs, "broken", limits={"cpus": 0})
    add_agent(specs, "baseline-copy")
    write_suite(
        specs.suites_dir, "mini", agents=["baseline-constant", "baseline-copy"], tasks=[BANK]
    )
    write_suite(specs.suites_dir, "other", agents=["broken"], tasks=[S6E1])
    with pytest.raises(SpecProblems) as failed:
        tick(specs, instance, ["mini", "other"])
    message = str(failed.value)
    assert "the partitions of suite(s) other are kept as they were until fixed" in message
    assert f"- {broken}: invalid AgentSpec: limits.cpus: Input should be greater than 0" in message
    assert "valid suites: mini: +1 agent_budgets (baseline-copy@30s)" in message
    assert grid(instance, "mini").agent_budgets == ("baseline-constant@30s", "baseline-copy@30s")
    assert grid(instance, "other") == before


def test_nightly_schedule_covers_every_setting_or_waits_for_the_sensor():
    from orchestration.definitions import build_defs

    suite = SuiteFile("demo")
    defs = build_defs([suite])
    schedule = defs.get_schedule_def("nightly_demo")
    with dg.instance_for_test() as instance:  # a schedule's context needs an instance on disk
        at = datetime.datetime(2026, 1, 1, 2, tzinfo=datetime.UTC)
        context = dg.build_schedule_context(instance=instance, scheduled_execution_time=at)
        assert "no partitions yet" in schedule.evaluate_tick(context).skip_message
        demo = SuiteKeys.of(load_suite(REPO_ROOT / "suites", "demo"))
        keys = sync_suite(instance, suite, demo)
        (request,) = schedule.evaluate_tick(context).run_requests
    first, last = suite.partitions.settings_range(keys)
    assert request.tags["dagster/asset_partition_range_start"] == first
    assert request.tags["dagster/asset_partition_range_end"] == last
    assert request.run_key == at.isoformat()
