"""Scheduling a suite's attempts: a share of pinned host CPUs each, a pool of worker threads,
rounds until every setting has what it wants or is stopped."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from runner.attempts.attempt import AttemptPlan
from runner.attempts.records import RunRecord
from runner.attempts.run_folder import died_mid_attempt
from runner.errors import TmlbenchError
from runner.specs import SuiteSpec
from runner.suites.benchmark_settings import Setting, SettingOutcome, setting_key
from runner.suites.resumptions import forgiven_run_ids


class CpuPool:
    """Hands out disjoint sets of host CPUs so every running attempt gets a fixed share."""

    def __init__(self, cpus: list[int]):
        self._free = sorted(cpus)
        self._total = len(cpus)
        self._cond = threading.Condition()

    @contextmanager
    def take(self, count: int) -> Iterator[str]:
        if count > self._total:
            raise TmlbenchError(
                f"an attempt wants {count} CPUs but this machine offers {self._total}"
            )
        with self._cond:
            self._cond.wait_for(lambda: len(self._free) >= count)
            taken, self._free = self._free[:count], self._free[count:]
        try:
            yield ",".join(map(str, taken))
        finally:
            with self._cond:
                self._free = sorted(self._free + taken)
                self._cond.notify_all()


def host_cpus() -> list[int]:
    return sorted(os.sched_getaffinity(0))


def default_workers(suite: SuiteSpec, settings: list[Setting], cpus: list[int]) -> int:
    """Attempts at once: the suite's ``concurrency``, else as many CPU shares as the host has."""
    widest = max((s.agent.limits.cpus for s in settings), default=1)
    return suite.concurrency or max(1, len(cpus) // widest)


@dataclass(frozen=True)
class AttemptDone:
    """One attempt accounted for, for progress display: ``new`` if this run made its record
    (else it was recorded before); ``settings_done`` counts settings that want no more attempts."""

    record: RunRecord
    new: bool
    settings_done: int
    settings_total: int


def run_settings(
    settings: list[Setting],
    suite: SuiteSpec,
    runs_dir: Path,
    start: Callable[[AttemptPlan], RunRecord],
    *,
    workers: int,
    on_progress: Callable[[AttemptDone], None] | None = None,
    resume_hint: Callable[[Setting], str] | None = None,
) -> list[SettingOutcome]:
    """Bring each setting to ``suite.attempts`` successes, or to ``suite.attempt_ceiling`` attempts.

    Resumable: recorded attempts count. ``start(plan)`` runs one attempt (``run_attempt``).
    Attempts of all settings share ``workers`` threads; whenever one is free it takes the lowest
    attempt index any setting wants (first attempts first, settings in order). A setting never
    has more attempts in flight than its fault ceilings have room left (``next_attempt_indices``),
    so no concurrency can take it past a ceiling.

    A setting whose attempt hit a harness fault (a ``harness_error`` record or an exception) gets
    no further attempts in this call; the fault is in its outcome's ``harness_errors``, and the
    other settings carry on. The exception: an attempt found unfinished by an earlier harness
    that was killed (``died_mid_attempt``) is recorded as ``harness_error`` and its setting simply
    goes on with the next attempt index (that fault is past, not this run's). A ``provider_error``
    (the model provider failed the attempt) is run again at once, like an agent's failure that
    does not use up its allowance.

    Across calls, a setting with ``suite.harness_error_ceiling`` harness_error records (of this
    run or earlier ones, died-mid-attempt ones included) or ``suite.provider_error_ceiling``
    provider_error records gets no more attempts at all; if it still lacks successes, why is the
    first entry of its ``harness_errors``, ending with ``resume_hint(setting)``: how to resume
    it (default: the ``tmlbench`` command). The ceilings count only faults no resumption
    forgave (``runner.suites.resumptions``).
    """
    forgiven = forgiven_run_ids(runs_dir)
    outcomes = {s.key: SettingOutcome.recorded(s, suite, runs_dir, forgiven) for s in settings}

    def report(record: RunRecord, new: bool) -> None:
        if on_progress:
            done = sum(not o.next_indices() and not o.running for o in outcomes.values())
            on_progress(AttemptDone(record, new, done, len(outcomes)))

    def next_plan() -> AttemptPlan | None:
        wanted = [
            (indices[0], order, outcome)
            for order, outcome in enumerate(outcomes.values())
            if (indices := outcome.next_indices())
        ]
        if not wanted:
            return None
        index, _, outcome = min(wanted, key=lambda item: item[:2])
        outcome.running.add(index)
        return outcome.setting.plan(index)

    for outcome in outcomes.values():
        for record in outcome.records:
            report(record, False)
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="attempt") as executor:
        running: dict[Future[RunRecord], AttemptPlan] = {}
        while True:
            while len(running) < workers and (plan := next_plan()) is not None:
                running[executor.submit(start, plan)] = plan
            if not running:
                break
            finished, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in finished:
                plan = running.pop(future)
                outcome = outcomes[setting_key(plan.agent.id, plan.task.id, plan.budget_seconds)]
                outcome.running.discard(plan.attempt_index)
                try:
                    record = future.result()
                except Exception as exc:  # the others keep going; reported with the setting
                    outcome.harness_errors.append(f"{plan.run_id}: {exc}")
                    continue
                outcome.records.append(record)
                outcome.new += 1
                if record.status == "harness_error" and not died_mid_attempt(record):
                    outcome.harness_errors.append(f"{record.run_id}: {record.error_message}")
                report(record, True)
    for outcome in outcomes.values():
        outcome.records.sort(key=lambda r: r.attempt_index)
        if outcome.stopped_at is not None:
            hint = resume_hint or _tmlbench_resume(suite)
            outcome.ceiling_note = outcome.ceiling_message(runs_dir, hint(outcome.setting))
            outcome.harness_errors.insert(0, outcome.ceiling_note)
    return list(outcomes.values())


def _tmlbench_resume(suite: SuiteSpec) -> Callable[[Setting], str]:
    # Imported here: runner.suites.preflight pulls in the agent drivers, which scheduling does not need.
    from runner.suites.preflight import CliRemedies

    return CliRemedies(suite.id).resume
