"""The report bundles: `tmlbench report` of every suite with runs, published from the snapshot.

One asset for every suite, not one partition per suite: the snapshot it reads is one
unpartitioned asset, rebuilt as a whole whenever any suite's numbers change, and a Dagster run
targets one partition (or one range), so per-suite partitions would be requested as runs of their
own, one per suite, each starting a run worker after the load → dbt → snapshot run, instead of
one more step of that run. Nor are the suites Dagster knows the suites the snapshot holds:
imported results (`tmlbench warehouse import-tml-bench`) form suites no suite file names.
"""

import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

import dagster as dg

from orchestration.assets.warehouse import SNAPSHOT
from orchestration.conditions import on_new_data
from orchestration.resources import DuckDBWarehouse
from warehouse.db import connect
from warehouse.report import publish_report
from warehouse.report.figures import FIGURES
from warehouse.report.publish import FOLDER_NAME, bundle_folder, bundle_suite

REPORTS = dg.AssetKey("reports")
SUITES_WITH_RUNS = "select suite_id from display.filter_options where has_runs order by suite_id"


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
def reports(context: dg.AssetExecutionContext, warehouse: DuckDBWarehouse) -> dg.MaterializeResult:
    snapshot, root = warehouse.snapshot_file(), warehouse.reports_dir()
    if not snapshot.is_file():
        raise dg.Failure(f"no snapshot at {snapshot}: materialize marts_snapshot first")
    written: dict[str, dict[str, Any]] = {}
    failed: dict[str, str] = {}
    con = connect(snapshot, read_only=True)
    try:
        suites = [suite for (suite,) in con.execute(SUITES_WITH_RUNS).fetchall()]
        for suite in suites:
            # one suite's failure (a suite id no folder can have, a chart the renderer refuses)
            # leaves the other suites' bundles published; the asset fails below, naming it
            try:
                folder = bundle_folder(root, suite)
                manifest = publish_report(con, suite, folder, f"the snapshot {snapshot}")
            except Exception as exc:
                failed[suite] = f"{type(exc).__name__}: {exc}"
                context.log.error(f"report of suite {suite}: {failed[suite]}")
                continue
            written[suite] = bundle_facts(manifest.out_dir, len(manifest.empty_figures))
            context.log.info(f"report of suite {suite}: {manifest.out_dir}")
    finally:
        con.close()
    removed = remove_stale_bundles(root, keep=set(suites))
    metadata = {
        "path": dg.MetadataValue.path(str(root)),
        "suites": dg.MetadataValue.md(bundles_table(written)),
        "bundles": dg.MetadataValue.json(written),
        "removed": removed,
    }
    if failed:
        raise dg.Failure(
            f"no report for {len(failed)} of {len(suites)} suites: "
            + "; ".join(f"{suite}: {why}" for suite, why in failed.items()),
            metadata={**metadata, "failed": dg.MetadataValue.json(failed)},
        )
    return dg.MaterializeResult(metadata=metadata)


def bundle_facts(folder: Path, empty_figures: int) -> dict[str, Any]:
    """What the asset's metadata says of one published bundle, read from its own files."""
    manifest = (folder / "manifest.json").read_bytes()
    suite = json.loads((folder / "provenance.json").read_text(encoding="utf-8"))["suite"]
    return {
        "folder": str(folder),
        "files": len(json.loads(manifest)["files"]) + 1,  # and manifest.json itself
        "figures": len(FIGURES) - empty_figures,
        "provisional": bool(suite.get("provisional")),
        "settings_complete": suite.get("settings_complete"),
        "settings_expected": suite.get("settings_expected"),
        "manifest_sha256": hashlib.sha256(manifest).hexdigest(),
    }


def bundles_table(written: dict[str, dict[str, Any]]) -> str:
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


def remove_stale_bundles(root: Path, keep: set[str]) -> list[str]:
    """Remove the bundles under ``root`` of suites not in ``keep``; returns their suite ids.

    A bundle is a folder named after a suite whose ``manifest.json`` names that suite (what
    ``publish_report`` writes): anything else under ``root`` is not ours, and is left alone.
    """
    removed = []
    for folder in sorted(root.iterdir()) if root.is_dir() else []:
        name = folder.name
        if name not in keep and FOLDER_NAME.fullmatch(name) and bundle_suite(folder) == name:
            shutil.rmtree(folder)
            removed.append(name)
    return removed
