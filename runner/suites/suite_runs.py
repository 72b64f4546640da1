"""A suite's runs on disk: the folder of a run, a suite's records, the run folders of settings.

Every attempt is the folder ``<runs>/<runs_subdir>/<run id>``, and every run id of a setting
starts with its ``Setting.run_id_prefix``: the runs of chosen settings are found by those
prefixes below the runs root (what ``warehouse.loader.load_runs`` takes), never by a scan.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from pathlib import Path

from runner.attempts.records import RunRecord, load_records
from runner.config import Paths
from runner.errors import TmlbenchError
from runner.specs.registry import load_suite
from runner.suites.benchmark_settings import SuiteLayout, suite_settings


def run_folder(runs_dir: Path, run_id: str) -> Path:
    """The folder of one attempt, in its suite's runs folder."""
    return runs_dir / run_id


def suite_records(layout: SuiteLayout) -> list[RunRecord]:
    """Every record in the suite's runs folder (none before its first run made the folder)."""
    return load_records(layout.runs_dir) if layout.runs_dir.is_dir() else []


def settings_run_prefixes(paths: Paths, settings: Mapping[str, Collection[str]]) -> list[str]:
    """The run folders of ``settings`` (suite id -> setting keys ``agent|task|budget``), as the
    paths below ``paths.runs_dir`` they start with: ``<runs_subdir>/<run id prefix>``.

    Raises a ``SpecError`` for a suite file that is missing or broken, and a ``TmlbenchError``
    naming the suite for keys that are not its settings, or for a suite that keeps its runs
    outside the runs root (no prefix below it can name them).
    """
    root = paths.runs_dir.resolve()
    prefixes: set[str] = set()
    for suite_id, keys in settings.items():
        suite = load_suite(paths.suites_dir, suite_id)
        runs_dir = SuiteLayout.of(suite, paths).runs_dir
        prefix = {s.key: s.run_id_prefix for s in suite_settings(suite, paths)}
        unknown = sorted(set(keys) - set(prefix))
        if unknown:
            raise TmlbenchError(f"not settings of suite {suite_id}: {', '.join(unknown)}")
        if not runs_dir.is_relative_to(root):
            raise TmlbenchError(f"suite {suite_id} keeps its runs in {runs_dir}, not under {root}")
        folder = runs_dir.relative_to(root).as_posix()
        prefixes |= {prefix[k] if folder == "." else f"{folder}/{prefix[k]}" for k in keys}
    return sorted(prefixes)
