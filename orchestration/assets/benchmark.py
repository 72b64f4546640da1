"""Prepared task data (per task) and agent runs (per setting) of one suite: ``runner.suites.bench.Bench``
does the work, these assets say in Dagster's terms what it did (metadata a person reads in the UI).

Every suite file gets its own pair, in its own group (``orchestration.suites.SuiteFile``); which
suite an asset runs is its group's, read from the suite's file when it runs.
"""

import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import dagster as dg

from orchestration.partitions import setting_of, settings_partition_key
from orchestration.progress import progress_extra
from orchestration.remedies import AgentRunsConfig, DagsterRemedies
from orchestration.resources import BenchConfig, SandboxBackend
from orchestration.suites import SUITE_TAG, SuiteFile
from runner.attempts import RunRecord
from runner.errors import TmlbenchError
from runner.specs import SuiteSpec
from runner.suites import (
    AttemptDone,
    Bench,
    BenchRun,
    RunRefused,
    SettingOutcome,
    describe_prepared,
    parse_setting_key,
)

# Attempts pin CPUs from one pool per process (runner.suites.scheduling.CpuPool): two processes running
# attempts at once would pin the same CPUs. A backfill of a partition grid is split into several
# runs, so agent runs take a slot of this pool (limit 1 in the instance's dagster.yaml).
ATTEMPTS_POOL = "attempts"

MARKDOWN_PUNCTUATION = re.compile(r"([!-/:-@\[-`{-~])")  # every ASCII punctuation character


def build_benchmark_assets(
    suite_file: SuiteFile,
) -> tuple[dg.AssetsDefinition, dg.AssetsDefinition]:
    """The two partitioned assets of one suite file (its partitions are dynamic: see partitions.py)."""
    prepared_tasks = _prepared_tasks_asset(suite_file)
    return prepared_tasks, _agent_runs_asset(suite_file, prepared_tasks)


def _prepared_tasks_asset(suite_file: SuiteFile) -> dg.AssetsDefinition:
    suite_id = suite_file.stem

    @dg.asset(
        key=suite_file.prepared_tasks_key,
        group_name=suite_file.group,
        partitions_def=suite_file.partitions.tasks,
        backfill_policy=dg.BackfillPolicy.single_run(),
        kinds={"python"},
        description=f"Public/private split of each task of `suites/{suite_id}.yaml` at the "
        "suite's scale (`<data>/<data_subdir>/tasks/<task>`).",
    )
    def prepared_tasks(
        context: dg.AssetExecutionContext, bench: BenchConfig
    ) -> dg.MaterializeResult:
        name_suite_on_run(context, suite_file)
        prepared = _bench(bench, suite_id).prepare(context.partition_keys)
        for task_id, task_data in prepared.items():
            facts = describe_prepared(task_data)
            context.log.info(f"{task_id}: {facts}", extra=progress_extra(task=task_id))
            # each task's partition gets its own facts (see agent_runs)
            context.add_asset_metadata(_prepared_metadata(facts), partition_key=task_id)
        return dg.MaterializeResult()

    return prepared_tasks


