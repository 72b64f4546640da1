"""A suite's settings (agent, task, budget): their keys, where their runs live, what is left to run.

Cheap to import on purpose (no pandas or scikit-learn): the CLI and Dagster's partitions name
settings long before anything runs.
"""

from __future__ import annotations

import datetime as dt
import glob
import itertools
from collections import Counter
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from runner.attempts.records import RECORD_FILE, RunRecord, Status, read_record
from runner.config import Paths
from runner.errors import TmlbenchError
from runner.specs import AgentSpec, SuiteSpec, TaskSpec
from runner.specs.registry import suite_members
from runner.suites.resumptions import Resumption

if TYPE_CHECKING:
    from runner.attempts.attempt import AttemptPlan

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
        # Imported here: runner.attempts.attempt pulls in grading (pandas, scikit-learn), which naming
        # settings does not need.
        from runner.attempts.attempt import AttemptPlan

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
    listed, tasks = suite_members(suite, paths)  # a missing or invalid one: a SpecError
    agents = [_with_cpus(agent, suite.cpus_per_attempt) for agent in listed]
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


# Statuses that are not the agent's doing: such an attempt is run again (its run id stays taken,
# records are immutable) and never uses up the agent's allowance; each has a ceiling per setting,
# or a fault that keeps coming back would re-run the setting forever. A ceiling counts the
# setting's faults that no resumption forgave (runner.suites.resumptions): resuming a stopped setting
# (`tmlbench resume`, or the agent_runs asset's `resume_stopped` config in Dagster) forgives the
# faults recorded so far, so it gets a full ceiling again; the records themselves never change.
RERUN_STATUSES: tuple[Status, ...] = ("harness_error", "provider_error")


def status_count(records: list[RunRecord], status: Status) -> int:
    """How many of a setting's attempts ended in ``status`` (for ``harness_error``, a harness
    that died mid-attempt included: whatever killed it may come back on every re-run)."""
    return sum(r.status == status for r in records)


def harness_error_count(records: list[RunRecord]) -> int:
    return status_count(records, "harness_error")


def ceiling_count(records: list[RunRecord], status: Status, forgiven: Collection[str]) -> int:
    """The faults of ``status`` a fault ceiling counts: those no resumption forgave."""
    return sum(r.status == status and r.run_id not in forgiven for r in records)


def next_attempt_indices(
    records: list[RunRecord],
    wanted: int,
    ceiling: int,
    harness_error_ceiling: int | None = None,
    provider_error_ceiling: int | None = None,
    running: Collection[int] = (),
    forgiven: Collection[str] = (),
) -> list[int]:
    """Attempt indices to start now: enough for ``wanted`` successes, never past ``ceiling``
    agent attempts, and never past either fault ceiling.

    Harness and provider errors (``RERUN_STATUSES``) do not use up the agent's allowance, but
    their run ids stay taken. ``running``: indices of attempts in flight, which may still
    succeed, fail, or end in either fault. So a setting never has more attempts in flight than
    each ceiling has room left: even if every one of them ends in the same fault, the ceiling
    holds exactly, whatever the concurrency. ``forgiven``: run ids of faults a resumption
    forgave, which the ceilings no longer count.
    """
    rooms = [
        limit - ceiling_count(records, status, forgiven)
        for status, limit in zip(
            RERUN_STATUSES, (harness_error_ceiling, provider_error_ceiling), strict=True
        )
        if limit is not None
    ]
    if any(room <= 0 for room in rooms):
        return []
    successes = status_count(records, "success")
    used = sum(r.status not in RERUN_STATUSES for r in records)
    need = min(wanted - successes, ceiling - used, *rooms) - len(running)
    taken = {r.attempt_index for r in records} | set(running)
    free = (i for i in itertools.count() if i not in taken)
    return [next(free) for _ in range(max(0, need))]


