"""The report bundles: `tmlbench report` of every suite with runs, published from the snapshot.

One asset for every suite, not one partition per suite: the snapshot it reads is one
unpartitioned asset, rebuilt as a whole whenever any suite's numbers change, and a Dagster run
targets one partition (or one range), so per-suite partitions would be requested as runs of their
own, one per suite, each starting a run worker after the load → dbt → snapshot run, instead of
one more step of that run. Nor are the suites Dagster knows the suites the snapshot holds:
imported results (`tmlbench warehouse import-tml-bench`) form suites no suite file names.
"""

import dagster as dg

from orchestration.assets.warehouse import SNAPSHOT
from orchestration.conditions import on_new_data
from orchestration.metadata import Metadata
from orchestration.resources import DuckDBWarehouse
from warehouse.report.every_suite import BundleFacts, SuiteBundle, publish_every_suite
from warehouse.report.figures import FIGURES

REPORTS = dg.AssetKey("reports")


@dg.asset(
    key=REPORTS,
    group_name="publish",
    deps=[SNAPSHOT],
    # no pool: it reads the published snapshot, a file no writer ever holds (a publish writes a
    # new file and swaps it in), never the warehouse
    automation_condition=on_new_data(),
    kinds={"html"},
    description="The report bundle of every suite with runs (what `tmlbench report` writes: "
    "figures as PNG, SVG and CSV, `LEADERBOARD.md`/`.csv`/`.json`/`.html`, `report.html`, "
    "`provenance.json`, `manifest.json`), read from the published snapshot into "
    "`<reports>/<suite>/` (`reports/` next to the snapshot unless the warehouse resource says "
    "otherwise). Each bundle is written beside the previous one and swapped in whole; the bundle "
    "of a suite the snapshot no longer has runs of is removed.",
)
def reports(
    context: dg.AssetExecutionContext, warehouse: DuckDBWarehouse
) -> dg.MaterializeResult[None]:
    snapshot, root = warehouse.snapshot_file(), warehouse.reports_dir()
    if not snapshot.is_file():
        raise dg.Failure(f"no snapshot at {snapshot}: materialize marts_snapshot first")

    def log(bundle: SuiteBundle) -> None:  # as each suite is done
        (context.log.info if bundle.error is None else context.log.error)(bundle.describe())

    published = publish_every_suite(snapshot, root, on_bundle=log)
    written, failed = published.written, published.failed
    metadata: Metadata = {
        "path": dg.MetadataValue.path(str(root)),
        "suites": dg.MetadataValue.md(bundles_table(written)),
        "bundles": dg.MetadataValue.json(written),
        "removed": published.removed,
    }
    if failed:
        raise dg.Failure(
            f"no report for {len(failed)} of {len(published.bundles)} suites: "
            + "; ".join(f"{suite}: {why}" for suite, why in failed.items()),
            metadata={**metadata, "failed": dg.MetadataValue.json(failed)},
        )
    return dg.MaterializeResult(metadata=metadata)


def bundles_table(written: dict[str, BundleFacts]) -> str:
    """The bundles as a Markdown table (suite ids are plain folder names: nothing to escape)."""
    lines = [
        "| suite | files | figures | settings complete | manifest sha256 |",
        "| --- | --- | --- | --- | --- |",
    ]
    for suite, facts in written.items():
        complete = f"{facts['settings_complete']} of {facts['settings_expected']}"
        if facts["provisional"]:
            complete += " (provisional)"
        lines.append(
            f"| `{suite}` | {facts['files']} | {facts['figures']} of {len(FIGURES)} | {complete} "
            f"| `{facts['manifest_sha256'][:16]}` |"
        )
    return "\n".join(lines) if written else "no suite has runs in the snapshot"