def _agent_runs_asset(
    suite_file: SuiteFile, prepared_tasks: dg.AssetsDefinition
) -> dg.AssetsDefinition:
    suite_id = suite_file.stem
    partitions = suite_file.partitions

    @dg.asset(
        key=suite_file.agent_runs_key,
        group_name=suite_file.group,
        partitions_def=partitions.settings,
        deps=[dg.AssetDep(prepared_tasks, partition_mapping=partitions.setting_to_task())],
        backfill_policy=dg.BackfillPolicy.single_run(),
        pool=ATTEMPTS_POOL,
        kinds={"python"},
        description=f"Attempts of each setting of `suites/{suite_id}.yaml` (task × agent@budget) "
        "until it has the suite's number of successes or its attempt ceiling; one record per "
        "attempt under `<runs>/<runs_subdir>/`. Each finished attempt is an observation of its "
        "partition (progress, last status, run folder); each materialized partition shows its "
        "own setting's attempts, statuses and scores.",
    )
    def agent_runs(
        context: dg.AssetExecutionContext,
        config: AgentRunsConfig,
        bench: BenchConfig,
        sandbox: SandboxBackend,
    ) -> dg.MaterializeResult:
        name_suite_on_run(context, suite_file)
        runner = _bench(bench, suite_id, sandbox, DagsterRemedies(suite_file))
        tally = SettingTally(runner.suite, runner.layout.runs_dir)

        def on_progress(done: AttemptDone) -> None:
            tally.add(done.record)
            if not done.new:  # recorded by an earlier run: counted, not announced
                return
            record = done.record
            context.log.info(
                f"{record.run_id}: {record.status} score={record.score} "
                f"({done.settings_done}/{done.settings_total} settings done)",
                extra=progress_extra(
                    status=record.status,
                    settings_done=done.settings_done,
                    settings_total=done.settings_total,
                ),
            )
            context.log_event(
                dg.AssetObservation(
                    asset_key=context.asset_key,
                    partition=str(
                        settings_partition_key(
                            record.agent_id, record.task_id, record.budget_seconds
                        )
                    ),
                    metadata=tally.metadata(record, done),
                )
            )

        keys = [setting_of(key) for key in context.partition_keys]
        try:
            if config.resume_stopped:
                for resumed in runner.resume(keys, by=f"dagster run {context.run.run_id}"):
                    context.log.info(
                        f"resumed {resumed.setting}: {len(resumed.forgiven)} fault(s) no longer "
                        "count toward its ceilings"
                    )
            run = runner.run(keys, on_progress=on_progress)
        except RunRefused as exc:  # a fault every attempt would hit: no attempt started
            raise dg.Failure(  # from None: its cause would repeat the message under a traceback
                description=str(exc),
                metadata={
                    "refused_settings": [
                        str(settings_partition_key(*parse_setting_key(k))) for k in exc.settings
                    ]
                },
            ) from None
        except TmlbenchError as exc:  # e.g. unknown settings: nothing ran
            raise dg.Failure(str(exc)) from exc
        totals = _run_totals(run)
        if run.harness_faults:  # everything else is recorded by now
            raise dg.Failure(
                description=f"{len(run.harness_faults)} harness fault(s): "
                + "; ".join(run.harness_faults[:5]),
                metadata=totals,
            )
        # Dagster records one materialization per partition of the run: each gets its own
        # setting's facts. The run's totals go to its log; as the result's metadata they would
        # be copied onto every partition, as if each setting had made all the run's attempts.
        partition_of = dict(zip(keys, context.partition_keys, strict=True))
        for outcome in run.outcomes:
            context.add_asset_metadata(
                _setting_metadata(outcome, run.runs_dir),
                partition_key=partition_of[outcome.setting.key],
            )
        context.log.info(_run_summary(totals))
        return dg.MaterializeResult()

    return agent_runs


def name_suite_on_run(context: dg.AssetExecutionContext, suite_file: SuiteFile) -> None:
    """Tag the run with its suite (``tmlbench/suite``), however it was launched: a Materialize
    click or a backfill runs Dagster's implicit asset job, which carries no tags of ours. The
    job's and `make run`'s runs have the tag from their launch already. A run that spans suites
    is tagged with each (comma-separated)."""
    run_id = context.run.run_id
    run = context.instance.get_run_by_id(run_id) or context.run  # its tags as they are now
    suites = {s for s in run.tags.get(SUITE_TAG, "").split(",") if s}
    if suite_file.stem not in suites:
        value = ",".join(sorted({*suites, suite_file.stem}))
        context.instance.add_run_tags(run_id, {SUITE_TAG: value})


