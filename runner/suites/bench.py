"""Running a suite: prepare its tasks' data, then bring every setting (agent, task, budget) to N
successes, resumable, in parallel on pinned CPUs. The CLI and the Dagster assets both use ``Bench``.

What the results mean (medians, ranks, the leaderboard) is the warehouse's business (dbt), not
this module's: a run reports only what happened.
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from runner.attempts.attempt import AttemptContext, AttemptPlan, existing_record, run_attempt
from runner.attempts.records import RunRecord
from runner.config import Paths
from runner.errors import TmlbenchError
from runner.sandbox import Sandbox
from runner.specs import SuiteSpec, TaskSpec
from runner.specs.registry import agent_code_dir, task_spec_sha256
from runner.suites.benchmark_settings import Setting, SettingOutcome, SuiteLayout, suite_settings
from runner.suites.preflight import CliRemedies, Preflight, Remedies, RunRefused
from runner.suites.resumptions import Resumption, append_resumption, forgiven_run_ids
from runner.suites.scheduling import AttemptDone, CpuPool, default_workers, host_cpus, run_settings
from runner.tasks.preparation import prepare_twin
from runner.tasks.prepared_files import PreparedTask, prepared_task, public_problems, verify_public
from runner.tasks.private_meta import KaggleSource, TwinSource


class Bench:
    """One suite on this machine: where its data and runs live, its settings, and how to run them.

    ``sandbox`` is needed by ``run`` only; ``concurrency`` (attempts at once) defaults to the
    suite's, else one attempt per CPU share of the host. ``remedies`` words what to do about a
    refused run or a stopped setting for the front end that started it (default: the CLI's).
    """

    def __init__(
        self,
        suite: SuiteSpec,
        paths: Paths,
        sandbox: Sandbox | None = None,
        *,
        concurrency: int | None = None,
        allow_unsafe: bool = False,
        remedies: Remedies | None = None,
    ):
        self.suite = suite
        self.paths = paths
        self.sandbox = sandbox
        self.concurrency = concurrency
        self.allow_unsafe = allow_unsafe
        self.remedies = remedies or CliRemedies(suite.id)
        self.layout = SuiteLayout.of(suite, paths)
        self.settings = suite_settings(suite, paths)  # a broken agent or task spec fails here

    @property
    def tasks(self) -> dict[str, TaskSpec]:
        """The suite's tasks by id, in the suite's order."""
        return {s.task.id: s.task for s in self.settings}

    def prepare(
        self,
        task_ids: Iterable[str] | None = None,
        on_prepared: Callable[[TaskSpec], None] | None = None,
    ) -> dict[str, PreparedTask]:
        """Make sure the named tasks (default: all of the suite's) have data at the suite's scale."""
        tasks = self.tasks
        wanted = list(tasks) if task_ids is None else list(task_ids)
        unknown = [t for t in wanted if t not in tasks]
        if unknown:
            raise TmlbenchError(
                f"tasks {unknown} are not in suite {self.suite.id} (its tasks: {', '.join(tasks)})"
            )
        prepared = {}
        for task_id in wanted:
            prepared[task_id] = ensure_prepared(self.suite, tasks[task_id], self.paths, self.layout)
            if on_prepared:
                on_prepared(tasks[task_id])
        return prepared

    def run(
        self,
        setting_keys: Iterable[str] | None = None,
        on_progress: Callable[[AttemptDone], None] | None = None,
    ) -> BenchRun:
        """Bring the named settings (default: all) to the suite's successes; see ``run_settings``.

        One attempt's failure never stops the others; harness faults are in the result. A fault
        that every attempt of a setting would hit alike (``runner.suites.preflight``: its task not
        prepared or not matching its manifest, its agent's CLI or key missing, a backend that
        cannot run it) refuses the whole run before any attempt starts: ``RunRefused`` names
        each distinct fault once, with the fix. Only settings that still want attempts are
        checked, so a finished or stopped setting never blocks the others.
        """
        if self.sandbox is None:
            raise TmlbenchError(f"Bench({self.suite.id}).run needs a sandbox to run agents in")
        settings = self._select(setting_keys)
        data = {t: prepared_task(self.layout.data_dir, t) for t in {s.task.id for s in settings}}
        self.preflight(settings, data)
        cpus = host_cpus()
        start = attempt_runner(
            data.__getitem__,
            self.paths,
            self.layout.runs_dir,
            self.sandbox,
            CpuPool(cpus),
            allow_unsafe=self.allow_unsafe,
        )
        outcomes = run_settings(
            settings,
            self.suite,
            self.layout.runs_dir,
            start,
            workers=self.concurrency or default_workers(self.suite, settings, cpus),
            on_progress=on_progress,
            resume_hint=self.remedies.resume,
        )
        return BenchRun(outcomes, self.layout.runs_dir)

    def preflight(
        self, settings: list[Setting], data: dict[str, PreparedTask] | None = None
    ) -> None:
        """Refuse (``RunRefused``) if any of ``settings`` that still wants attempts would fail
        every one of them alike; see ``runner.suites.preflight``."""
        if self.sandbox is None:
            raise TmlbenchError(f"Bench({self.suite.id}).preflight needs the run's sandbox")
        if data is None:
            data = {
                t: prepared_task(self.layout.data_dir, t) for t in {s.task.id for s in settings}
            }
        forgiven = forgiven_run_ids(self.layout.runs_dir)
        wanting = [
            s
            for s in settings
            if SettingOutcome.recorded(s, self.suite, self.layout.runs_dir, forgiven).wants_attempts
        ]
        check = Preflight(
            data,
            self.sandbox,
            agents_dir=self.paths.agents_dir,
            clis_dir=self.paths.clis_dir,
            host_cpus=len(host_cpus()),
            runs_dir=self.layout.runs_dir,
            allow_unsafe=self.allow_unsafe,
        )
        refusals = check.refusals(wanting)
        if refusals:
            raise RunRefused(self.suite.id, refusals, self.remedies)

    def resume(self, setting_keys: Iterable[str] | None, by: str) -> list[Resumption]:
        """Resume the named settings (default: all) that are stopped at a fault ceiling: the
        faults their ceilings count now are forgiven (``runner.suites.resumptions``); the records stay
        as they are. Settings that are not stopped are left alone; returns what was resumed."""
        runs_dir = self.layout.runs_dir
        forgiven = forgiven_run_ids(runs_dir)
        now = dt.datetime.now(dt.UTC)
        resumed = []
        for setting in self._select(setting_keys):
            outcome = SettingOutcome.recorded(setting, self.suite, runs_dir, forgiven)
            resumption = outcome.resumption(by, now)
            if resumption is not None:
                append_resumption(runs_dir, resumption)
                resumed.append(resumption)
        return resumed

    def _select(self, setting_keys: Iterable[str] | None) -> list[Setting]:
        if setting_keys is None:
            return list(self.settings)
        by_key = {s.key: s for s in self.settings}
        keys = list(setting_keys)
        unknown = [k for k in keys if k not in by_key]
        if unknown:
            raise TmlbenchError(f"settings {unknown} are not in suite {self.suite.id}")
        return [by_key[k] for k in keys]


@dataclass(frozen=True)
class BenchRun:
    """What a run did: every selected setting's outcome, and where its records are."""

    outcomes: list[SettingOutcome]
    runs_dir: Path

    @property
    def records(self) -> list[RunRecord]:
        """Every record of the selected settings, oldest first."""
        records = [r for outcome in self.outcomes for r in outcome.records]
        return sorted(records, key=lambda r: (r.created_at, r.run_id))

    @property
    def new_attempts(self) -> int:
        return sum(outcome.new for outcome in self.outcomes)

    @property
    def harness_faults(self) -> list[str]:
        """This run's harness faults, and why any setting is stopped at a fault ceiling (harness
        or provider errors)."""
        return [error for outcome in self.outcomes for error in outcome.harness_errors]

    @property
    def incomplete(self) -> list[SettingOutcome]:
        """Settings still short of the suite's successes."""
        return [outcome for outcome in self.outcomes if not outcome.complete]

    def status_counts(self) -> dict[str, int]:
        """Attempts by status, most frequent first."""
        counts = Counter(r.status for outcome in self.outcomes for r in outcome.records)
        return dict(counts.most_common())

    def fault_report(self, limit: int = 10) -> str:
        return harness_failure_report(self.outcomes, limit)


def attempt_runner(
    prepared: Callable[[str], PreparedTask],
    paths: Paths,
    runs_dir: Path,
    sandbox: Sandbox,
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
                sandbox=sandbox,
                agent_code_dir=code_dirs[plan.agent.id],
                task_spec_sha256=spec_hashes[plan.task.id],
                allow_unsafe=allow_unsafe,
                cpuset=cpuset,
                clis_dir=paths.clis_dir,
            )
            return run_attempt(plan, ctx)

    return start


def ensure_prepared(
    suite: SuiteSpec, task: TaskSpec, paths: Paths, layout: SuiteLayout
) -> PreparedTask:
    """Use the task's prepared data if it matches the suite's scale (or is real data); else make the twin."""
    prepared = prepared_task(layout.data_dir, task.id)
    if prepared.exists():
        source = prepared.meta().source
        wanted_rows = suite.twin_rows or (
            task.source.twin.default_rows if task.source.twin else None
        )
        if isinstance(source, KaggleSource):  # real data is never replaced by a twin
            verify_public(prepared)
            return prepared
        if isinstance(source, TwinSource) and source.rows == wanted_rows and _intact(prepared):
            return prepared
    # Missing, at another scale, or changed since: made again (the twin is deterministic).
    return prepare_twin(task, paths.tasks_dir, layout.data_dir, rows=suite.twin_rows)


def _intact(prepared: PreparedTask) -> bool:
    try:
        return not public_problems(prepared)
    except TmlbenchError:  # an unreadable manifest
        return False


def harness_failure_report(outcomes: list[SettingOutcome], limit: int = 10) -> str:
    """What kept a run from finishing that is not the agents' doing, for the terminal: the
    settings stopped at a fault ceiling first (each says which, and where to look), then this
    run's harness faults."""
    stopped = [o.ceiling_note for o in outcomes if o.ceiling_note]
    faults = [e for o in outcomes for e in o.harness_errors if e != o.ceiling_note]
    parts = []
    if stopped:
        parts.append(f"{len(stopped)} setting(s) stopped at a fault ceiling:")
        parts += [f"  {line}" for line in stopped[:limit]]
        if len(stopped) > limit:
            parts.append(f"  … and {len(stopped) - limit} more")
    if faults:
        parts.append(f"{len(faults)} attempt(s) could not be run:")
        parts += [f"  {line}" for line in faults[:limit]]
        if len(faults) > limit:
            parts.append(f"  … and {len(faults) - limit} more")
    return "\n".join(parts)
