"""Prepared task data (per task) and agent runs (per setting): thin wrappers over runner.bench."""

import dagster as dg

from orchestration.partitions import setting_partitions, setting_to_task, task_partitions
from orchestration.resources import BenchConfig, SandboxBackend
from runner.audit import describe_prepared
from runner.bench import (
    CpuPool,
    SettingOutcome,
    attempt_runner,
    default_workers,
    ensure_prepared,
    host_cpus,
    run_settings,
    suite_settings,
)
from runner.prepare import prepared_task
from runner.registry import load_task
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
        spec, paths = bench.suite(), bench.paths()
        layout = bench.layout()
        rows = []
        for task_id in context.partition_keys:
            task = load_task(paths.tasks_dir, task_id)
            facts = describe_prepared(ensure_prepared(spec, task, paths, layout))
            context.log.info(f"{task_id}: {facts}")
            rows.append({"task": task_id, **facts})
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
        return dg.MaterializeResult(metadata=metadata)

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
        spec, paths, layout = bench.suite(), bench.paths(), bench.layout()
        by_key = {s.key: s for s in suite_settings(spec, paths)}
        unknown = [k for k in context.partition_keys if k not in by_key]
        if unknown:
            raise dg.Failure(f"settings {unknown} are not in suite {spec.id} (reload definitions)")
        selected = [by_key[k] for k in context.partition_keys]
        cpus = host_cpus()
        start = attempt_runner(
            lambda task_id: prepared_task(layout.data_dir, task_id),
            paths,
            layout.runs_dir,
            lambda plan: sandbox.sandbox(),
            CpuPool(cpus),
            allow_unsafe=sandbox.allow_unsafe,
        )

        def on_done(record, was_new: bool) -> None:
            if was_new:
                context.log.info(f"{record.run_id}: {record.status} score={record.score}")

        outcomes = run_settings(
            selected,
            spec,
            layout.runs_dir,
            start,
            workers=bench.concurrency or default_workers(spec, selected, cpus),
            on_done=on_done,
        )
        metadata = _runs_metadata(outcomes)
        faults = [error for outcome in outcomes for error in outcome.harness_errors]
        if faults:  # everything else is recorded by now
            raise dg.Failure(
                description=f"{len(faults)} harness fault(s): " + "; ".join(faults[:5]),
                metadata=metadata,
            )
        return dg.MaterializeResult(metadata=metadata)

    return prepared_tasks, agent_runs


def _runs_metadata(outcomes: list[SettingOutcome]) -> dict:
    statuses: dict[str, int] = {}
    for outcome in outcomes:
        for status, n in outcome.status_counts().items():
            statuses[status] = statuses.get(status, 0) + n
    metadata: dict = {
        "settings": len(outcomes),
        "new_attempts": sum(o.new for o in outcomes),
        "attempts": sum(len(o.records) for o in outcomes),
        "successes": sum(o.successes for o in outcomes),
        "incomplete_settings": [o.setting.key for o in outcomes if not o.complete],
        "statuses": statuses,
    }
    if len(outcomes) == 1:
        outcome = outcomes[0]
        metadata.update(
            median_score=outcome.median_score(),
            scores=[r.score for r in outcome.records if r.score is not None],
            attempts_table=dg.MetadataValue.md(outcome.markdown()),
        )
    else:
        rows = [
            {
                "setting": o.setting.key,
                "attempts": len(o.records),
                "successes": o.successes,
                "median": o.median_score(),
            }
            for o in outcomes
        ]
        metadata["settings_table"] = dg.MetadataValue.md(_table(rows))
    return metadata


def _table(rows: list[dict]) -> str:
    if not rows:
        return "(nothing)"
    head = list(rows[0])
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in rows:
        cells = [f"{v:.6g}" if isinstance(v, float) else str(v) for v in row.values()]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)
