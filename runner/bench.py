"""A suite run: every setting (agent, task, budget) until N successes, resumable, in parallel on pinned CPUs."""

from __future__ import annotations

import glob
import itertools
import os
import statistics
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor, as_completed
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from runner.attempt import (
    AttemptContext,
    AttemptPlan,
    died_mid_attempt,
    existing_record,
    run_attempt,
)
from runner.config import Paths
from runner.errors import TmlbenchError
from runner.prepare import PreparedTask, prepare_twin, prepared_task, verify_public
from runner.records import RECORD_FILE, RunRecord, read_record
from runner.registry import agent_code_dir, load_agent, load_task, task_spec_sha256
from runner.sandbox import Sandbox
from runner.specs import AgentSpec, SuiteSpec, TaskSpec


@dataclass(frozen=True)
class SuiteLayout:
    """Where one suite's data and runs live."""

    data_dir: Path
    runs_dir: Path

    @classmethod
    def of(cls, suite: SuiteSpec, paths: Paths) -> SuiteLayout:
        return cls(
            data_dir=(paths.data_dir / suite.data_subdir).resolve(),
            runs_dir=(paths.runs_dir / suite.runs_subdir).resolve(),
        )


def plan_suite(suite: SuiteSpec, paths: Paths) -> list[AttemptPlan]:
    """The suite's first ``attempts`` attempts of every setting, spread over time per setting."""
    settings = suite_settings(suite, paths)
    return [s.plan(index) for index in range(suite.attempts) for s in settings]


SETTING_KEY_SEP = "|"


def setting_key(agent_id: str, task_id: str, budget_seconds: int) -> str:
    """``agent|task|budget``: one name per setting (e.g. a Dagster partition key)."""
    return SETTING_KEY_SEP.join((agent_id, task_id, str(budget_seconds)))


def parse_setting_key(key: str) -> tuple[str, str, int]:
    parts = key.split(SETTING_KEY_SEP)
    if len(parts) != 3 or not parts[2].isdigit():
        raise TmlbenchError(f"setting key {key!r} is not of the form agent|task|budget_seconds")
    return parts[0], parts[1], int(parts[2])


@dataclass(frozen=True)
class Setting:
    """One (agent, task, budget) of a suite, with the profile and suite recorded on its runs."""

    agent: AgentSpec
    task: TaskSpec
    budget_seconds: int
    instruction_profile: str = "standard"
    suite_id: str | None = None

    @property
    def key(self) -> str:
        return setting_key(self.agent.id, self.task.id, self.budget_seconds)

    def plan(self, attempt_index: int) -> AttemptPlan:
        return AttemptPlan(
            self.agent,
            self.task,
            self.budget_seconds,
            attempt_index,
            self.instruction_profile,
            self.suite_id,
        )

    @property
    def run_id_prefix(self) -> str:
        return self.plan(0).run_id.removesuffix("00")


def suite_settings(suite: SuiteSpec, paths: Paths) -> list[Setting]:
    """Every setting of the suite: agents outermost, then tasks, then budgets."""
    agents = [
        _with_cpus(load_agent(paths.agents_dir, a), suite.cpus_per_attempt) for a in suite.agents
    ]
    tasks = [load_task(paths.tasks_dir, t) for t in suite.tasks]
    return [
        Setting(agent, task, budget, suite.profile_for(budget), suite.id)
        for agent in agents
        for task in tasks
        for budget in suite.budgets
    ]


def _with_cpus(agent: AgentSpec, cpus: int | None) -> AgentSpec:
    if cpus is None:
        return agent
    return agent.model_copy(update={"limits": agent.limits.model_copy(update={"cpus": cpus})})


def setting_records(runs_dir: Path, setting: Setting) -> list[RunRecord]:
    """The setting's recorded attempts, by attempt index."""
    records = [
        read_record(path)
        for path in runs_dir.glob(f"{glob.escape(setting.run_id_prefix)}*/{RECORD_FILE}")
    ]
    return sorted(records, key=lambda r: r.attempt_index)


def harness_error_count(records: list[RunRecord]) -> int:
    """How many of a setting's attempts ended in ``harness_error`` (a harness that died
    mid-attempt included: whatever killed it may come back on every re-run)."""
    return sum(r.status == "harness_error" for r in records)


