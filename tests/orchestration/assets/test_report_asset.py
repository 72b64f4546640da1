"""Dagster's ``reports`` asset, materialized for real over the session's hand-made snapshot
(``app_snapshot``: suites demo, provisional, and other with runs; idle without): one bundle per suite
with runs under the reports folder, the previous bundle replaced whole, a gone suite's removed."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import dagster as dg
import pytest

from orchestration.assets.report import REPORTS, reports
from orchestration.resources import DuckDBWarehouse
from warehouse.report.figures import FIGURES

# integration: the reports asset materialized on app_snapshot (a dbt build)
pytestmark = pytest.mark.integration


def _materialize(snapshot: Path, root: Path) -> dg.MaterializeResult:
    warehouse = DuckDBWarehouse(
        path=str(root / "unused.duckdb"), snapshot=str(snapshot), reports=str(root / "reports")
    )
    result = dg.materialize([reports], resources={"warehouse": warehouse})
    assert result.success
    (event,) = result.asset_materializations_for_node(REPORTS.path[0])
    return event.metadata


def test_the_asset_publishes_each_suite_with_runs_and_replaces_its_bundle_whole(
    app_snapshot: Path, tmp_path: Path
):
    metadata = _materialize(app_snapshot, tmp_path)
    root = tmp_path / "reports"
    # idle has no runs; nothing else (a folder being written) is left
    assert sorted(p.name for p in root.iterdir()) == ["demo", "other"]
    assert sorted(metadata["bundles"].value) == ["demo", "other"]
    demo = root / "demo"
    assert {"report.html", "LEADERBOARD.md", "manifest.json"} <= {p.name for p in demo.iterdir()}
    manifest = (demo / "manifest.json").read_bytes()
    facts = metadata["bundles"].value["demo"]
    assert facts["manifest_sha256"] == hashlib.sha256(manifest).hexdigest()
    assert facts["files"] == len(json.loads(manifest)["files"]) + 1
    assert facts["figures"] == len(FIGURES) == len(list((demo / "figures").glob("*.svg")))
    assert facts["provisional"] is True
    assert facts["settings_complete"] < facts["settings_expected"]
    complete = f"{facts['settings_complete']} of {facts['settings_expected']} (provisional)"
    assert complete in metadata["suites"].value and "`demo`" in metadata["suites"].value
    assert metadata["path"].value == str(root)

    # what the next bundle does not have must not survive it; a gone suite's bundle goes, what
    # is not a bundle of ours stays
    (demo / "figures" / "left_over.png").write_bytes(b"old")
    gone = root / "gone"
    (gone / "figures").mkdir(parents=True)
    (gone / "manifest.json").write_text(json.dumps({"suite_id": "gone", "files": {}}))
    notes = root / "notes"
    notes.mkdir()
    (notes / "manifest.json").write_text(json.dumps({"suite_id": "someone else's"}))
    before = demo.stat().st_ino

    metadata = _materialize(app_snapshot, tmp_path)
    assert sorted(p.name for p in root.iterdir()) == ["demo", "notes", "other"]
    assert metadata["removed"].value == ["gone"]
    assert demo.stat().st_ino != before  # a new folder swapped in, not the old one rewritten
    assert not (demo / "figures" / "left_over.png").exists()
    # the same snapshot, the same bundle
    assert metadata["bundles"].value["demo"]["manifest_sha256"] == facts["manifest_sha256"]


def test_the_asset_fails_without_a_snapshot(tmp_path: Path):
    warehouse = DuckDBWarehouse(snapshot=str(tmp_path / "none.duckdb"), reports=str(tmp_path))
    result = dg.materialize([reports], resources={"warehouse": warehouse}, raise_on_error=False)
    assert not result.success
    (failure,) = [e for e in result.all_events if e.is_step_failure]
    assert "no snapshot at" in str(failure.step_failure_data.error.message)


def test_one_suites_failure_leaves_the_others_published_and_fails_the_asset_naming_it(
    app_snapshot: Path, tmp_path: Path, monkeypatch
):
    from warehouse.report import every_suite

    def publish_but_other(con, suite, folder, source):  # a chart the renderer refuses, say
        if suite == "other":
            raise ValueError("the renderer refused a chart")
        return publish_report(con, suite, folder, source)

    publish_report = every_suite.publish_report
    monkeypatch.setattr(every_suite, "publish_report", publish_but_other)
    warehouse = DuckDBWarehouse(snapshot=str(app_snapshot), reports=str(tmp_path / "reports"))
    result = dg.materialize([reports], resources={"warehouse": warehouse}, raise_on_error=False)
    assert not result.success
    (failure,) = [e for e in result.all_events if e.is_step_failure]
    message = str(failure.step_failure_data.error.message)
    assert "no report for 1 of 2 suites: other: ValueError: the renderer refused a chart" in message
    assert sorted(p.name for p in (tmp_path / "reports").iterdir()) == ["demo"]
