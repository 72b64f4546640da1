"""What the benchmark assets show in the UI: a task's or a setting's facts on its own partition,
each finished attempt as an observation, a run's totals in its log (and on its failure).

Each setting of a run gets its own facts, never the run's totals: Dagster records one
materialization per partition of a run, and a result's metadata would be copied onto every
partition, as if each setting had made all the run's attempts.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeAlias

import dagster as dg

from orchestration.partitions import settings_partition_key
from orchestration.progress import progress_extra
from runner.attempts import RunRecord
from runner.specs import SuiteSpec
from runner.suites import AttemptDone, BenchRun, PreparedFacts, SettingOutcome, run_folder

# A value Dagster takes as metadata (its RawMetadataValue, which ``dagster`` does not export);
# lists and dicts are JSON.
MetadataEntry: TypeAlias = (
    dg.MetadataValue[Any] | str | int | float | bool | list[Any] | dict[str, Any] | None
)
Metadata: TypeAlias = dict[str, MetadataEntry]

MARKDOWN_PUNCTUATION = re.compile(r"([!-/:-@\[-`{-~])")  # every ASCII punctuation character
NOTE_LIMIT = 80  # characters of an attempt's note in its table


def prepared_metadata(facts: PreparedFacts) -> Metadata:
    """One prepared task's facts, for its partition."""
    return {
        "rows": facts["train_rows"] + facts["test_rows"],
        "train_rows": facts["train_rows"],
        "test_rows": facts["test_rows"],
        "columns": facts["columns"],
        "manifest_sha256": facts["manifest_sha256"],
        "bayes_optimal_score": facts["bayes_optimal_score"],
        "constant_score": facts["constant_score"],
        "source": facts["source"],
    }


def setting_metadata(outcome: SettingOutcome, runs_dir: Path) -> Metadata:
    """One setting's facts, for its partition: all its attempts, earlier runs' included. What
    the scores mean (medians, ranks) is in the marts, built downstream."""
    records = outcome.records
    metadata: Metadata = {
        "progress": f"{outcome.successes}/{outcome.wanted} successes after {len(records)} "
        f"attempt(s) (at most {outcome.attempt_ceiling})",
        "attempts": len(records),
        "new_attempts": outcome.new,
        "successes": outcome.successes,
        "successes_wanted": outcome.wanted,
        "attempts_max": outcome.attempt_ceiling,
        "complete": outcome.complete,
        "statuses": dict(Counter(r.status for r in records).most_common()),
        "scores": [r.score for r in records if r.score is not None],
        "attempts_table": dg.MetadataValue.md(attempts_table(outcome)),
        "runs_dir": dg.MetadataValue.path(str(runs_dir)),
    }
    if records:
        last = records[-1]
        metadata["last_status"] = last.status
        metadata["last_run"] = dg.MetadataValue.path(str(run_folder(runs_dir, last.run_id)))
    return metadata


@dataclass
class _Counts:
    attempts: int = 0
    successes: int = 0


class SettingTally:
    """Each setting's attempts so far (earlier runs' included), as metadata for its partition."""

    def __init__(self, suite: SuiteSpec, runs_dir: Path):
        self.wanted = suite.attempts
        self.ceiling = suite.attempt_ceiling
        self.runs_dir = runs_dir
        self.counts: dict[tuple[str, str, int], _Counts] = {}

    def add(self, record: RunRecord) -> None:
        counts = self.counts.setdefault(
            (record.agent_id, record.task_id, record.budget_seconds), _Counts()
        )
        counts.attempts += 1
        counts.successes += record.status == "success"

    def metadata(self, record: RunRecord, done: AttemptDone) -> Metadata:
        counts = self.counts[(record.agent_id, record.task_id, record.budget_seconds)]
        metadata: Metadata = {
            "progress": f"{counts.successes}/{self.wanted} successes after {counts.attempts} "
            f"attempt(s) (at most {self.ceiling})",
            "attempts": counts.attempts,
            "attempts_max": self.ceiling,
            "successes": counts.successes,
            "successes_wanted": self.wanted,
            "last_status": record.status,
            "last_run": dg.MetadataValue.path(str(run_folder(self.runs_dir, record.run_id))),
            # the run's, not the setting's: how far the whole run is
            "settings_done_in_run": f"{done.settings_done}/{done.settings_total}",
        }
        if record.score is not None:
            metadata["last_score"] = record.score
        return metadata


