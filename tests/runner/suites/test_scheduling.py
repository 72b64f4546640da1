"""Scheduling a suite's attempts under concurrency: the fault ceilings hold exactly.

No real attempts here: ``start`` plays a generated outcome per attempt, from several worker
threads at once, so the scheduler's bookkeeping is what is tested (``test_bench.py`` runs real
attempts).
"""

from __future__ import annotations

import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from runner.attempts.attempt import AttemptPlan
from runner.attempts.records import RunRecord, write_record
from runner.config import Paths
from runner.specs import SuiteSpec
from runner.suites.benchmark_settings import suite_settings
from runner.suites.resumptions import append_resumption, forgiven_run_ids
from runner.suites.scheduling import run_settings
from tools.records import T0, make_record

BANK = "bank-customer-churn-ict-u-ai"
STATUSES = ("success", "runtime_error", "harness_error", "provider_error")


# 80 generated schedules per run (workers, rules and every attempt's outcome and duration).
@settings(
    max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    workers=st.integers(1, 6),
    attempts=st.integers(1, 4),
    harness_error_ceiling=st.integers(1, 4),
    provider_error_ceiling=st.integers(1, 4),
    outcomes=st.lists(st.sampled_from(STATUSES), min_size=1, max_size=24),
    pauses=st.lists(st.sampled_from((0.0, 0.001, 0.003)), min_size=1, max_size=7),
)
def test_no_concurrency_takes_a_setting_past_a_fault_ceiling(
    paths: Paths,
    workers: int,
    attempts: int,
    harness_error_ceiling: int,
    provider_error_ceiling: int,
    outcomes: list[str],
    pauses: list[float],
):
    suite = SuiteSpec(
        id="s", title="s", tasks=[BANK], agents=["baseline-constant"], budgets=[30, 60],
        attempts=attempts, harness_error_ceiling=harness_error_ceiling,
        provider_error_ceiling=provider_error_ceiling,
    )  # fmt: skip
    settings_ = suite_settings(suite, paths)
    lock = threading.Lock()
    in_flight: Counter[int] = Counter()
    widest: Counter[int] = Counter()

    def start(plan: AttemptPlan) -> RunRecord:
        budget = plan.budget_seconds
        with lock:
            in_flight[budget] += 1
            widest[budget] = max(widest[budget], in_flight[budget])
        time.sleep(pauses[plan.attempt_index % len(pauses)])  # finishing orders vary
        status = outcomes[(plan.attempt_index + budget) % len(outcomes)]
        with lock:
            in_flight[budget] -= 1
        record = make_record(
            plan.agent.id, plan.task.id, budget, minute=plan.attempt_index, status=status,
            run_id=plan.run_id, score=0.5,
        )  # fmt: skip
        (runs_dir / plan.run_id).mkdir()
        write_record(runs_dir / plan.run_id, record)
        return record

    with tempfile.TemporaryDirectory() as runs:
        runs_dir = Path(runs)
        # three calls: the ceilings hold across calls too (the later ones read the records)
        results = [
            outcome
            for _ in range(3)
            for outcome in run_settings(settings_, suite, runs_dir, start, workers=workers)
        ]
        for outcome in results:
            counts = Counter(r.status for r in outcome.records)
            assert counts["harness_error"] <= harness_error_ceiling, counts
            assert counts["provider_error"] <= provider_error_ceiling, counts
            assert counts["success"] <= attempts, "never more attempts than still wanted"
            agent_attempts = counts["success"] + counts["runtime_error"]
            assert agent_attempts <= suite.attempt_ceiling
            assert sorted(r.attempt_index for r in outcome.records) == list(
                range(len(outcome.records))
            ), "indices handed out once each, without gaps"
            # it stopped for a reason: done, out of allowance, a fault ceiling, or this call's
            # harness fault
            assert (
                counts["success"] >= attempts
                or agent_attempts >= suite.attempt_ceiling
                or outcome.stopped_at is not None
                or counts["harness_error"] > 0
            ), counts
            if outcome.stopped_at is not None:
                assert outcome.harness_errors[0] == outcome.ceiling_note
    room = min(workers, harness_error_ceiling, provider_error_ceiling, attempts)
    assert all(n <= room for n in widest.values()), (widest, room)


# 60 generated histories per run: rules, every attempt's outcome, and after each of four calls
# whether the stopped settings are resumed.
@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    workers=st.integers(1, 4),
    attempts=st.integers(1, 3),
    harness_error_ceiling=st.integers(1, 3),
    provider_error_ceiling=st.integers(1, 3),
    outcomes=st.lists(st.sampled_from(STATUSES), min_size=1, max_size=16),
    resume_after=st.lists(st.booleans(), min_size=4, max_size=4),
)
def test_a_ceiling_counts_the_faults_since_the_last_resumption(
    paths: Paths,
    workers: int,
    attempts: int,
    harness_error_ceiling: int,
    provider_error_ceiling: int,
    outcomes: list[str],
    resume_after: list[bool],
):
    suite = SuiteSpec(
        id="s", title="s", tasks=[BANK], agents=["baseline-constant"], budgets=[30, 60],
        attempts=attempts, harness_error_ceiling=harness_error_ceiling,
        provider_error_ceiling=provider_error_ceiling,
    )  # fmt: skip
    settings_ = suite_settings(suite, paths)
    ceilings = {"harness_error": harness_error_ceiling, "provider_error": provider_error_ceiling}

    def start(plan: AttemptPlan) -> RunRecord:
        status = outcomes[(plan.attempt_index + plan.budget_seconds) % len(outcomes)]
        record = make_record(
            plan.agent.id, plan.task.id, plan.budget_seconds, minute=plan.attempt_index,
            status=status, run_id=plan.run_id, score=0.5,
        )  # fmt: skip
        (runs_dir / plan.run_id).mkdir()
        write_record(runs_dir / plan.run_id, record)
        return record

    with tempfile.TemporaryDirectory() as runs:
        runs_dir = Path(runs)
        resumptions = Counter[str]()
        kept: dict[Path, bytes] = {}
        resumed: set[str] = set()
        for resume in resume_after:
            for outcome in run_settings(settings_, suite, runs_dir, start, workers=workers):
                if outcome.setting.key in resumed:  # stopped, resumed: it runs again at once
                    assert outcome.new > 0
                forgiven = forgiven_run_ids(runs_dir)
                for status, ceiling in ceilings.items():
                    counted = [
                        r
                        for r in outcome.records
                        if r.status == status and r.run_id not in forgiven
                    ]
                    assert len(counted) <= ceiling, "the ceiling holds since the last resumption"
                    total = sum(r.status == status for r in outcome.records)
                    assert total <= ceiling * (resumptions[outcome.setting.key] + 1)
                    if len(counted) >= ceiling and not outcome.complete:
                        assert outcome.stopped_at is not None or outcome.harness_errors
                if resume and (resumption := outcome.resumption("test", T0)) is not None:
                    assert set(resumption.forgiven).isdisjoint(forgiven)  # forgiven once
                    append_resumption(runs_dir, resumption)
                    resumptions[outcome.setting.key] += 1
                    resumed.add(outcome.setting.key)
                else:
                    resumed.discard(outcome.setting.key)
            # records are never rewritten, whatever is resumed
            assert all(path.read_bytes() == data for path, data in kept.items())
            kept = {path: path.read_bytes() for path in runs_dir.glob("*/record.json")}