def _bench(
    bench: BenchConfig,
    suite_id: str,
    sandbox: SandboxBackend | None = None,
    remedies: DagsterRemedies | None = None,
) -> Bench:
    """The suite as its file says now; a broken suite, agent or task file, or a sandbox backend
    that cannot work here, fails here, named, before any attempt."""
    try:
        suite = bench.suite(suite_id)
        if sandbox is None:
            return Bench(suite, bench.paths())
        return Bench(
            suite,
            bench.paths(),
            sandbox.sandbox(),
            concurrency=bench.concurrency,
            allow_unsafe=sandbox.allow_unsafe,
            remedies=remedies,
        )
    except TmlbenchError as exc:
        raise dg.Failure(str(exc)) from exc


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

    def metadata(self, record: RunRecord, done: AttemptDone) -> dict:
        counts = self.counts[(record.agent_id, record.task_id, record.budget_seconds)]
        metadata: dict = {
            "progress": f"{counts.successes}/{self.wanted} successes after {counts.attempts} "
            f"attempt(s) (at most {self.ceiling})",
            "attempts": counts.attempts,
            "attempts_max": self.ceiling,
            "successes": counts.successes,
            "successes_wanted": self.wanted,
            "last_status": record.status,
            "last_run": dg.MetadataValue.path(str(self.runs_dir / record.run_id)),
            # the run's, not the setting's: how far the whole run is
            "settings_done_in_run": f"{done.settings_done}/{done.settings_total}",
        }
        if record.score is not None:
            metadata["last_score"] = record.score
        return metadata


def _prepared_metadata(facts: dict) -> dict:
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


def _setting_metadata(outcome: SettingOutcome, runs_dir: Path) -> dict:
    """One setting's facts, for its partition: all its attempts, earlier runs' included. What
    the scores mean (medians, ranks) is in the marts, built downstream."""
    records = outcome.records
    metadata: dict = {
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
        "attempts_table": dg.MetadataValue.md(_attempts_table(outcome)),
        "runs_dir": dg.MetadataValue.path(str(runs_dir)),
    }
    if records:
        last = records[-1]
        metadata["last_status"] = last.status
        metadata["last_run"] = dg.MetadataValue.path(str(runs_dir / last.run_id))
    return metadata


def _run_totals(run: BenchRun) -> dict:
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
            _table([_setting_row(o, run.runs_dir) for o in run.outcomes])
        ),
    }


def _setting_row(outcome: SettingOutcome, runs_dir: Path) -> dict:
    last = outcome.records[-1] if outcome.records else None
    return {
        "agent": outcome.setting.agent.id,
        "task": outcome.setting.task.id,
        "budget s": outcome.setting.budget_seconds,
        "attempts": len(outcome.records),
        "successes": outcome.successes,
        "last status": last.status if last else "",
        "last run folder": f"`{runs_dir / last.run_id}`" if last else "",
    }


def _run_summary(totals: dict) -> str:
    statuses = ", ".join(f"{n} {status}" for status, n in totals["statuses"].items())
    return (
        f"this run: {totals['settings']} setting(s), {totals['new_attempts']} new attempt(s); "
        f"{totals['attempts']} attempt(s) recorded in all ({statuses or 'none'}), "
        f"{len(totals['incomplete_settings'])} setting(s) still short of successes; "
        "each setting's own facts are on its partition's materialization"
    )


def _attempts_table(outcome: SettingOutcome) -> str:
    rows = [
        "| attempt | run folder (in runs_dir) | status | score | wall s | note |",
        "|---|---|---|---|---|---|",
    ]
    for r in outcome.records:
        score = "" if r.score is None else f"{r.score:.6g}"
        wall = "" if r.wall_seconds is None else f"{r.wall_seconds:.1f}"
        note = _cell(r.error_message or r.validation_message or "", limit=80)
        rows.append(
            f"| {r.attempt_index} | `{r.run_id}` | {r.status} | {score} | {wall} | {note} |"
        )
    return "\n".join(rows)


def _cell(text: str, limit: int) -> str:
    """Text from a record (an agent's or a provider's words) as one Markdown table cell that
    reads as written: one line, its first ``limit`` characters, every ASCII punctuation mark
    backslash-escaped (CommonMark's escape: no HTML, emphasis, link or column break)."""
    return MARKDOWN_PUNCTUATION.sub(r"\\\1", " ".join(text.split())[:limit])


def _table(rows: list[dict]) -> str:
    if not rows:
        return "(nothing)"
    head = list(rows[0])
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in rows:
        cells = [f"{v:.6g}" if isinstance(v, float) else str(v) for v in row.values()]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)