def next_attempt_indices(
    records: list[RunRecord],
    wanted: int,
    ceiling: int,
    harness_error_ceiling: int | None = None,
) -> list[int]:
    """Attempt indices still to run: enough for ``wanted`` successes, never past ``ceiling``
    agent attempts, and none once the setting has ``harness_error_ceiling`` harness errors.

    Harness errors do not use up the agent's allowance (they are not the agent's doing), but
    their run ids stay taken: records are immutable. As they are re-run, a fault that keeps
    coming back would re-run the setting forever; the harness-error ceiling ends that.
    """
    if harness_error_ceiling is not None and harness_error_count(records) >= harness_error_ceiling:
        return []
    successes = sum(r.status == "success" for r in records)
    used = sum(r.status != "harness_error" for r in records)
    need = min(wanted - successes, ceiling - used)
    taken = {r.attempt_index for r in records}
    free = (i for i in itertools.count() if i not in taken)
    return [next(free) for _ in range(max(0, need))]


@dataclass
class SettingOutcome:
    """Where a setting stands after a run: all its records and what went wrong in the harness.

    ``harness_errors`` lists this run's harness faults and, first, ``ceiling_note`` (why the
    setting gets no more attempts) when it is stopped at the harness-error ceiling.
    """

    setting: Setting
    wanted: int
    records: list[RunRecord] = field(default_factory=list)
    new: int = 0
    harness_errors: list[str] = field(default_factory=list)
    attempt_ceiling: int | None = None  # the suite's: None = no cap on the agent's attempts
    harness_error_ceiling: int | None = None  # the suite's: None = no ceiling
    ceiling_note: str | None = None

    @property
    def successes(self) -> int:
        return sum(r.status == "success" for r in self.records)

    @property
    def complete(self) -> bool:
        return self.successes >= self.wanted

    @property
    def n_harness_errors(self) -> int:
        return harness_error_count(self.records)

    @property
    def stopped_at_harness_error_ceiling(self) -> bool:
        """It still wants attempts (successes lacking, allowance left), but has as many
        harness errors as the ceiling allows."""
        if self.harness_error_ceiling is None or self.n_harness_errors < self.harness_error_ceiling:
            return False
        if self.attempt_ceiling is None:
            return not self.complete
        return bool(next_attempt_indices(self.records, self.wanted, self.attempt_ceiling))

    def ceiling_message(self, runs_dir: Path) -> str:
        """Which setting stopped, with how many harness errors, and where to look."""
        setting = self.setting
        errors = [r for r in self.records if r.status == "harness_error"]
        latest = max(errors, key=lambda r: (r.created_at, r.run_id))
        shown = ", ".join(r.run_id for r in errors[-5:])
        first_line = (latest.error_message or "(no error message)").splitlines()[0][:300]
        return (
            f"{setting.key} (profile {setting.instruction_profile}) stopped at the harness-error "
            f"ceiling: {len(errors)} harness_error attempts (suite {setting.suite_id or '(none)'}, "
            f"harness_error_ceiling: {self.harness_error_ceiling}); it still lacks "
            f"{max(self.wanted - self.successes, 0)} success(es) and gets no more attempts. "
            f"Look at {runs_dir}/<run_id>/record.json (error_message) and harness_error.txt "
            f"(the traceback) of {shown}; the latest says: {first_line}. Fix the fault, then "
            f"raise harness_error_ceiling in the suite's file to resume the setting."
        )

    def status_counts(self) -> dict[str, int]:
        return dict(Counter(r.status for r in self.records))

    def median_score(self) -> float | None:
        """Median of the first ``wanted`` successes by created_at (the benchmark's setting score)."""
        counted = sorted(
            (r for r in self.records if r.status == "success" and r.score is not None),
            key=lambda r: (r.created_at, r.run_id),
        )[: self.wanted]
        return statistics.median(r.score for r in counted) if counted else None

    def markdown(self) -> str:
        rows = [
            "| attempt | run id | status | score | wall s | note |",
            "|---|---|---|---|---|---|",
        ]
        for r in self.records:
            score = "" if r.score is None else f"{r.score:.6g}"
            wall = "" if r.wall_seconds is None else f"{r.wall_seconds:.1f}"
            note = (r.error_message or r.validation_message or "").replace("|", "/")[:80]
            rows.append(
                f"| {r.attempt_index} | `{r.run_id}` | {r.status} | {score} | {wall} | {note} |"
            )
        return "\n".join(rows)


