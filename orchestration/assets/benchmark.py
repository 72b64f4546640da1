"""Prepared task data (per task) and agent runs (per setting): ``runner.bench.Bench`` does the work,
these assets say in Dagster's terms what it did (metadata a person reads in the UI)."""

import dagster as dg

from orchestration.partitions import setting_partitions, setting_to_task, task_partitions
from orchestration.progress import progress_extra
from orchestration.resources import BenchConfig, SandboxBackend
from runner.audit import describe_prepared
from runner.bench import Bench, BenchRun
from runner.errors import TmlbenchError
from runner.scheduling import AttemptDone
from runner.settings import SettingOutcome
from runner.specs import SuiteSpec

GROUP = "benchmark"


def build_benchmark_assets(suite: SuiteSpec) -> tuple[dg.AssetsDefinition, dg.AssetsDefinition]:
    """The two partitioned assets of ``suite`` (partitions are fixed when definitions load)."""

    @dg.asset(
        name="prepared_tasks",
        group_name=GROUP,
        partitions_def=task_partitions(suite),
        backfill_policy=dg.BackfillPolicy.single_run(),
        kinds={"python"},
        description="Public/private split of each task at the suite's scale (data/<suite>/tasks/<task>).",
    )
    def prepared_tasks(
        context: dg.AssetExecutionContext, bench: BenchConfig
    ) -> dg.MaterializeResult:
        prepared = Bench(bench.suite(), bench.paths()).prepare(context.partition_keys)
        rows = []
        for task_id, task_data in prepared.items():
            facts = describe_prepared(task_data)
            context.log.info(f"{task_id}: {facts}", extra=progress_extra(task=task_id))
            rows.append({"task": task_id, **facts})
        return dg.MaterializeResult(metadata=_prepared_metadata(rows))

    @dg.asset(
        name="agent_runs",
        group_name=GROUP,
        partitions_def=setting_partitions(suite),
        deps=[dg.AssetDep(prepared_tasks, partition_mapping=setting_to_task(suite))],
        backfill_policy=dg.BackfillPolicy.single_run(),
        kinds={"python"},
        description="Attempts of each setting (agent|task|budget) until it has the suite's number "
        "of successes or its attempt ceiling; one record per attempt under runs/<suite>/.",
    )
    def agent_runs(
        context: dg.AssetExecutionContext, bench: BenchConfig, sandbox: SandboxBackend
    ) -> dg.MaterializeResult:
        runner = Bench(
            bench.suite(),
            bench.paths(),
            sandbox.sandbox(),
            concurrency=bench.concurrency,
            allow_unsafe=sandbox.allow_unsafe,
        )

        def on_progress(done: AttemptDone) -> None:
            if done.new:
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

        try:
            run = runner.run(context.partition_keys, on_progress=on_progress)
        except TmlbenchError as exc:  # e.g. unknown settings, tampered data: nothing ran
            raise dg.Failure(str(exc)) from exc
        metadata = _runs_metadata(run)
        if run.harness_faults:  # everything else is recorded by now
            raise dg.Failure(
                description=f"{len(run.harness_faults)} harness fault(s): "
                + "; ".join(run.harness_faults[:5]),
                metadata=metadata,
            )
        return dg.MaterializeResult(metadata=metadata)

    return prepared_tasks, agent_runs


def _prepared_metadata(rows: list[dict]) -> dict:
    metadata: dict = {"tasks": len(rows), "table": dg.MetadataValue.md(_table(rows))}
    if len(rows) == 1:
        facts = rows[0]
        metadata.update(
            rows=facts["train_rows"] + facts["test_rows"],
            train_rows=facts["train_rows"],
            test_rows=facts["test_rows"],
            columns=facts["columns"],
            manifest_sha256=facts["manifest_sha256"],
            bayes_optimal_score=facts["bayes_optimal_score"],
            constant_score=facts["constant_score"],
        )
    return metadata


def _runs_metadata(run: BenchRun) -> dict:
    """Facts of the run; what the scores mean (medians, ranks) is in the marts, built downstream."""
    outcomes = run.outcomes
    metadata: dict = {
        "settings": len(outcomes),
        "new_attempts": run.new_attempts,
        "attempts": sum(len(o.records) for o in outcomes),
        "successes": sum(o.successes for o in outcomes),
        "incomplete_settings": [o.setting.key for o in run.incomplete],
        "statuses": run.status_counts(),
    }
    if len(outcomes) == 1:
        (outcome,) = outcomes
        metadata.update(
            scores=[r.score for r in outcome.records if r.score is not None],
            attempts_table=dg.MetadataValue.md(_attempts_table(outcome)),
        )
    else:
        rows = [
            {"setting": o.setting.key, "attempts": len(o.records), "successes": o.successes}
            for o in outcomes
        ]
        metadata["settings_table"] = dg.MetadataValue.md(_table(rows))
    return metadata


def _attempts_table(outcome: SettingOutcome) -> str:
    rows = [
        "| attempt | run id | status | score | wall s | note |",
        "|---|---|---|---|---|---|",
    ]
    for r in outcome.records:
        score = "" if r.score is None else f"{r.score:.6g}"
        wall = "" if r.wall_seconds is None else f"{r.wall_seconds:.1f}"
        note = (r.error_message or r.validation_message or "").replace("|", "/")[:80]
        rows.append(
            f"| {r.attempt_index} | `{r.run_id}` | {r.status} | {score} | {wall} | {note} |"
        )
    return "\n".join(rows)


def _table(rows: list[dict]) -> str:
    if not rows:
        return "(nothing)"
    head = list(rows[0])
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in rows:
        cells = [f"{v:.6g}" if isinstance(v, float) else str(v) for v in row.values()]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)
