"""Running a suite: prepare its tasks' data, then bring every setting (agent, task, budget) to N
successes, resumable, in parallel on pinned CPUs. The CLI and the Dagster assets both use ``Bench``.

What the results mean (medians, ranks, the leaderboard) is the warehouse's business (dbt), not
this module's: a run reports only what happened.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from runner.attempt import AttemptContext, AttemptPlan, existing_record, run_attempt
from runner.config import Paths
from runner.errors import TmlbenchError
from runner.prepare import prepare_twin
from runner.prepared import PreparedTask, prepared_task, verify_public
from runner.records import RunRecord
from runner.registry import agent_code_dir, task_spec_sha256
from runner.sandbox import Sandbox
from runner.scheduling import AttemptDone, CpuPool, default_workers, host_cpus, run_settings
from runner.settings import Setting, SettingOutcome, SuiteLayout, suite_settings
from runner.specs import SuiteSpec, TaskSpec


class Bench:
    """One suite on this machine: where its data and runs live, its settings, and how to run them.

    ``sandbox`` is needed by ``run`` only; ``concurrency`` (attempts at once) defaults to the
    suite's, else one attempt per CPU share of the host.
    """

    def __init__(
        self,
        suite: SuiteSpec,
        paths: Paths,
        sandbox: Sandbox | None = None,
        *,
        concurrency: int | None = None,
        allow_unsafe: bool = False,
    ):
        self.suite = suite
        self.paths = paths
        self.sandbox = sandbox
        self.concurrency = concurrency
        self.allow_unsafe = allow_unsafe
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

        One attempt's failure never stops the others; harness faults are in the result. Prepared
        public files that do not match their manifest stop the run before any attempt starts; a
        task that is not prepared at all becomes each of its attempts' ``harness_error``.
        """
        if self.sandbox is None:
            raise TmlbenchError(f"Bench({self.suite.id}).run needs a sandbox to run agents in")
        settings = self._select(setting_keys)
        data = {t: prepared_task(self.layout.data_dir, t) for t in {s.task.id for s in settings}}
        refuse_tampered(data.values())
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
        )
        return BenchRun(outcomes, self.layout.runs_dir)

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
        source = prepared.private_meta().get("source", {})
        wanted_rows = suite.twin_rows or (
            task.source.twin.default_rows if task.source.twin else None
        )
        if source.get("kind") == "kaggle" or source.get("rows") == wanted_rows:
            return prepared
    return prepare_twin(task, paths.tasks_dir, layout.data_dir, rows=suite.twin_rows)


def refuse_tampered(tasks: Iterable[PreparedTask]) -> None:
    """Check the public files of every prepared task before any attempt: tampered data runs nothing."""
    refused = []
    for task_data in tasks:
        if not task_data.exists():  # not prepared: each attempt records that as a harness_error
            continue
        try:
            verify_public(task_data)
        except TmlbenchError as exc:
            refused.append(str(exc))
    if refused:
        raise TmlbenchError("\n".join(refused))


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
