"""`make run`: materialize a suite end to end through Dagster, in this process, quietly.

    python -m orchestration.materialize --suite demo

Three phases, because the graph has two partitionings: prepared tasks (all task partitions in
one run), agent runs (all settings in one run, attempts in parallel on pinned CPUs), then the
warehouse: the raw load, and, unless the marts are already built from exactly what the warehouse
now holds, every dbt model with its tests, the snapshot and the report bundles. The terminal shows a progress bar per
phase and a short summary; everything the runs print or log (Dagster's events, dbt's output)
goes to ``<data>/logs/<time>.log``, whose path is printed. Each run is also recorded in the
Dagster instance ($DAGSTER_HOME, when set), so `make ui` shows them with their logs.

Nothing new, nothing rebuilt: the snapshot's last materialization in the instance says what it
was built from (``marts_inputs_version``: the raw tables' content and the dbt project); when the
warehouse holds the same after the load, dbt, the snapshot and the reports are skipped.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import os
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import dagster as dg
from rich.console import Console

from orchestration.instance_history import snapshot_built_from
from orchestration.partitions import SuiteKeys
from orchestration.progress import Counts, Phase, SuiteProgress
from orchestration.resources import BenchConfig, DuckDBWarehouse, Resources, default_resources
from orchestration.schedules import partition_range_tags
from orchestration.sensors import problems_message, sync_suite
from orchestration.suites import SuiteFile, scan_specs
from runner.errors import SpecError
from warehouse.marts_inputs import has_marts, marts_inputs_version

# The log file gets every event (DEBUG); a person reads the bars and the summary.
RUN_CONFIG = {"loggers": {"console": {"config": {"log_level": "DEBUG"}}, "progress": {}}}


@dataclass(frozen=True)
class Step:
    """One Dagster run of `make run`: the assets it selects and what its bar counts."""

    job_name: str
    title: str
    selection: dg.AssetSelection
    partition_range: list[str] | None  # first and last key of the range one run covers
    partitions: int | None  # how many partitions the range holds; None: unpartitioned
    counts: Counts
    unit: str
    # Run these first, then the rest of the selection only if the marts are behind them.
    first: dg.AssetSelection | None = None

    def total(self, graph: dg.AssetGraph | None = None) -> int:
        if self.partitions is not None:
            return self.partitions
        assert graph is not None, "an unpartitioned step counts its assets and checks"
        return len(self.selection.resolve(graph)) + len(self.selection.resolve_checks(graph))


def suite_steps(suite: SuiteFile, keys: SuiteKeys) -> list[Step]:
    """The three runs over ``keys``, the suite's partitions in the order the instance holds them.

    Each job is named after the suite (the Runs page shows a job's name, not its assets), the
    agent runs' as the suite's job in the UI (``schedules.build_automation``), which selects
    the same asset."""
    from orchestration.assets.warehouse import RAW_KEYS  # see materialize_suite

    benchmark = (suite.prepared_tasks_key, suite.agent_runs_key)
    settings = suite.partitions.settings_range(keys)
    return [
        Step(
            f"{suite.ident}_prepare_tasks", "prepare tasks", dg.AssetSelection.assets(benchmark[0]),
            [keys.tasks[0], keys.tasks[-1]], len(keys.tasks), "tasks", "tasks",
        ),
        Step(
            f"{suite.ident}_agent_runs", "agent runs", dg.AssetSelection.assets(benchmark[1]),
            list(settings or ()), len(keys.tasks) * len(keys.agent_budgets), "attempts", "settings",
        ),
        Step(
            f"{suite.ident}_warehouse", "warehouse, dbt, snapshot, reports",
            dg.AssetSelection.all() - dg.AssetSelection.assets(*benchmark),
            None, None, "assets", "assets and checks", first=dg.AssetSelection.assets(*RAW_KEYS),
        ),
    ]  # fmt: skip


def materialize_suite(
    suite_id: str,
    resources: Resources | None = None,
    instance: dg.DagsterInstance | None = None,
    progress: SuiteProgress | None = None,
) -> list[dg.ExecuteInProcessResult]:
    """Run the three steps in order, stopping at the first that fails; ``progress`` sees them.

    The suite's partitions are first brought in step with its file, in ``instance`` (a
    throwaway one if None), as the sensor would.
    """
    # Imported here: loading the definitions module lists the default suites folder, and
    # Dagster's warnings about it belong in the log file, under main's redirection.
    from orchestration.definitions import build_defs

    resources = resources or default_resources()
    bench = resources["bench"]
    suite = SuiteFile(suite_id)
    scan = scan_specs(bench.paths(), [suite_id])
    if suite_id not in scan.keys:
        bench.suite(suite_id)  # an unknown or broken suite file: its own SpecError says why
        raise SpecError(problems_message(scan))
    instance = instance or dg.DagsterInstance.ephemeral()
    keys = sync_suite(instance, suite, scan.keys[suite_id])
    defs = build_defs([suite], resources)
    graph = defs.resolve_asset_graph()
    progress = progress or SuiteProgress(Console(quiet=True))
    steps = [(step, _runs_of(step)) for step in suite_steps(suite, keys)]
    # One set of definitions with every run's job: the asset graph (hundreds of dbt assets) is
    # resolved once, not once per run.
    jobs = dg.Definitions(
        assets=defs.assets,
        asset_checks=defs.asset_checks,
        jobs=[
            dg.define_asset_job(run.job_name, selection=run.selection, tags=suite.run_tags)
            for _, runs in steps
            for run in runs
        ],
        resources=defs.resources,
        loggers={"console": dg.colored_console_logger, "progress": progress.logger()},
    )
    results: list[dg.ExecuteInProcessResult] = []
    for step, runs in steps:
        progress.begin(Phase(step.title, step.total(graph), step.counts, step.unit))
        for n, run in enumerate(runs):
            if n and marts_current(resources["warehouse"], instance):
                progress.note("nothing new: dbt, the snapshot and the reports are up to date")
                break
            results.append(_execute(jobs, run, instance))
            if not results[-1].success:
                break
        progress.end(results[-1].success, _first_failure(results[-1]))
        if not results[-1].success:
            break
    return results


def _runs_of(step: Step) -> list[Step]:
    """The step's runs: itself, or its ``first`` part and then the rest (if the marts are behind)."""
    if step.first is None:
        return [step]
    return [
        replace(step, job_name=f"{step.job_name}_load", selection=step.first),
        replace(step, selection=step.selection - step.first),
    ]


