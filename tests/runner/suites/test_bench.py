"""Running a suite: ``Bench`` and the ``tmlbench bench`` command (parallel, resumable, the
harness-error ceiling), on small suites of real attempts."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml

from runner.attempts.attempt import AttemptPlan
from runner.attempts.records import RunRecord, load_records, write_record
from runner.attempts.run_folder import HARNESS_DIED
from runner.errors import SpecError, TmlbenchError
from runner.sandbox import get_sandbox
from runner.specs import SuiteSpec
from runner.specs.registry import load_suite
from runner.suites.bench import Bench, harness_failure_report
from runner.suites.benchmark_settings import next_attempt_indices, suite_settings
from runner.suites.preflight import RunRefused
from runner.suites.resumptions import RESUMPTIONS_FILE
from runner.suites.scheduling import AttemptDone, CpuPool, run_settings
from runner.tasks.preparation import prepared_task
from runner.tasks.private_meta import TwinSource
from tests.support.tmlbench_cli import tmlbench
from tools.records import make_record

pytestmark = pytest.mark.sandbox
BANK = "bank-customer-churn-ict-u-ai"
S6E1 = "playground-series-s6e1"


@pytest.fixture
def cli_env(tmp_path: Path) -> dict[str, str]:
    suites = tmp_path / "suites"
    suites.mkdir()
    suite = {
        "id": "mini",
        "title": "mini suite",
        "tasks": ["bank-customer-churn-ict-u-ai", "playground-series-s6e1"],
        "agents": ["baseline-constant", "baseline-linear"],
        "budgets": [30, 60],
        "attempts": 2,
        "twin_rows": 400,
        "data_subdir": "mini",
        "runs_subdir": "mini",
    }
    (suites / "mini.yaml").write_text(yaml.safe_dump(suite))
    return {
        **os.environ,
        "TMLBENCH_SUITES_DIR": str(suites),
        "TMLBENCH_DATA_DIR": str(tmp_path / "data"),
        "TMLBENCH_RUNS_DIR": str(tmp_path / "runs"),
        "COLUMNS": "200",
    }


def test_bench_runs_a_suite_resumes_and_says_what_happened(cli_env, tmp_path):
    first = tmlbench(cli_env, "bench", "--suite", "mini")
    assert first.returncode == 0, first.stdout + first.stderr
    records = load_records(tmp_path / "runs" / "mini")
    assert len(records) == 2 * 2 * 2 * 2
    assert {r.status for r in records} == {"success"}
    assert {r.cpuset for r in records} <= {str(c) for c in os.sched_getaffinity(0)}
    out = " ".join(first.stdout.split())
    assert "mini: 16 attempts recorded in 8 settings (16 new in this run): 16 success" in out
    assert f"records: {tmp_path / 'runs' / 'mini'}" in out
    assert "tmlbench warehouse build, then tmlbench leaderboard --suite mini" in out
    assert "median" not in out  # what the scores mean is the warehouse's to say

    second = tmlbench(cli_env, "bench", "--suite", "mini")
    assert second.returncode == 0, second.stderr
    assert "(0 new in this run)" in second.stdout
    again = load_records(tmp_path / "runs" / "mini")
    assert sorted(r.run_id for r in again) == sorted(r.run_id for r in records)
    assert [r.created_at for r in sorted(again, key=lambda r: r.run_id)] == [
        r.created_at for r in sorted(records, key=lambda r: r.run_id)
    ]


def test_unknown_suite_and_task_errors_say_what_exists(cli_env):
    result = tmlbench(cli_env, "bench", "--suite", "nope")
    assert (
        result.returncode == 2
        and "unknown suite 'nope'" in result.stdout
        and "mini" in result.stdout
    )
    result = tmlbench(cli_env, "tasks", "prepare", "no-such-task")
    assert result.returncode == 2 and "bank-customer-churn-ict-u-ai" in result.stdout


def test_the_named_fix_prepares_a_suite_s_task_where_and_as_its_runs_read_it(cli_env, tmp_path):
    """`tmlbench tasks prepare --suite`, what a refusal of an unprepared task names."""
    result = tmlbench(cli_env, "tasks", "prepare", "--suite", "mini", BANK)
    assert result.returncode == 0, result.stdout + result.stderr
    data = prepared_task(tmp_path / "data" / "mini", BANK)
    assert data.exists() and isinstance(source := data.meta().source, TwinSource)
    assert source.rows == 400  # the suite's scale
    assert not prepared_task(tmp_path / "data" / "mini", S6E1).exists()  # only the one named
    every = tmlbench(cli_env, "tasks", "prepare", "--suite", "mini")  # no task: all of them
    assert every.returncode == 0 and prepared_task(tmp_path / "data" / "mini", S6E1).exists()


def test_bench_prepares_and_runs_the_settings_it_is_given(paths):
    suite = SuiteSpec(
        id="one", title="t", tasks=[BANK], agents=["baseline-constant"], budgets=[30, 60],
        attempts=2, twin_rows=300,
    )  # fmt: skip
    bench = Bench(suite, paths, get_sandbox("process"))
    short = bench.settings[0].key  # 30 s; the 60 s setting runs later
    with pytest.raises(TmlbenchError, match=r"tasks \['nope'\] are not in suite one"):
        bench.prepare(["nope"])
    prepared = bench.prepare()
    assert list(prepared) == [BANK] and prepared[BANK].exists()
    with pytest.raises(TmlbenchError, match=r"settings \['a\|b\|1'\] are not in suite one"):
        bench.run(["a|b|1"])
    with pytest.raises(TmlbenchError, match="needs a sandbox"):
        Bench(suite, paths).run()

    events: list[AttemptDone] = []
    run = bench.run([short], on_progress=events.append)
    assert [o.setting.key for o in run.outcomes] == [short]
    assert run.new_attempts == 2 and run.status_counts() == {"success": 2}
    assert run.harness_faults == [] and run.incomplete == []
    assert [(e.new, e.settings_done, e.settings_total) for e in events] == [
        (True, 0, 1),
        (True, 1, 1),
    ]
    assert run.runs_dir == bench.layout.runs_dir

    both = bench.run(on_progress=events.append)  # the recorded setting counts; the other runs
    assert both.new_attempts == 2 and len(both.records) == 4
    assert [e.new for e in events[2:4]] == [False, False]
    assert events[-1].settings_done == events[-1].settings_total == 2


def test_bench_refuses_tampered_data_before_any_attempt(paths):
    suite = SuiteSpec(
        id="one", title="t", tasks=[BANK], agents=["baseline-constant"], budgets=[30], twin_rows=300
    )
    bench = Bench(suite, paths, get_sandbox("process"))
    train = bench.prepare()[BANK].public / "train.csv"
    train.write_bytes(train.read_bytes()[:-10])
    with pytest.raises(RunRefused, match=f"task {BANK}'s prepared data does not match"):
        bench.run()
    assert not bench.layout.runs_dir.exists() or not any(bench.layout.runs_dir.iterdir())


def test_cpu_pool_hands_out_disjoint_cpus():
    pool = CpuPool([0, 1, 2])
    with pool.take(2) as first, pool.take(1) as second:
        assert set(first.split(",")).isdisjoint(second.split(","))


def test_prepare_by_scale_and_list_show_the_prepared_twin(cli_env, tmp_path):
    result = tmlbench(cli_env, "tasks", "prepare", "playground-series-s6e1", "--scale", "0.001")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "504 train / 126 test" in result.stdout  # 0.1 % of 630,000 rows, split 80/20
    listing = tmlbench(cli_env, "tasks", "list")
    assert "504 train / 126 test, bayes" in listing.stdout
    both = tmlbench(
        cli_env, "tasks", "prepare", "playground-series-s6e1", "--scale", "0.1", "--rows", "99"
    )
    assert both.returncode == 2 and "not both" in both.stdout


# ---------------------------------------------------------------- the harness-error ceiling


def test_harness_error_ceiling_is_a_validated_suite_setting(tmp_path: Path):
    base = {"id": "s", "title": "s", "tasks": [BANK], "agents": ["a"], "budgets": [30]}
    assert SuiteSpec.model_validate(base).harness_error_ceiling == 3
    assert SuiteSpec.model_validate({**base, "harness_error_ceiling": 1}).harness_error_ceiling == 1
    for bad in (0, -2, True, 2.5, "3", None):
        (tmp_path / "s.yaml").write_text(yaml.safe_dump({**base, "harness_error_ceiling": bad}))
        with pytest.raises(SpecError) as caught:
            load_suite(tmp_path, "s")
        message = str(caught.value)
        assert str(tmp_path / "s.yaml") in message and "harness_error_ceiling" in message
        assert "whole number of at least 1" in message and f"got {bad!r}" in message


def test_next_attempts_stop_at_the_harness_error_ceiling():
    def rec(i: int, status: str, message: str | None = None) -> RunRecord:
        return make_record(minute=i, status=status, run_id=f"r{i}", error_message=message)

    faults = [rec(0, "harness_error"), rec(1, "harness_error")]
    assert next_attempt_indices(faults, 2, 4) == [2, 3]  # no ceiling: re-rolled for ever
    # room for one more harness error: never more attempts in flight than that
    assert next_attempt_indices(faults, 2, 4, harness_error_ceiling=3) == [2]
    assert next_attempt_indices(faults, 2, 4, harness_error_ceiling=4) == [2, 3]
    assert next_attempt_indices(faults, 2, 4, harness_error_ceiling=4, running=[2]) == [3]
    assert next_attempt_indices(faults, 2, 4, harness_error_ceiling=3, running=[2]) == []
    assert next_attempt_indices(faults, 2, 4, harness_error_ceiling=2) == []
    died = rec(2, "harness_error", f"{HARNESS_DIED}: the harness was killed")
    assert next_attempt_indices([*faults, died], 2, 4, harness_error_ceiling=3) == []


def test_provider_errors_are_re_run_under_their_own_ceiling():
    def rec(i: int, status: str) -> RunRecord:
        return make_record(minute=i, status=status, run_id=f"r{i}")

    faults = [rec(0, "provider_error"), rec(1, "runtime_error")]
    # a provider error does not use up the agent's allowance (2 attempts): one agent failure so far
    assert next_attempt_indices(faults, 2, 2) == [2]
    assert next_attempt_indices(faults, 2, 3, provider_error_ceiling=2) == [2]
    assert next_attempt_indices(faults, 2, 3, provider_error_ceiling=3) == [2, 3]
    assert next_attempt_indices(faults, 2, 3, provider_error_ceiling=1) == []
    both = [rec(0, "provider_error"), rec(1, "harness_error")]
    assert next_attempt_indices(both, 2, 4, harness_error_ceiling=3, provider_error_ceiling=2) == [
        2
    ]


def _harness_error_start(runs_dir: Path, started: list[str], message: str):
    """``start(plan)`` for run_settings whose every attempt ends in a harness fault, recorded the
    way run_attempt records one (an immutable record.json in the run folder)."""

    def start(plan: AttemptPlan) -> RunRecord:
        started.append(plan.run_id)
        record = make_record(
            plan.agent.id,
            plan.task.id,
            plan.budget_seconds,
            minute=plan.attempt_index,
            status="harness_error",
            run_id=plan.run_id,
            instruction_profile=plan.instruction_profile,
            suite_id=plan.suite_id,
            error_message=message,
        )
        run_dir = runs_dir / plan.run_id
        run_dir.mkdir(parents=True)
        write_record(run_dir, record)
        return record

    return start


def test_a_setting_stops_at_the_harness_error_ceiling_across_runs(tmp_path: Path, paths):
    suite = SuiteSpec(
        id="hec", title="t", tasks=[BANK], agents=["baseline-constant"], budgets=[30],
        attempts=2, harness_error_ceiling=3,
    )  # fmt: skip
    settings = suite_settings(suite, paths)
    runs_dir = tmp_path / "runs"
    started: list[str] = []
    start = _harness_error_start(runs_dir, started, "HarnessError: answers for task missing")

    (first,) = run_settings(settings, suite, runs_dir, start, workers=1)
    # a harness fault stops the setting for this call: the second attempt is not started
    assert len(started) == 1 and first.n_harness_errors == 1
    assert first.ceiling_note is None and len(first.harness_errors) == 1

    (second,) = run_settings(settings, suite, runs_dir, start, workers=1)
    assert len(started) == 2 and second.ceiling_note is None

    (third,) = run_settings(settings, suite, runs_dir, start, workers=1)
    assert len(started) == 3 and third.n_harness_errors == 3  # exactly the ceiling
    assert third.stopped_at_harness_error_ceiling and third.harness_errors[0] == third.ceiling_note

    (fourth,) = run_settings(settings, suite, runs_dir, start, workers=1)
    assert len(started) == 3, "no attempt once the ceiling is reached"
    assert fourth.harness_errors == [fourth.ceiling_note]
    note = fourth.ceiling_note
    assert (
        f"baseline-constant|{BANK}|30 (profile standard) stopped at the harness-error ceiling"
        in note
    )
    assert "3 harness_error attempts (suite hec, harness_error_ceiling: 3)" in note
    assert "still lacks 2 success(es)" in note
    assert f"{runs_dir}/<run_id>/record.json" in note and "harness_error.txt" in note
    assert started[-1] in note and "HarnessError: answers for task missing" in note
    report = harness_failure_report([fourth])
    assert report.startswith("1 setting(s) stopped at a fault ceiling:\n  ")
    assert "could not be run" not in report

    # a higher ceiling resumes the setting
    raised = suite.model_copy(update={"harness_error_ceiling": 5})
    (fifth,) = run_settings(settings, raised, runs_dir, start, workers=1)
    assert len(started) == 4 and fifth.n_harness_errors == 4 and fifth.ceiling_note is None


def test_resuming_a_stopped_setting_gives_it_a_full_ceiling_and_keeps_its_records(paths):
    suite = SuiteSpec(
        id="res", title="t", tasks=[BANK], agents=["baseline-constant"], budgets=[30, 60],
        attempts=2, harness_error_ceiling=2, runs_subdir="res",
    )  # fmt: skip
    bench = Bench(suite, paths)
    stopped_setting, other = bench.settings
    runs_dir = bench.layout.runs_dir
    started: list[str] = []
    start = _harness_error_start(runs_dir, started, "HarnessError: disk full")
    for _ in range(2):
        run_settings([stopped_setting], suite, runs_dir, start, workers=1)
    (stopped,) = run_settings([stopped_setting], suite, runs_dir, start, workers=1)
    assert len(started) == 2 and stopped.stopped_at_harness_error_ceiling
    kept = {p: p.read_bytes() for p in runs_dir.glob("*/record.json")}

    resumed = bench.resume(None, by="test")  # every setting: only the stopped one is resumed
    assert [(r.setting, r.forgiven, r.by) for r in resumed] == [
        (stopped_setting.key, tuple(started), "test")
    ]
    assert bench.resume(None, by="test") == [], "a resumed setting is not stopped"
    (line,) = (runs_dir / RESUMPTIONS_FILE).read_text().splitlines()
    assert yaml.safe_load(line)["forgiven"] == started

    (first,) = run_settings([stopped_setting], suite, runs_dir, start, workers=1)
    assert len(started) == 3 and not first.stopped_at  # resumed: one new fault, one of two
    (second,) = run_settings([stopped_setting], suite, runs_dir, start, workers=1)
    assert len(started) == 4 and second.stopped_at_harness_error_ceiling  # a full ceiling again
    assert "2 harness_error attempts" in (second.ceiling_note or "")  # the forgiven ones apart
    assert {p: p.read_bytes() for p in kept} == kept and second.n_harness_errors == 4
    assert run_settings([other], suite, runs_dir, start, workers=1)[0].n_harness_errors == 1


def test_the_ceiling_counts_dead_harnesses_and_spares_finished_settings(tmp_path: Path, paths):
    suite = SuiteSpec(
        id="hec", title="t", tasks=[BANK], agents=["baseline-constant"], budgets=[30, 60],
        attempts=1, harness_error_ceiling=2,
    )  # fmt: skip
    short, long = suite_settings(suite, paths)
    runs_dir = tmp_path / "runs"
    started: list[str] = []
    died = _harness_error_start(runs_dir, started, f"{HARNESS_DIED}: the harness was killed")
    for index in range(2):  # two attempts whose harness was killed (e.g. by an agent's doing)
        died(short.plan(index))
        died(long.plan(index))
    done = make_record(
        "baseline-constant", BANK, 60, minute=2, run_id=long.plan(2).run_id, suite_id="hec"
    )
    (runs_dir / done.run_id).mkdir()
    write_record(runs_dir / done.run_id, done)
    started.clear()

    outcomes = run_settings([short, long], suite, runs_dir, died, workers=1)
    assert started == []
    stopped, finished = outcomes
    assert stopped.stopped_at_harness_error_ceiling and "2 harness_error attempts" in (
        stopped.ceiling_note or ""
    )
    # the 60 s setting has its success: at the ceiling, but not stopped by it
    assert finished.n_harness_errors == 2 and finished.complete
    assert not finished.stopped_at_harness_error_ceiling and finished.harness_errors == []


def test_bench_says_which_setting_stopped_at_the_harness_error_ceiling(cli_env, tmp_path):
    """Real attempts whose grading fails in the harness (broken private answers): each run of
    the suite re-runs the setting until the ceiling, then no more, and the CLI says why."""
    suite = {
        "id": "broken",
        "title": "broken answers",
        "tasks": [BANK],
        "agents": ["baseline-constant"],
        "budgets": [30],
        "attempts": 1,
        "harness_error_ceiling": 2,
        "twin_rows": 400,
    }
    suites = Path(cli_env["TMLBENCH_SUITES_DIR"])
    (suites / "broken.yaml").write_text(yaml.safe_dump(suite))
    prepared = tmlbench(cli_env, "tasks", "prepare", BANK, "--rows", "400")
    assert prepared.returncode == 0, prepared.stdout + prepared.stderr
    answers = prepared_task(tmp_path / "data", BANK).answers_path
    answers.write_text("id,label\n1,2\n")  # the harness's own file, broken: a harness fault

    def bench() -> tuple[str, list[RunRecord]]:
        result = tmlbench(cli_env, "bench", "--suite", "broken")
        assert result.returncode == 2, result.stdout + result.stderr
        return " ".join(result.stdout.split()), load_records(tmp_path / "runs")

    out, records = bench()
    assert [r.status for r in records] == ["harness_error"]
    assert "1 attempt(s) could not be run" in out and "stopped at the harness-error" not in out

    out, records = bench()  # the second harness error reaches the ceiling
    assert [r.status for r in records] == ["harness_error"] * 2
    assert "1 setting(s) stopped at a fault ceiling" in out
    assert "1 attempt(s) could not be run" in out

    out, again = bench()  # nothing is run any more; the output still says why
    assert sorted(r.run_id for r in again) == sorted(r.run_id for r in records)
    assert "could not be run" not in out
    key = f"baseline-constant|{BANK}|30"
    assert f"{key} (profile standard) stopped at the harness-error ceiling" in out
    assert "2 harness_error attempts (suite broken, harness_error_ceiling: 2)" in out
    assert (
        "harness_error.txt" in out and f"resume it: `tmlbench resume --suite broken '{key}'`" in out
    )
    assert "suite's file" not in out  # recovering is an action, never an edit of the suite file
    assert all(r.run_id in out for r in records) and "cannot be read as a CSV" in out

    # resuming is the action: the recorded faults stop counting, the records stay byte for byte
    kept = {p: p.read_bytes() for p in (tmp_path / "runs").glob("*/record.json")}
    resumed = tmlbench(cli_env, "resume", "--suite", "broken")
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert f"resumed {key}: 2 fault(s) no longer count" in " ".join(resumed.stdout.split())
    out, after = bench()  # the same fault again: one more attempt, then this run stops it
    assert len(after) == 3 and "1 attempt(s) could not be run" in out
    assert {p: p.read_bytes() for p in kept} == kept
    again = tmlbench(cli_env, "resume", "--suite", "broken")  # not stopped: nothing to resume
    assert "no selected setting is stopped" in again.stdout
