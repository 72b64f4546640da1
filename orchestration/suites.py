"""Which suites the UI offers, and whether their files (and their agents' and tasks') are valid.

The definitions know a suite by its file name only (``suites/<stem>.yaml`` gives the asset group
``suite_<stem>``): listing a folder cannot fail on a file's contents, so a broken suite or agent
file never stops the code location from loading. The contents are read by ``scan_specs``, each
tick of the ``sync_suite_partitions`` sensor, which turns every problem into one line naming the
file and the field.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

import dagster as dg

from orchestration.partitions import SuiteKeys, SuitePartitions
from runner.config import Paths
from runner.errors import SpecError
from runner.specs import load_agent, load_suite, load_task

# A file name that can name assets: Dagster keys take it as is, op and group names with "-" and
# "." turned into "_".
USABLE_STEM = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")

# The run tag naming the suite a run works for (the Runs page filters by tag): set when a run is
# launched for a suite (its job, `make run`) and by the suite's assets when they run.
SUITE_TAG = "tmlbench/suite"


@dataclass(frozen=True)
class SuiteFile:
    """One ``suites/<stem>.yaml`` as the definitions see it: names, never contents."""

    stem: str

    @property
    def ident(self) -> str:
        """The stem as a Dagster name (``tml-v1-llm`` → ``tml_v1_llm``)."""
        return self.stem.replace("-", "_").replace(".", "_")

    @property
    def group(self) -> str:
        return f"suite_{self.ident}"

    @property
    def run_tags(self) -> dict[str, str]:
        return {SUITE_TAG: self.stem}

    @property
    def prepared_tasks_key(self) -> dg.AssetKey:
        return dg.AssetKey([self.stem, "prepared_tasks"])

    @property
    def agent_runs_key(self) -> dg.AssetKey:
        return dg.AssetKey([self.stem, "agent_runs"])

    @property
    def partitions(self) -> SuitePartitions:
        return SuitePartitions(self.stem)


def suite_files(suites_dir: Path) -> tuple[list[SuiteFile], list[str]]:
    """The usable suite files of ``suites_dir`` by name, and a line for each file left out."""
    files: list[SuiteFile] = []
    skipped: list[str] = []
    idents: dict[str, str] = {}
    paths = sorted(suites_dir.glob("*.yaml")) if suites_dir.is_dir() else []
    for path in paths:
        suite = SuiteFile(path.stem)
        if not USABLE_STEM.match(path.stem):
            skipped.append(
                f"{path}: file name: {path.stem!r} cannot name Dagster assets; use letters, "
                "digits, '-', '_' and '.' only (the suite id is the file name)"
            )
        elif suite.ident in idents:
            skipped.append(
                f"{path}: file name: {path.stem!r} gives the same Dagster names as "
                f"{idents[suite.ident]!r}.yaml; rename one of them"
            )
        else:
            idents[suite.ident] = path.stem
            files.append(suite)
    return files, skipped


@dataclass
class SpecScan:
    """What the spec files ask for now: every valid suite's partition keys, and what is wrong."""

    keys: dict[str, SuiteKeys] = field(default_factory=dict)  # by suite file stem
    problems: list[str] = field(default_factory=list)  # "<file>: <field>: what is wrong"
    # stems of suites that are invalid now: their partitions stay as they are
    invalid_suites: list[str] = field(default_factory=list)


def scan_specs(paths: Paths, suites: Iterable[str] | None = None) -> SpecScan:
    """Read every agent and task file and the suite files (all, or the named stems).

    Every agent file is read, listed by a suite or not: the raw load reads them all. A suite is
    valid when its file, each of its agents and tasks are; only valid suites get keys.
    """
    scan = SpecScan()
    agent_ids = [p.stem for p in _glob(paths.agents_dir, "*.yaml")]
    task_ids = [p.parent.name for p in _glob(paths.tasks_dir, "*/task.yaml")]
    bad_agents = _invalid(scan, load_agent, paths.agents_dir, agent_ids)
    bad_tasks = _invalid(scan, load_task, paths.tasks_dir, task_ids)
    files, skipped = suite_files(paths.suites_dir)
    scan.problems.extend(skipped)
    wanted = set(suites) if suites is not None else None
    for suite_file in files:
        stem = suite_file.stem
        if wanted is not None and stem not in wanted:
            continue
        path = paths.suites_dir / f"{stem}.yaml"
        try:
            suite = load_suite(paths.suites_dir, stem)
        except SpecError as exc:
            scan.problems.append(str(exc))
            scan.invalid_suites.append(stem)
            continue
        problems = [
            *_references(path, "agents", suite.agents, bad_agents, paths.agents_dir, "{}.yaml"),
            *_references(path, "tasks", suite.tasks, bad_tasks, paths.tasks_dir, "{}/task.yaml"),
        ]
        keys = SuiteKeys.of(suite)
        problems += [f"{path}: {line}" for line in keys.problems()]
        if problems:
            scan.problems.extend(problems)
            scan.invalid_suites.append(stem)
        else:
            scan.keys[stem] = keys
    return scan


def _glob(folder: Path, pattern: str) -> list[Path]:
    return sorted(folder.glob(pattern)) if folder.is_dir() else []


def _invalid(
    scan: SpecScan, load: Callable[[Path, str], object], folder: Path, ids: Iterable[str]
) -> set[str]:
    """Load each spec; a problem goes into ``scan``; returns the ids that failed."""
    bad = set()
    for spec_id in ids:
        try:
            load(folder, spec_id)
        except SpecError as exc:
            scan.problems.append(str(exc))
            bad.add(spec_id)
    return bad


def _references(
    suite_path: Path, name: str, ids: Iterable[str], bad: set[str], folder: Path, pattern: str
) -> list[str]:
    """A line for each id the suite lists whose spec file is missing or invalid."""
    out = []
    for spec_id in ids:
        spec = folder / pattern.format(spec_id)
        if spec_id in bad:
            out.append(f"{suite_path}: {name}: {spec_id!r} has an invalid spec file ({spec})")
        elif not spec.is_file():
            out.append(
                f"{suite_path}: {name}: {spec_id!r} has no spec file ({spec} does not exist)"
            )
    return out