def run_settings(
    settings: list[Setting],
    suite: SuiteSpec,
    runs_dir: Path,
    start: Callable[[AttemptPlan], RunRecord],
    *,
    workers: int,
    on_done: Callable[[RunRecord, bool], None] | None = None,
) -> list[SettingOutcome]:
    """Bring each setting to ``suite.attempts`` successes, or to ``suite.attempt_ceiling`` attempts.

    Resumable: recorded attempts count. ``start(plan)`` runs one attempt (``run_attempt``).
    Attempts of all settings share one pool of ``workers`` threads, first attempts first. A
    setting whose attempt hit a harness fault (a ``harness_error`` record or an exception) gets no
    further attempts in this call; the fault is in its outcome's ``harness_errors``, and the
    other settings carry on. The exception: an attempt found unfinished by an earlier harness
    that was killed (``died_mid_attempt``) is recorded as ``harness_error`` and its setting simply
    goes on with the next attempt index (that fault is past, not this run's).

    Across calls, a setting with ``suite.harness_error_ceiling`` harness_error records (of this
    run or earlier ones, died-mid-attempt ones included) gets no more attempts at all; if it still
    lacks successes, why is the first entry of its ``harness_errors``.
    """
    outcomes = {
        s.key: SettingOutcome(
            s,
            suite.attempts,
            setting_records(runs_dir, s),
            attempt_ceiling=suite.attempt_ceiling,
            harness_error_ceiling=suite.harness_error_ceiling,
        )
        for s in settings
    }
    if on_done:
        for outcome in outcomes.values():
            for record in outcome.records:
                on_done(record, False)
    while True:
        plans = [
            outcome.setting.plan(index)
            for outcome in outcomes.values()
            if not outcome.harness_errors
            for index in next_attempt_indices(
                outcome.records,
                suite.attempts,
                suite.attempt_ceiling,
                suite.harness_error_ceiling,
            )
        ]
        if not plans:
            break
        plans.sort(key=lambda p: p.attempt_index)  # stable: settings keep their order per index
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="attempt") as executor:
            futures = {executor.submit(start, plan): plan for plan in plans}
            for future in as_completed(futures):
                plan = futures[future]
                outcome = outcomes[setting_key(plan.agent.id, plan.task.id, plan.budget_seconds)]
                try:
                    record = future.result()
                except Exception as exc:  # the others keep going; reported with the setting
                    outcome.harness_errors.append(f"{plan.run_id}: {exc}")
                    continue
                outcome.records.append(record)
                outcome.new += 1
                if record.status == "harness_error" and not died_mid_attempt(record):
                    outcome.harness_errors.append(f"{record.run_id}: {record.error_message}")
                if on_done:
                    on_done(record, True)
    for outcome in outcomes.values():
        outcome.records.sort(key=lambda r: r.attempt_index)
        if outcome.stopped_at_harness_error_ceiling:
            outcome.ceiling_note = outcome.ceiling_message(runs_dir)
            outcome.harness_errors.insert(0, outcome.ceiling_note)
    return list(outcomes.values())


def attempt_runner(
    prepared: Callable[[str], PreparedTask],
    paths: Paths,
    runs_dir: Path,
    sandbox_for: Callable[[AttemptPlan], Sandbox],
    pool: CpuPool,
    *,
    allow_unsafe: bool = False,
) -> Callable[[AttemptPlan], RunRecord]:
    """``start(plan)`` for ``run_settings``: takes a CPU share, then ``run_attempt``."""
    spec_hashes: dict[str, str] = {}
    code_dirs: dict[str, Path | None] = {}

    def start(plan: AttemptPlan) -> RunRecord:
        done = existing_record(runs_dir, plan.run_id)
        if done is not None:
            return done
        if plan.task.id not in spec_hashes:
            spec_hashes[plan.task.id] = task_spec_sha256(paths.tasks_dir, plan.task.id)
        if plan.agent.id not in code_dirs:
            code_dirs[plan.agent.id] = agent_code_dir(paths.agents_dir, plan.agent)
        with pool.take(plan.agent.limits.cpus) as cpuset:
            ctx = AttemptContext(
                prepared=prepared(plan.task.id),
                runs_dir=runs_dir,
                sandbox=sandbox_for(plan),
                agent_code_dir=code_dirs[plan.agent.id],
                task_spec_sha256=spec_hashes[plan.task.id],
                allow_unsafe=allow_unsafe,
                cpuset=cpuset,
                clis_dir=paths.clis_dir,
            )
            return run_attempt(plan, ctx)

    return start