@dataclass
class SettingOutcome:
    """Where a setting stands after a run: all its records and what kept it from finishing.

    ``harness_errors`` lists this run's harness faults and, first, ``ceiling_note`` (why the
    setting gets no more attempts) when it is stopped at a fault ceiling (harness or provider).
    ``running`` holds the attempt indices in flight while a run schedules it.
    """

    setting: Setting
    wanted: int  # the suite's rules: successes wanted, agent attempts allowed, fault ceilings
    attempt_ceiling: int
    harness_error_ceiling: int
    provider_error_ceiling: int | None = None
    records: list[RunRecord] = field(default_factory=list)
    new: int = 0
    harness_errors: list[str] = field(default_factory=list)
    ceiling_note: str | None = None
    running: set[int] = field(default_factory=set)
    forgiven: frozenset[str] = frozenset()  # run ids of faults a resumption forgave

    @classmethod
    def recorded(
        cls,
        setting: Setting,
        suite: SuiteSpec,
        runs_dir: Path,
        forgiven: frozenset[str] = frozenset(),
    ) -> SettingOutcome:
        """The setting as its recorded attempts (and resumptions) leave it, under the suite's rules."""
        return cls(
            setting,
            suite.attempts,
            suite.attempt_ceiling,
            suite.harness_error_ceiling,
            suite.provider_error_ceiling,
            setting_records(runs_dir, setting),
            forgiven=forgiven,
        )

    def next_indices(self) -> list[int]:
        """The attempts to start now: none once this run saw a harness fault in it."""
        if self.harness_errors:
            return []
        return next_attempt_indices(
            self.records,
            self.wanted,
            self.attempt_ceiling,
            self.harness_error_ceiling,
            self.provider_error_ceiling,
            self.running,
            self.forgiven,
        )

    @property
    def wants_attempts(self) -> bool:
        """Whether a run would start an attempt of this setting now (before any fault of it)."""
        return bool(
            next_attempt_indices(
                self.records,
                self.wanted,
                self.attempt_ceiling,
                self.harness_error_ceiling,
                self.provider_error_ceiling,
                forgiven=self.forgiven,
            )
        )

    @property
    def successes(self) -> int:
        return status_count(self.records, "success")

    @property
    def complete(self) -> bool:
        return self.successes >= self.wanted

    @property
    def n_harness_errors(self) -> int:
        return harness_error_count(self.records)

    @property
    def n_provider_errors(self) -> int:
        return status_count(self.records, "provider_error")

    @property
    def stopped_at(self) -> Status | None:
        """The fault whose ceiling stops the setting while it still wants attempts (successes
        lacking, allowance left), or None."""
        if not next_attempt_indices(self.records, self.wanted, self.attempt_ceiling):
            return None
        for status, limit in zip(
            RERUN_STATUSES, (self.harness_error_ceiling, self.provider_error_ceiling), strict=True
        ):
            if limit is not None and ceiling_count(self.records, status, self.forgiven) >= limit:
                return status
        return None

    def resumption(self, by: str, now: dt.datetime) -> Resumption | None:
        """Resuming the setting if it is stopped at a fault ceiling: the faults both ceilings
        count now are forgiven. None if it is not stopped (nothing to resume)."""
        if self.stopped_at is None:
            return None
        counted = tuple(
            r.run_id
            for r in self.records
            if r.status in RERUN_STATUSES and r.run_id not in self.forgiven
        )
        return Resumption(self.setting.key, counted, now, by, self.setting.suite_id)

    @property
    def stopped_at_harness_error_ceiling(self) -> bool:
        return self.stopped_at == "harness_error"

    @property
    def stopped_at_provider_error_ceiling(self) -> bool:
        return self.stopped_at == "provider_error"

    def ceiling_message(self, runs_dir: Path, resume: str) -> str:
        """Which setting stopped at which fault ceiling, with how many faults, where to look, and
        ``resume``: the action that resumes it (a command, or a Dagster launch)."""
        status = self.stopped_at or "harness_error"
        setting = self.setting
        ceiling = (
            self.harness_error_ceiling if status == "harness_error" else self.provider_error_ceiling
        )
        errors = [r for r in self.records if r.status == status and r.run_id not in self.forgiven]
        latest = max(errors, key=lambda r: (r.created_at, r.run_id))
        shown = ", ".join(r.run_id for r in errors[-5:])
        first_line = (latest.error_message or "(no error message)").splitlines()[0][:300]
        if status == "harness_error":
            look = (
                f"Look at {runs_dir}/<run_id>/record.json (error_message) and harness_error.txt "
                f"(the traceback) of {shown}; the latest says: {first_line}. Fix the fault, then "
            )
        else:
            look = (
                f"The model provider failed these attempts ({shown}; provider_fault_evidence in "
                f"{runs_dir}/<run_id>/record.json); the latest says: {first_line}. Once the "
                "provider answers again (rate limits, an outage, the key's quota), "
            )
        return (
            f"{setting.key} (profile {setting.instruction_profile}) stopped at the "
            f"{status.replace('_', '-')} ceiling: {len(errors)} {status} attempts (suite {setting.suite_id or '(none)'}, "
            f"{status}_ceiling: {ceiling}); it still lacks "
            f"{max(self.wanted - self.successes, 0)} success(es) and gets no more attempts. "
            f"{look}resume it: {resume}."
        )

    def status_counts(self) -> dict[str, int]:
        return dict(Counter(r.status for r in self.records))
