"""The Dagster graph end to end on a tiny suite, plus the runner helpers it stands on.

Every test materializes real assets with ``dg.materialize`` on a temporary DuckDB file and
temporary data/runs folders: real twins, real sandboxed attempts, a real dbt build.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import duckdb
import pytest
import yaml

from runner.attempts.records import load_records
from runner.config import REPO_ROOT, Paths
from runner.errors import SpecError, TmlbenchError
from runner.specs import SuiteSpec
from runner.suites.audit import coverage_gaps, manifest_drift, private_references
from runner.suites.benchmark_settings import (
    next_attempt_indices,
    parse_setting_key,
    setting_key,
    suite_settings,
)
from runner.tasks.preparation import prepared_task
from tests.support.tiny_suites import tiny_suite_resources
from tools.records import make_record
from warehouse.snapshot import publish_snapshot

# integration: the Dagster asset graph materialized through real attempts and dbt
pytestmark = pytest.mark.integration

BANK = "bank-customer-churn-ict-u-ai"
S6E1 = "playground-series-s6e1"
RANGE_START = "dagster/asset_partition_range_start"
RANGE_END = "dagster/asset_partition_range_end"


# ---------------------------------------------------------------- runner helpers (plain units)


def suite_spec(**fields) -> SuiteSpec:
    base = {"id": "s", "title": "s", "tasks": [BANK], "agents": ["a"], "budgets": [30, 60]}
    return SuiteSpec.model_validate({**base, **fields})


def test_suite_spec_profiles_attempts_and_errors():
    suite = suite_spec(attempts=3)
    assert suite.attempt_ceiling == 6 and suite.profile_for(30) == "standard"
    paired = suite_spec(budgets=[240, 600, 1200, 90])
    assert [paired.profile_for(b) for b in (240, 600, 1200, 90)] == [
        "quick", "good", "xgboost", "standard",
    ]  # fmt: skip
    assert suite_spec(budgets=[240], instruction_profiles={}).profile_for(240) == "standard"
    assert suite_spec(attempts=2, max_attempts=3).attempt_ceiling == 3
    assert suite_spec(instruction_profiles={60: "standard"}).profile_for(60) == "standard"
    with pytest.raises(ValueError, match="unknown instruction profile 'speedy'"):
        suite_spec(instruction_profiles={30: "speedy"})
    with pytest.raises(ValueError, match=r"names budgets \[240\] that are not in budgets"):
        suite_spec(instruction_profiles={240: "standard"})
    with pytest.raises(ValueError, match=r"max_attempts \(1\) must be at least attempts \(2\)"):
        suite_spec(attempts=2, max_attempts=1)
    with pytest.raises(ValueError, match=r"budgets lists \[30\] more than once"):
        suite_spec(budgets=[30, 30])


def test_setting_keys_round_trip_and_reject_garbage():
    key = setting_key("baseline-gbm", BANK, 240)
    assert key == f"baseline-gbm|{BANK}|240"
    assert parse_setting_key(key) == ("baseline-gbm", BANK, 240)
    with pytest.raises(TmlbenchError, match="not of the form"):
        parse_setting_key("baseline-gbm|240")


def test_next_attempts_until_n_successes_or_the_ceiling():
    def rec(i: int, status: str):
        return make_record(minute=i, status=status, run_id=f"r{i}")

    assert next_attempt_indices([], wanted=2, ceiling=4) == [0, 1]
    assert next_attempt_indices([rec(0, "success")], 2, 4) == [1]
    assert next_attempt_indices([rec(0, "success"), rec(1, "success")], 2, 4) == []
    # failures use up the allowance; the ceiling stops a hopeless setting
    fails = [rec(i, "no_submission") for i in range(3)]
    assert next_attempt_indices(fails, 2, 4) == [3]
    assert next_attempt_indices([*fails, rec(3, "timeout")], 2, 4) == []
    # a harness fault is not the agent's: its index stays taken, the allowance does not shrink
    assert next_attempt_indices([rec(0, "harness_error")], 2, 4) == [1, 2]


def test_audits_find_coverage_gaps_manifest_drift_and_private_paths(tmp_path, paths):
    suite = suite_spec(agents=["baseline-constant"], budgets=[30], attempts=2)
    settings = suite_settings(suite, paths)
    ok = make_record(
        agent="baseline-constant", task=BANK, budget=30, status="success",
        run_id="ok", public_manifest_sha256="abc", stdout_path="stdout.log",
    )  # fmt: skip
    assert coverage_gaps(settings, [ok], 2) == {f"baseline-constant|{BANK}|30": 1}
    assert coverage_gaps(settings, [ok, ok], 2) == {}

    task = prepared_task(tmp_path, BANK)
    task.public.mkdir(parents=True)
    task.manifest_path.write_text("{}")
    drift = manifest_drift([ok], lambda _: task)
    assert len(drift) == 1 and "ran on manifest abc" in drift[0]

    sneaky = ok.model_copy(update={"submission_path": "../../data/tasks/x/private/answers.csv"})
    outside = ok.model_copy(update={"transcript_path": "../other-run/log"})
    problems = private_references([ok, sneaky, outside])
    assert len(problems) == 2
    assert "points into a private directory" in problems[0]
    assert "leaves the run folder" in problems[1]


def test_snapshot_is_a_complete_copy_swapped_in_atomically(tmp_path):
    source = tmp_path / "wh.duckdb"
    con = duckdb.connect(str(source))
    con.execute("create schema marts; create table marts.leaderboard as select 1 as rank")
    con.execute("create schema raw; create table raw.runs as select 1 as x")
    con.execute("create table main.int_runs_counted as select 1 as y")  # dbt's intermediates
    con.close()
    target = tmp_path / "snap.duckdb"
    target.write_text("an old snapshot")
    assert publish_snapshot(source, target) == {"marts.leaderboard": 1, "raw.runs": 1}
    snap = duckdb.connect(str(target), read_only=True)
    assert snap.execute("select rank from marts.leaderboard").fetchall() == [(1,)]
    assert snap.execute("select count(*) from information_schema.tables where table_schema = 'main'").fetchone() == (0,)  # fmt: skip
    snap.close()
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []


# ---------------------------------------------------------------- the Dagster graph


@pytest.fixture
def world(tmp_path: Path, dbt_manifest: Path):
    """A tiny suite in temporary folders, its definitions and resources."""
    import dagster as dg

    from orchestration.definitions import build_defs
    from orchestration.partitions import settings_partition_key
    from orchestration.sensors import sync_suite
    from orchestration.suites import SuiteFile, scan_specs

    agents = tmp_path / "agents"
    shutil.copytree(REPO_ROOT / "agents", agents)
    quitter = {
        "id": "quitter", "kind": "command", "title": "exits without a submission",
        "harness": "test", "command": ["{python}", "-c", "print('bye')"], "trusted": True,
    }  # fmt: skip
    (agents / "quitter.yaml").write_text(yaml.safe_dump(quitter))
    suite = {
        "id": "tiny", "title": "tiny", "tasks": [BANK, S6E1],
        "agents": ["baseline-constant", "baseline-linear", "quitter"],
        "budgets": [30], "attempts": 2, "max_attempts": 3, "twin_rows": 300,
        "data_subdir": "tiny", "runs_subdir": "tiny",
    }  # fmt: skip
    resources = tiny_suite_resources(tmp_path, suite, agents_dir=agents)
    bench = resources["bench"]
    tiny = SuiteFile("tiny")
    defs = build_defs([tiny], resources)
    instance = dg.DagsterInstance.ephemeral()  # holds the suite's dynamic partitions
    sync_suite(instance, tiny, scan_specs(bench.paths()).keys["tiny"])

    def key(name: str | None) -> str | None:  # a setting (agent|task|budget) → its partition
        if name is None or "|" not in name:
            return name
        agent, task, budget = parse_setting_key(name)
        return str(settings_partition_key(agent, task, budget))

    class World:
        runs_dir = tmp_path / "runs" / "tiny"
        data_dir = tmp_path / "data" / "tiny"
        warehouse = tmp_path / "wh.duckdb"
        snapshot = tmp_path / "wh.snapshot.duckdb"

        @staticmethod
        def materialize(
            selection, *, partition=None, first=None, last=None, res=None, run_config=None
        ):
            tags = {RANGE_START: key(first), RANGE_END: key(last)} if first else None
            if isinstance(selection, list):  # the suite's assets by name
                selection = [f"tiny/{name}" for name in selection]
            return dg.materialize(
                [*defs.assets, *defs.asset_checks],
                selection=selection,
                resources=res or resources,
                partition_key=key(partition),
                tags=tags,
                instance=instance,
                raise_on_error=False,
                run_config=run_config,
            )

    World.resources = resources
    World.instance = instance
    return World


def checks_of(result) -> dict[str, bool]:
    return {e.check_name: e.passed for e in result.get_asset_check_evaluations()}


def materializations(result, key: str) -> list:
    key = {"agent_runs": "tiny/agent_runs", "prepared_tasks": "tiny/prepared_tasks"}.get(key, key)
    return [
        e.materialization
        for e in result.get_asset_materialization_events()
        if e.materialization.asset_key.to_user_string() == key
    ]


@pytest.mark.sandbox
def test_whole_graph_materializes_resumes_and_reports(world):
    bank_constant = f"baseline-constant|{BANK}|30"
    prepared = world.materialize(["prepared_tasks"], first=BANK, last=S6E1)
    assert prepared.success
    assert checks_of(prepared) == {"manifests_unchanged_under_runs": True}
    # two tasks in one run: each task's partition shows its own task
    tasks = {m.partition: m.metadata for m in materializations(prepared, "prepared_tasks")}
    assert sorted(tasks) == [BANK, S6E1]
    for task_id, meta in tasks.items():
        sha = prepared_task(world.data_dir, task_id).manifest_sha256()
        assert meta["manifest_sha256"].value == sha

    # one run, many settings: the baselines' settings of both tasks (quitter's come later)
    runs = world.materialize(["agent_runs"], first=bank_constant, last=f"baseline-linear|{S6E1}|30")
    assert runs.success, runs.get_step_failure_events()
    records = load_records(world.runs_dir)
    assert len(records) == 2 * 2 * 2 and {r.status for r in records} == {"success"}
    assert_each_partition_shows_its_own_setting(world, runs, records, attempts=2, new=2)
    checks = checks_of(runs)
    assert checks["no_private_paths_in_records"] is True
    assert checks["suite_coverage_complete"] is False  # quitter's settings are not run yet

    # one setting again: nothing to do, nothing duplicated, metadata for a person
    again = world.materialize(["agent_runs"], partition=bank_constant)
    assert again.success
    (materialized,) = materializations(again, "agent_runs")
    meta = materialized.metadata
    assert meta["new_attempts"].value == 0 and meta["attempts"].value == 2
    assert meta["scores"].value == pytest.approx([0.5, 0.5])  # facts only: medians are dbt's
    assert "| 0 | `baseline-constant__" in meta["attempts_table"].value
    assert sorted((r.run_id, r.created_at) for r in load_records(world.runs_dir)) == sorted(
        (r.run_id, r.created_at) for r in records
    )

    # raw load → every dbt model and test → snapshot
    import dagster as dg

    benchmark = dg.AssetSelection.assets(["tiny", "prepared_tasks"], ["tiny", "agent_runs"])
    downstream = world.materialize(dg.AssetSelection.all() - benchmark)
    assert downstream.success, downstream.get_step_failure_events()
    assert checks_of(downstream)["one_status_per_attempt"] is True
    dbt_checks = [e for e in downstream.get_asset_check_evaluations() if e.check_name != "one_status_per_attempt"]  # fmt: skip
    assert len(dbt_checks) > 50 and all(e.passed for e in dbt_checks)
    con = duckdb.connect(str(world.snapshot), read_only=True)
    tables = {t for (t,) in con.execute("select table_name from information_schema.tables where table_schema = 'marts'").fetchall()}  # fmt: skip
    assert {"leaderboard", "setting_scores", "coverage"} <= tables
    assert con.execute("select count(*) from marts.setting_scores").fetchone() == (4,)
    con.close()
    # every record carried its task's trivial score, and the constant baseline, which submits
    # the trivial prediction, scores it exactly: it sits at the anchor of the primary points
    con = duckdb.connect(str(world.warehouse), read_only=True)
    anchors = con.execute(
        "select anchors.task_id, anchors.n_trivial_scores, anchors.n_counted_with_trivial_score,"
        " round(scores.median_score_hib - anchors.trivial_score_hib, 12)"
        " from int_cell_trivial_scores as anchors inner join marts.setting_scores as scores"
        " using (suite_id, task_id, budget_seconds)"
        " where scores.agent_id = 'baseline-constant' order by 1"
    ).fetchall()
    con.close()
    assert anchors == [(BANK, 1, 4, 0.0), (S6E1, 1, 4, 0.0)]
    raw = materializations(downstream, "raw/runs")[0].metadata
    assert raw["new"].value == 8 and raw["dagster/row_count"].value == 8


def assert_each_partition_shows_its_own_setting(world, result, records, attempts, new) -> None:
    """One materialization per setting of the run, each with that setting's facts (never the
    run's totals), and it is the partition's latest; the run is tagged with its suite."""
    import dagster as dg

    from orchestration.partitions import setting_of

    events = materializations(result, "agent_runs")
    by_partition = {m.partition: m.metadata for m in events}
    settings = {(r.agent_id, r.task_id, r.budget_seconds) for r in records}
    assert len(events) == len(by_partition) == len(settings)  # none twice, none missing
    for partition, meta in by_partition.items():
        agent, task, budget = parse_setting_key(setting_of(partition))
        own = [r for r in records if (r.agent_id, r.task_id, r.budget_seconds) == (agent, task, budget)]  # fmt: skip
        others = [r for r in records if r not in own]
        assert meta["attempts"].value == len(own) == attempts, partition
        assert meta["new_attempts"].value == new
        assert meta["successes"].value == sum(r.status == "success" for r in own)
        assert meta["statuses"].value == {"success": attempts}
        assert sorted(meta["scores"].value) == pytest.approx(sorted(r.score for r in own))
        table = meta["attempts_table"].value
        assert all(r.run_id in table for r in own) and not any(r.run_id in table for r in others)
        assert Path(meta["last_run"].value).name in {r.run_id for r in own}
        latest = world.instance.fetch_materializations(
            dg.AssetRecordsFilter(asset_key=dg.AssetKey(["tiny", "agent_runs"]), asset_partitions=[partition]),
            limit=1,
        ).records[0]  # fmt: skip
        assert latest.run_id == result.run_id
        assert latest.asset_materialization.metadata == meta
    run = world.instance.get_run_by_id(result.run_id)
    assert run.tags["tmlbench/suite"] == "tiny"  # launched as the UI does: no job of ours


@pytest.mark.sandbox
def test_agent_failures_pass_harness_faults_fail_after_the_rest_is_recorded(world):
    quitter_bank, quitter_s6 = f"quitter|{BANK}|30", f"quitter|{S6E1}|30"
    assert world.materialize(["prepared_tasks"], partition=BANK).success  # S6E1 stays unprepared

    # the agent's fault: three attempts (the ceiling), all no_submission, and the asset succeeds
    failed = world.materialize(["agent_runs"], partition=quitter_bank)
    assert failed.success
    records = load_records(world.runs_dir)
    assert [r.status for r in records] == ["no_submission"] * 3
    assert checks_of(failed)["suite_coverage_complete"] is False

    # a public manifest edited under recorded runs is caught when the task is materialized
    manifest = world.data_dir / "tasks" / BANK / "public" / "manifest.json"
    manifest.write_text(manifest.read_text() + " ")
    drift = world.materialize(["prepared_tasks"], partition=BANK)
    assert drift.success and checks_of(drift) == {"manifests_unchanged_under_runs": False}
    manifest.write_text(manifest.read_text()[:-1])

    # a fault every attempt would hit alike (S6E1 is not prepared) refuses the run before any
    # attempt: no record for any selected setting, one line naming the partition to materialize
    both = world.materialize(["agent_runs"], first=f"baseline-constant|{BANK}|30", last=quitter_s6)
    assert not both.success
    failure = both.get_step_failure_events()[0].step_failure_data
    message = failure.error.message  # what the run's page shows above the stack
    assert failure.error.cause is None  # the message once, not again under a traceback
    assert f"task {S6E1} is not prepared" in message and "(3 settings)" in message
    assert f"materialize tiny/prepared_tasks partition {S6E1} first (or select both assets)" in (
        message
    )
    assert "tmlbench" not in message and message.count("is not prepared") == 1
    refused = failure.user_failure_data.metadata["refused_settings"].value
    assert sorted(refused) == sorted(
        f"{agent}@30s|{S6E1}" for agent in ("baseline-constant", "baseline-linear", "quitter")
    )
    assert [r.status for r in load_records(world.runs_dir)] == ["no_submission"] * 3

    # what the message says to do, and the same selection runs
    assert world.materialize(["prepared_tasks"], partition=S6E1).success
    both = world.materialize(["agent_runs"], first=f"baseline-constant|{BANK}|30", last=quitter_s6)
    statuses = {(r.agent_id, r.task_id, r.status) for r in load_records(world.runs_dir)}
    assert ("baseline-linear", S6E1, "success") in statuses
    assert "harness_error" not in {status for *_, status in statuses}


@pytest.mark.sandbox
def test_a_setting_stopped_at_its_ceiling_resumes_by_a_launch_config(world):
    from runner.attempts.attempt import make_run_id
    from runner.attempts.records import write_record

    setting = f"baseline-constant|{BANK}|30"
    assert world.materialize(["prepared_tasks"], partition=BANK).success
    for index in range(3):  # the suite's harness_error_ceiling (default 3), recorded earlier
        run_id = make_run_id("baseline-constant", BANK, 30, "standard", index)
        fault = make_record(
            "baseline-constant", BANK, 30, minute=index, status="harness_error", run_id=run_id,
            suite_id="tiny", error_message="HarnessError: disk full",
        )  # fmt: skip
        (world.runs_dir / run_id).mkdir(parents=True)
        write_record(world.runs_dir / run_id, fault)
    kept = {p: p.read_bytes() for p in world.runs_dir.glob("*/record.json")}

    stopped = world.materialize(["agent_runs"], partition=setting)
    assert not stopped.success
    message = str(stopped.get_step_failure_events()[0].step_failure_data.error)
    assert "stopped at the harness-error ceiling" in message
    assert (
        f"materialize tiny/agent_runs partition baseline-constant@30s|{BANK} with the launch "
        "config `resume_stopped: true`" in message
    )
    assert "suite's file" not in message and len(load_records(world.runs_dir)) == 3

    config = {"ops": {"tiny__agent_runs": {"config": {"resume_stopped": True}}}}
    resumed = world.materialize(["agent_runs"], partition=setting, run_config=config)
    assert resumed.success, resumed.get_step_failure_events()
    records = load_records(world.runs_dir)
    assert sorted(r.status for r in records) == ["harness_error"] * 3 + ["success"] * 2
    assert {p: p.read_bytes() for p in kept} == kept, "records are never rewritten"
    assert len((world.runs_dir / "resumptions.jsonl").read_text().splitlines()) == 1


@pytest.mark.sandbox
def test_a_sandbox_that_raises_is_a_harness_error(world):
    from orchestration.resources import SandboxBackend

    class BrokenSandbox:
        name, isolated = "broken", True

        def problem(self, runs_dir):  # the preflight finds nothing: it fails only when used
            return None

        def paths(self, workspace, agent_dir):
            raise RuntimeError("sandbox exploded")

    class BrokenBackend(SandboxBackend):
        def sandbox(self):
            return BrokenSandbox()

    assert world.materialize(["prepared_tasks"], partition=BANK).success
    res = {**world.resources, "sandbox": BrokenBackend()}
    result = world.materialize(["agent_runs"], partition=f"baseline-constant|{BANK}|30", res=res)
    assert not result.success
    assert "sandbox exploded" in str(result.get_step_failure_events()[0].step_failure_data.error)
    # the round's two attempts are recorded as the harness's fault, and no retry follows
    assert [r.status for r in load_records(world.runs_dir)] == ["harness_error"] * 2


def test_definitions_load_with_the_demo_suite(dbt_manifest):
    import dagster as dg

    from orchestration.definitions import defs
    from orchestration.schedules import AUTOMATION_SENSOR_NAME
    from orchestration.sensors import SENSOR_NAME, sync_suite
    from orchestration.suites import SuiteFile, scan_specs

    graph = defs.resolve_asset_graph()
    keys = {k.to_user_string() for k in graph.get_all_asset_keys()}
    assert {
        "demo/prepared_tasks",
        "demo/agent_runs",
        "tml-v1/agent_runs",
        "raw/runs",
        "marts/leaderboard",
        "marts_snapshot",
    } <= keys
    runs = defs.resolve_assets_def(["demo", "agent_runs"])
    instance = dg.DagsterInstance.ephemeral()  # the sensor keeps the partitions in an instance
    sync_suite(instance, SuiteFile("demo"), scan_specs(Paths.from_env()).keys["demo"])
    settings = runs.partitions_def.get_partition_keys(dynamic_partitions_store=instance)
    assert len(settings) == 4 * 3 * 3
    models = defs.resolve_assets_def(dg.AssetKey(["marts", "leaderboard"]))
    assert models.group_names_by_key[dg.AssetKey(["marts", "leaderboard"])] == "marts"
    assert models.group_names_by_key[dg.AssetKey(["stg_raw__runs"])] == "staging"
    assert models.op.pool == "duckdb"
    assert defs.get_schedule_def("nightly_demo").cron_schedule == "0 2 * * *"
    assert defs.get_sensor_def(AUTOMATION_SENSOR_NAME)
    assert defs.get_sensor_def(SENSOR_NAME)
    leaderboard = graph.get(dg.AssetKey(["marts", "leaderboard"]))
    assert leaderboard.automation_condition is not None  # rebuilt when new runs are loaded


def test_paths_resource_falls_back_to_the_runner_defaults(monkeypatch, tmp_path):
    from orchestration.resources import BenchConfig

    monkeypatch.setenv("TMLBENCH_RUNS_DIR", str(tmp_path / "r"))
    paths = BenchConfig(data_dir=str(tmp_path / "d")).paths()
    assert paths.runs_dir == tmp_path / "r" and paths.data_dir == tmp_path / "d"
    assert paths.tasks_dir == Paths.from_env().tasks_dir
    with pytest.raises(SpecError, match="unknown suite"):
        BenchConfig().suite("nope")