class AttemptReporter:
    """The ``on_progress`` of an ``agent_runs`` run: each attempt this run finished is logged
    (`make run`'s bars follow the log) and observed on its partition, with its setting's
    attempts so far; attempts recorded by earlier runs are counted, not announced."""

    def __init__(self, context: dg.AssetExecutionContext, suite: SuiteSpec, runs_dir: Path):
        self.context = context
        self.tally = SettingTally(suite, runs_dir)

    def __call__(self, done: AttemptDone) -> None:
        record = done.record
        self.tally.add(record)
        if not done.new:
            return
        self.context.log.info(
            f"{record.run_id}: {record.status} score={record.score} "
            f"({done.settings_done}/{done.settings_total} settings done)",
            extra=progress_extra(
                status=record.status,
                settings_done=done.settings_done,
                settings_total=done.settings_total,
            ),
        )
        partition = settings_partition_key(record.agent_id, record.task_id, record.budget_seconds)
        self.context.log_event(
            dg.AssetObservation(
                asset_key=self.context.asset_key,
                partition=str(partition),
                metadata=self.tally.metadata(record, done),
            )
        )


def run_totals(run: BenchRun) -> Metadata:
    """The whole run's facts (every selected setting): the step's, never one partition's."""
    return {
        "settings": len(run.outcomes),
        "new_attempts": run.new_attempts,
        "attempts": sum(len(o.records) for o in run.outcomes),
        "successes": sum(o.successes for o in run.outcomes),
        "incomplete_settings": [o.setting.key for o in run.incomplete],
        "statuses": run.status_counts(),
        "runs_dir": dg.MetadataValue.path(str(run.runs_dir)),
        "settings_table": dg.MetadataValue.md(
            markdown_table([_setting_row(o, run.runs_dir) for o in run.outcomes])
        ),
    }


def run_summary(run: BenchRun) -> str:
    """The run's totals in one line of its log."""
    statuses = ", ".join(f"{n} {status}" for status, n in run.status_counts().items())
    attempts = sum(len(o.records) for o in run.outcomes)
    return (
        f"this run: {len(run.outcomes)} setting(s), {run.new_attempts} new attempt(s); "
        f"{attempts} attempt(s) recorded in all ({statuses or 'none'}), "
        f"{len(run.incomplete)} setting(s) still short of successes; "
        "each setting's own facts are on its partition's materialization"
    )


def _setting_row(outcome: SettingOutcome, runs_dir: Path) -> dict[str, str | int]:
    last = outcome.records[-1] if outcome.records else None
    return {
        "agent": outcome.setting.agent.id,
        "task": outcome.setting.task.id,
        "budget s": outcome.setting.budget_seconds,
        "attempts": len(outcome.records),
        "successes": outcome.successes,
        "last status": last.status if last else "",
        "last run folder": f"`{run_folder(runs_dir, last.run_id)}`" if last else "",
    }


def attempts_table(outcome: SettingOutcome) -> str:
    """The setting's attempts as a Markdown table; a record's note reads as written (``cell``)."""
    rows = [
        "| attempt | run folder (in runs_dir) | status | score | wall s | note |",
        "|---|---|---|---|---|---|",
    ]
    for r in outcome.records:
        score = "" if r.score is None else f"{r.score:.6g}"
        wall = "" if r.wall_seconds is None else f"{r.wall_seconds:.1f}"
        note = cell(r.error_message or r.validation_message or "", limit=NOTE_LIMIT)
        rows.append(
            f"| {r.attempt_index} | `{r.run_id}` | {r.status} | {score} | {wall} | {note} |"
        )
    return "\n".join(rows)


def cell(text: str, limit: int) -> str:
    """Text from a record (an agent's or a provider's words) as one Markdown table cell that
    reads as written: one line, its first ``limit`` characters, every ASCII punctuation mark
    backslash-escaped (CommonMark's escape: no HTML, emphasis, link or column break)."""
    return MARKDOWN_PUNCTUATION.sub(r"\\\1", " ".join(text.split())[:limit])


def markdown_table(rows: list[dict[str, str | int]]) -> str:
    """Rows of the same columns as a Markdown table (their values are ours: nothing to escape)."""
    if not rows:
        return "(nothing)"
    head = list(rows[0])
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in rows:
        lines.append("| " + " | ".join(str(v) for v in row.values()) + " |")
    return "\n".join(lines)