def marts_current(warehouse: DuckDBWarehouse, instance: dg.DagsterInstance) -> bool:
    """Were the snapshot, the marts and the reports last built from what the warehouse holds now?

    Yes when the instance's last materialization of the snapshot was built from the warehouse's
    current ``marts_inputs_version``, the snapshot file and the marts are there, and the report
    bundles were written since (a report step that failed is run again). An instance without
    that history (a throwaway one, a first run) says no.
    """
    from orchestration.assets.report import REPORTS
    from orchestration.assets.warehouse import SNAPSHOT

    if not warehouse.snapshot_file().is_file():
        return False
    built_from = snapshot_built_from(instance, SNAPSHOT, REPORTS)
    if built_from is None:
        return False
    with warehouse.connection(read_only=True) as con:
        return has_marts(con) and built_from == marts_inputs_version(con)


def _execute(
    jobs: dg.Definitions, step: Step, instance: dg.DagsterInstance
) -> dg.ExecuteInProcessResult:
    """One run of ``step`` (what ``dg.materialize`` does, with a named job and our loggers)."""
    keys = step.partition_range
    return jobs.resolve_job_def(step.job_name).execute_in_process(
        run_config=RUN_CONFIG,
        instance=instance,
        tags=partition_range_tags(keys[0], keys[-1]) if keys else None,
        raise_on_error=False,
    )


def _first_failure(result: dg.ExecuteInProcessResult) -> str:
    """The first failed step and the root of its error, in one line."""
    for event in result.get_step_failure_events():
        error = event.step_failure_data.error
        while error is not None and error.cause is not None:
            error = error.cause  # Dagster wraps what the asset raised
        lines = error.message.strip().splitlines() if error else []
        return f"{event.step_key}: {lines[0] if lines else 'failed'}"
    return ""


@contextlib.contextmanager
def output_to(log_file: Path) -> Iterator[Console]:
    """Send everything written to stdout/stderr — by Python, dbt or any child — to ``log_file``,
    and yield a console on the real terminal.

    At the file-descriptor level, because dagster-dbt echoes dbt's output on stdout, Dagster's
    console logger and Python's warnings write to stderr, and child processes inherit both.
    """
    log_file.parent.mkdir(parents=True, exist_ok=True)
    sys.stdout.flush()
    sys.stderr.flush()
    saved = {fd: os.dup(fd) for fd in (1, 2)}
    terminal = os.fdopen(os.dup(saved[1]), "w", buffering=1, encoding="utf-8")
    try:
        with open(log_file, "a", encoding="utf-8") as log:
            for fd in (1, 2):
                os.dup2(log.fileno(), fd)
            try:
                # Not a terminal (CI, a pipe): wide enough that the final bars stay readable.
                yield Console(file=terminal, width=None if terminal.isatty() else 120)
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                for fd, copy in saved.items():
                    os.dup2(copy, fd)
    finally:
        for copy in saved.values():
            os.close(copy)
        terminal.close()


def log_path(bench: BenchConfig) -> Path:
    return bench.paths().data_dir / "logs" / f"{time.strftime('%Y%m%d-%H%M%S')}.log"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suite", default="demo")
    args = parser.parse_args(argv)
    resources = default_resources()
    log_file = log_path(resources["bench"])
    # Runs are recorded where `make ui` looks when DAGSTER_HOME is set; else in a throwaway instance.
    instance = dg.DagsterInstance.get() if os.environ.get("DAGSTER_HOME") else None
    with output_to(log_file) as console:
        console.print(f"suite {args.suite}: logs in {log_file}", markup=False, highlight=False)
        # Imported before the freeze, so that it covers the definitions' modules too (and here,
        # under the redirection, so that their warnings go to the log file).
        import orchestration.definitions  # noqa: F401

        _frozen_heap()
        with SuiteProgress(console) as progress:
            results = materialize_suite(args.suite, resources, instance, progress)
        warehouse = resources["warehouse"]
        ok = all(r.success for r in results)
        published = (
            [
                f"marts published: {warehouse.snapshot_file()}",
                f"report bundles: {warehouse.reports_dir()}",
            ]
            if ok
            else []
        )
        progress.summary(str(log_file), published)
    return 0 if ok else 1


def _frozen_heap() -> None:
    """Keep the cyclic collector off everything built so far (Dagster's and dbt's modules, the
    definitions: ~400k objects, collected first so no garbage is kept): its full collections
    walk all of them again and again, during the runs and while the interpreter shuts down
    (each ~1 s of a 10 s `make run` here). For this command only: a frozen object is never
    collected."""
    gc.collect()
    gc.freeze()


if __name__ == "__main__":
    code = main()
    gc.freeze()  # no full collection at shutdown either (a collection first would be one)
    sys.exit(code)
