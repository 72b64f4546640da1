"""Asset checks on the benchmark's integrity: coverage, manifests under runs, no private paths."""

import dagster as dg

from orchestration.resources import BenchConfig
from orchestration.suites import SuiteFile
from runner.suites import (
    coverage_gaps,
    manifest_drift,
    private_references,
    suite_records,
    suite_settings,
)
from runner.tasks import prepared_task


def build_checks(
    suite_file: SuiteFile, prepared_tasks: dg.AssetsDefinition, agent_runs: dg.AssetsDefinition
) -> list[dg.AssetChecksDefinition]:
    """The checks of one suite's assets (the suite's file is read when a check runs)."""
    suite_id = suite_file.stem

    @dg.asset_check(asset=agent_runs, description="every setting of the suite has N successes")
    def suite_coverage_complete(bench: BenchConfig) -> dg.AssetCheckResult:
        suite, paths = bench.suite(suite_id), bench.paths()
        layout = bench.layout(suite)
        settings = suite_settings(suite, paths)
        gaps = coverage_gaps(settings, suite_records(layout), suite.attempts)
        return dg.AssetCheckResult(
            passed=not gaps,
            severity=dg.AssetCheckSeverity.WARN,
            metadata={
                "settings": len(settings),
                "incomplete": len(gaps),
                "successes_of_incomplete": dg.MetadataValue.json(dict(list(gaps.items())[:50])),
                "runs_dir": str(layout.runs_dir),
            },
        )

    @dg.asset_check(
        asset=agent_runs, description="no record's paths point into a private directory"
    )
    def no_private_paths_in_records(bench: BenchConfig) -> dg.AssetCheckResult:
        layout = bench.layout(bench.suite(suite_id))
        records = suite_records(layout)
        problems = private_references(records)
        return dg.AssetCheckResult(
            passed=not problems, metadata={"records": len(records), "problems": problems[:20]}
        )

    @dg.asset_check(
        asset=prepared_tasks,
        description="no task's public manifest changed under the runs recorded on it",
    )
    def manifests_unchanged_under_runs(bench: BenchConfig) -> dg.AssetCheckResult:
        layout = bench.layout(bench.suite(suite_id))
        records = suite_records(layout)
        drift = manifest_drift(records, lambda task_id: prepared_task(layout.data_dir, task_id))
        return dg.AssetCheckResult(
            passed=not drift, metadata={"records": len(records), "drift": drift[:20]}
        )

    return [suite_coverage_complete, no_private_paths_in_records, manifests_unchanged_under_runs]