def default_workers(suite: SuiteSpec, settings: list[Setting], cpus: list[int]) -> int:
    """Attempts at once: the suite's ``concurrency``, else as many CPU shares as the host has."""
    widest = max((s.agent.limits.cpus for s in settings), default=1)
    return suite.concurrency or max(1, len(cpus) // widest)


def ensure_prepared(
    suite: SuiteSpec, task: TaskSpec, paths: Paths, layout: SuiteLayout
) -> PreparedTask:
    """Use the task's prepared data if it matches the suite's scale (or is real data); else make the twin."""
    prepared = prepared_task(layout.data_dir, task.id)
    if prepared.exists():
        source = prepared.private_meta().get("source", {})
        wanted_rows = suite.twin_rows or (
            task.source.twin.default_rows if task.source.twin else None
        )
        if source.get("kind") == "kaggle" or source.get("rows") == wanted_rows:
            return prepared
    return prepare_twin(task, paths.tasks_dir, layout.data_dir, rows=suite.twin_rows)


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


def run_suite(
    suite: SuiteSpec,
    paths: Paths,
    sandbox_for: Callable[[AttemptPlan], Sandbox],
    *,
    concurrency: int | None = None,
    allow_unsafe: bool = False,
    on_prepared: Callable[[TaskSpec], None] | None = None,
    on_done: Callable[[RunRecord, bool], None] | None = None,
) -> list[RunRecord]:
    """Bring every setting of the suite to N successes (see ``run_settings``); returns all records.

    ``on_done(record, was_new)`` is called once per attempt, for progress display.
    One attempt's failure never stops the others; harness faults are raised at the end. Prepared
    public files that do not match their manifest stop the suite before any attempt starts.
    """
    layout = SuiteLayout.of(suite, paths)
    settings = suite_settings(suite, paths)
    prepared: dict[str, PreparedTask] = {}
    for task in {s.task.id: s.task for s in settings}.values():
        prepared[task.id] = ensure_prepared(suite, task, paths, layout)
        if on_prepared:
            on_prepared(task)
    refused = []
    for task_data in prepared.values():  # before any attempt: tampered data runs nothing
        try:
            verify_public(task_data)
        except TmlbenchError as exc:
            refused.append(str(exc))
    if refused:
        raise TmlbenchError("\n".join(refused))
    cpus = host_cpus()
    start = attempt_runner(
        prepared.__getitem__,
        paths,
        layout.runs_dir,
        sandbox_for,
        CpuPool(cpus),
        allow_unsafe=allow_unsafe,
    )
    outcomes = run_settings(
        settings,
        suite,
        layout.runs_dir,
        start,
        workers=concurrency or default_workers(suite, settings, cpus),
        on_done=on_done,
    )
    failures = [error for outcome in outcomes for error in outcome.harness_errors]
    if failures:
        raise TmlbenchError(harness_failure_report(outcomes))
    records = [r for outcome in outcomes for r in outcome.records]
    return sorted(records, key=lambda r: (r.created_at, r.run_id))


def harness_failure_report(outcomes: list[SettingOutcome], limit: int = 10) -> str:
    """What went wrong in the harness during a run, for the terminal: the settings stopped at
    the harness-error ceiling first (each says where to look), then this run's faults."""
    stopped = [o.ceiling_note for o in outcomes if o.ceiling_note]
    faults = [e for o in outcomes for e in o.harness_errors if e != o.ceiling_note]
    parts = []
    if stopped:
        parts.append(f"{len(stopped)} setting(s) stopped at the harness-error ceiling:")
        parts += [f"  {line}" for line in stopped[:limit]]
        if len(stopped) > limit:
            parts.append(f"  … and {len(stopped) - limit} more")
    if faults:
        parts.append(f"{len(faults)} attempt(s) could not be run:")
        parts += [f"  {line}" for line in faults[:limit]]
        if len(faults) > limit:
            parts.append(f"  … and {len(faults) - limit} more")
    return "\n".join(parts)
