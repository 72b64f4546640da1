"""Prepared task data (per task) and agent runs (per setting) of one suite: ``runner.suites.bench.Bench``
does the work, these assets say in Dagster's terms what it did (``orchestration.metadata``: what a
person reads in the UI).

Every suite file gets its own pair, in its own group (``orchestration.suites.SuiteFile``); which
suite an asset runs is its group's, read from the suite's file when it runs.
"""

import dagster as dg

from orchestration.instance_history import tag_run_with_suite
from orchestration.metadata import (
    AttemptReporter,
    prepared_metadata,
    run_summary,
    run_totals,
    setting_metadata,
)
from orchestration.partitions import setting_of
from orchestration.progress import progress_extra
from orchestration.remedies import AgentRunsConfig, DagsterRemedies, failures_named
from orchestration.resources import BenchConfig, SandboxBackend
from orchestration.suites import SuiteFile
from runner.suites import Bench, describe_prepared

# Attempts pin CPUs from one pool per process (runner.suites.scheduling.CpuPool): two processes running
# attempts at once would pin the same CPUs. A backfill of a partition grid is split into several
# runs, so agent runs take a slot of this pool (limit 1 in the instance's dagster.yaml).
ATTEMPTS_POOL = "attempts"


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
    ) -> dg.MaterializeResult[None]:
        # a Materialize click runs Dagster's implicit job, which carries no tags of ours
        tag_run_with_suite(context.instance, context.run, suite_id)
        with failures_named():  # a broken suite or task file fails here, named
            suite_bench = Bench(bench.suite(suite_id), bench.paths())
        for task_id, task_data in suite_bench.prepare(context.partition_keys).items():
            facts = describe_prepared(task_data)
            context.log.info(f"{task_id}: {facts}", extra=progress_extra(task=task_id))
            # each task's partition gets its own facts (see agent_runs)
            context.add_asset_metadata(prepared_metadata(facts), partition_key=task_id)
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
    ) -> dg.MaterializeResult[None]:
        tag_run_with_suite(context.instance, context.run, suite_id)
        keys = [setting_of(key) for key in context.partition_keys]
        # a broken spec file, a sandbox backend that cannot work here, a run refused (a fault
        # every attempt would hit: no attempt started), unknown settings: named, nothing ran
        with failures_named():
            suite_bench = _bench(suite_file, bench, sandbox)
            if config.resume_stopped:
                for resumed in suite_bench.resume(keys, by=f"dagster run {context.run.run_id}"):
                    context.log.info(
                        f"resumed {resumed.setting}: {len(resumed.forgiven)} fault(s) no longer "
                        "count toward its ceilings"
                    )
            reporter = AttemptReporter(context, suite_bench.suite, suite_bench.layout.runs_dir)
            run = suite_bench.run(keys, on_progress=reporter)
        if run.harness_faults:  # everything else is recorded by now
            raise dg.Failure(
                description=f"{len(run.harness_faults)} harness fault(s): "
                + "; ".join(run.harness_faults[:5]),
                metadata=run_totals(run),
            )
        partition_of = dict(zip(keys, context.partition_keys, strict=True))
        for outcome in run.outcomes:  # each setting's own facts, on its own partition
            context.add_asset_metadata(
                setting_metadata(outcome, run.runs_dir),
                partition_key=partition_of[outcome.setting.key],
            )
        context.log.info(run_summary(run))
        return dg.MaterializeResult()

    return agent_runs


def _bench(suite_file: SuiteFile, bench: BenchConfig, sandbox: SandboxBackend) -> Bench:
    """The suite as its file says now, its attempts in the sandbox resource's backend, its
    refusals worded in the UI's terms."""
    return Bench(
        bench.suite(suite_file.stem),
        bench.paths(),
        sandbox.sandbox(),
        concurrency=bench.concurrency,
        allow_unsafe=sandbox.allow_unsafe,
        remedies=DagsterRemedies(suite_file),
    )
