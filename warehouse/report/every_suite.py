"""Every suite's bundle from one snapshot (what Dagster's ``reports`` asset publishes).

Each suite with runs in the snapshot gets its bundle published under ``<reports>/<suite>/``
(``publish_report``: swapped in whole); one suite whose report fails (a suite id no folder can
have, a chart the renderer refuses) leaves the others published, and is named. The bundles of
suites the snapshot no longer has runs of are removed; anything under ``<reports>`` that is not a
bundle of ours is left alone.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypedDict

from warehouse.db import connect
from warehouse.report.figures import FIGURES
from warehouse.report.publish import FOLDER_NAME, bundle_folder, bundle_suite, publish_report

SUITES_WITH_RUNS = "select suite_id from display.filter_options where has_runs order by suite_id"


class BundleFacts(TypedDict):
    """What one published bundle holds, read from its own files."""

    folder: str
    files: int
    figures: int
    provisional: bool
    settings_complete: int | None
    settings_expected: int | None
    manifest_sha256: str


@dataclass(frozen=True)
class SuiteBundle:
    """One suite's outcome: its bundle's facts, or why it has none."""

    suite: str
    facts: BundleFacts | None = None
    error: str | None = None

    def describe(self) -> str:
        done = self.error if self.facts is None else self.facts["folder"]
        return f"report of suite {self.suite}: {done}"


@dataclass
class Publication:
    """Every suite's outcome, in suite order, and the stale bundles removed."""

    bundles: list[SuiteBundle] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)

    @property
    def written(self) -> dict[str, BundleFacts]:
        return {b.suite: b.facts for b in self.bundles if b.facts is not None}

    @property
    def failed(self) -> dict[str, str]:
        return {b.suite: b.error for b in self.bundles if b.error is not None}


def publish_every_suite(
    snapshot: Path, root: Path, on_bundle: Callable[[SuiteBundle], None] = lambda _: None
) -> Publication:
    """Publish the bundle of every suite with runs in ``snapshot`` under ``root``, then remove
    the bundles of the others; ``on_bundle`` hears of each suite as it is done."""
    publication = Publication()
    con = connect(snapshot, read_only=True)
    try:
        suites = [suite for (suite,) in con.execute(SUITES_WITH_RUNS).fetchall()]
        for suite in suites:
            try:
                folder = bundle_folder(root, suite)
                manifest = publish_report(con, suite, folder, f"the snapshot {snapshot}")
                bundle = SuiteBundle(suite, bundle_facts(manifest.out_dir, manifest.empty_figures))
            except Exception as exc:  # any suite's failure: the others are still published
                bundle = SuiteBundle(suite, error=f"{type(exc).__name__}: {exc}")
            publication.bundles.append(bundle)
            on_bundle(bundle)
    finally:
        con.close()
    publication.removed = remove_stale_bundles(root, keep=set(suites))
    return publication


def bundle_facts(folder: Path, empty_figures: tuple[str, ...] = ()) -> BundleFacts:
    """What a published bundle holds, read from its own files."""
    manifest = (folder / "manifest.json").read_bytes()
    suite = json.loads((folder / "provenance.json").read_text(encoding="utf-8"))["suite"]
    return BundleFacts(
        folder=str(folder),
        files=len(json.loads(manifest)["files"]) + 1,  # and manifest.json itself
        figures=len(FIGURES) - len(empty_figures),
        provisional=bool(suite.get("provisional")),
        settings_complete=suite.get("settings_complete"),
        settings_expected=suite.get("settings_expected"),
        manifest_sha256=hashlib.sha256(manifest).hexdigest(),
    )


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
