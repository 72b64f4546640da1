"""A suite run: every (agent, task, budget, attempt) of a suite, resumable, in parallel on pinned CPUs."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor, as_completed
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from runner.attempt import AttemptContext, AttemptPlan, existing_record, run_attempt
from runner.config import Paths
from runner.errors import TmlbenchError
from runner.prepare import PreparedTask, prepare_twin, prepared_task
from runner.records import RunRecord
from runner.registry import agent_code_dir, load_agent, load_task, task_spec_sha256
from runner.sandbox import Sandbox
from runner.specs import SuiteSpec, TaskSpec


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
    """All attempts of the suite, in an order that spreads each setting's attempts over time."""
    agents = [load_agent(paths.agents_dir, a) for a in suite.agents]
    tasks = [load_task(paths.tasks_dir, t) for t in suite.tasks]
    return [
        AttemptPlan(agent, task, budget, index, suite.instruction_profile, suite.id)
        for index in range(suite.attempts)
        for task in tasks
        for budget in suite.budgets
        for agent in agents
    ]


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
    """Run every missing attempt of the suite; returns all its records (old and new).

    ``on_done(record, was_new)`` is called once per attempt, for progress display.
    One attempt's failure never stops the others.
    """
    layout = SuiteLayout.of(suite, paths)
    plans = plan_suite(suite, paths)
    prepared: dict[str, PreparedTask] = {}
    for task in {p.task.id: p.task for p in plans}.values():
        prepared[task.id] = ensure_prepared(suite, task, paths, layout)
        if on_prepared:
            on_prepared(task)
    cpus = host_cpus()
    pool = CpuPool(cpus)
    widest = max(p.agent.limits.cpus for p in plans)
    workers = concurrency or suite.concurrency or max(1, len(cpus) // widest)
    spec_hashes = {t: task_spec_sha256(paths.tasks_dir, t) for t in prepared}
    code_dirs = {p.agent.id: agent_code_dir(paths.agents_dir, p.agent) for p in plans}

    def attempt(plan: AttemptPlan) -> tuple[RunRecord, bool]:
        done = existing_record(layout.runs_dir, plan.run_id)
        if done is not None:
            return done, False
        with pool.take(plan.agent.limits.cpus) as cpuset:
            ctx = AttemptContext(
                prepared=prepared[plan.task.id],
                runs_dir=layout.runs_dir,
                sandbox=sandbox_for(plan),
                agent_code_dir=code_dirs[plan.agent.id],
                task_spec_sha256=spec_hashes[plan.task.id],
                allow_unsafe=allow_unsafe,
                cpuset=cpuset,
            )
            return run_attempt(plan, ctx), True

    records: list[RunRecord] = []
    failures: list[str] = []
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="attempt") as executor:
        futures = {executor.submit(attempt, plan): plan for plan in plans}
        for future in as_completed(futures):
            try:
                record, was_new = future.result()
            except Exception as exc:  # the others keep going; all failures are reported at the end
                failures.append(f"{futures[future].run_id}: {exc}")
                continue
            records.append(record)
            if on_done:
                on_done(record, was_new)
    if failures:
        shown = "\n  ".join(failures[:10])
        raise TmlbenchError(f"{len(failures)} attempt(s) could not be run:\n  {shown}")
    return sorted(records, key=lambda r: (r.created_at, r.run_id))
