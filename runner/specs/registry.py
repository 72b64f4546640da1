"""Find and load task, agent and suite specs by id.

One bad spec file never hides the others: a listing (``list_tasks``, ``list_agents``,
``list_suites``) holds every valid spec and, apart, one problem per file that is not valid,
each naming the file and what is wrong (the caller says what it skipped). Loading one spec by
id (``load_task`` …) raises that problem as a SpecError; a suite runs only when every agent and
task it lists loads (``suite_members``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Generic, TypeVar

from runner.config import Paths
from runner.errors import SpecError
from runner.specs import AgentSpec, SuiteSpec, TaskSpec, load_yaml_model

Spec = TypeVar("Spec", TaskSpec, AgentSpec, SuiteSpec)


@dataclass(frozen=True)
class SpecProblem:
    """A spec file that did not load: which file, the id it stands for, and why."""

    path: Path
    spec_id: str  # its file name (agents, suites) or folder name (tasks): ids are names
    message: str  # the SpecError's: names the file, the field and what is wrong


@dataclass(frozen=True)
class Listing(Generic[Spec]):
    """Every spec file of one kind in a folder: the valid specs by id, the others' problems."""

    specs: list[Spec] = field(default_factory=list)
    problems: list[SpecProblem] = field(default_factory=list)

    @property
    def ids(self) -> list[str]:
        return [spec.id for spec in self.specs]


def _listing(
    paths: list[Path], spec_id: Callable[[Path], str], read: Callable[[Path, str], Spec]
) -> Listing[Spec]:
    listing: Listing[Spec] = Listing()
    for path in paths:
        try:
            listing.specs.append(read(path, spec_id(path)))
        except SpecError as exc:
            listing.problems.append(SpecProblem(path, spec_id(path), str(exc)))
    return listing


def _known(listing: Listing[Spec]) -> str:
    """The ids a "does not exist" message offers (and how many files it left out)."""
    known = ", ".join(listing.ids) or "none"
    if listing.problems:
        known += f"; {len(listing.problems)} more file(s) invalid"
    return known


# ---------------------------------------------------------------------------------- tasks


def task_dir(tasks_dir: Path, task_id: str) -> Path:
    return tasks_dir / task_id


def load_task(tasks_dir: Path, task_id: str) -> TaskSpec:
    path = task_dir(tasks_dir, task_id) / "task.yaml"
    if not path.is_file():
        raise SpecError(
            f"unknown task {task_id!r}: {path} does not exist "
            f"(known tasks: {_known(list_tasks(tasks_dir))})"
        )
    return _read_task(path, task_id)


def _read_task(path: Path, task_id: str) -> TaskSpec:
    task = load_yaml_model(path, TaskSpec)
    if task.id != task_id:
        raise SpecError(f"{path}: id {task.id!r} does not match its folder name {task_id!r}")
    return task


def list_tasks(tasks_dir: Path) -> Listing[TaskSpec]:
    """Every ``<tasks_dir>/<id>/task.yaml``: the valid tasks, and a problem per invalid file."""
    paths = sorted(tasks_dir.glob("*/task.yaml"))
    return _listing(paths, lambda p: p.parent.name, _read_task)


def task_spec_sha256(tasks_dir: Path, task_id: str) -> str:
    return hashlib.sha256((task_dir(tasks_dir, task_id) / "task.yaml").read_bytes()).hexdigest()


# --------------------------------------------------------------------------------- agents


def load_agent(agents_dir: Path, agent_id: str) -> AgentSpec:
    path = agents_dir / f"{agent_id}.yaml"
    if not path.is_file():
        raise SpecError(
            f"unknown agent {agent_id!r}: {path} does not exist "
            f"(known agents: {_known(list_agents(agents_dir))})"
        )
    return _read_agent(path, agent_id)


def _read_agent(path: Path, agent_id: str) -> AgentSpec:
    agent = load_yaml_model(path, AgentSpec)
    if agent.id != agent_id:
        raise SpecError(f"{path}: id {agent.id!r} does not match its file name {agent_id!r}")
    return agent


def list_agents(agents_dir: Path) -> Listing[AgentSpec]:
    """Every ``<agents_dir>/<id>.yaml``: the valid agents, and a problem per invalid file."""
    return _listing(sorted(agents_dir.glob("*.yaml")), lambda p: p.stem, _read_agent)


def agent_code_dir(agents_dir: Path, agent: AgentSpec) -> Path | None:
    """The folder mounted read-only at {agent_dir} inside the sandbox, if the agent has one."""
    if agent.code_dir is None:
        return None
    path = (agents_dir / agent.code_dir).resolve()
    if not path.is_dir():
        raise SpecError(
            f"{agents_dir / (agent.id + '.yaml')}: code_dir {agent.code_dir!r} is not a folder"
        )
    return path


# --------------------------------------------------------------------------------- suites


def load_suite(suites_dir: Path, suite_id: str) -> SuiteSpec:
    path = suites_dir / f"{suite_id}.yaml"
    if not path.is_file():
        known = ", ".join(sorted(p.stem for p in suites_dir.glob("*.yaml"))) or "none"
        raise SpecError(
            f"unknown suite {suite_id!r}: {path} does not exist (known suites: {known})"
        )
    return _read_suite(path, suite_id)


def _read_suite(path: Path, suite_id: str) -> SuiteSpec:
    suite = load_yaml_model(path, SuiteSpec)
    if suite.id != suite_id:
        raise SpecError(f"{path}: id {suite.id!r} does not match its file name {suite_id!r}")
    return suite


def list_suites(suites_dir: Path) -> Listing[SuiteSpec]:
    """Every ``<suites_dir>/<id>.yaml``: the valid suites, and a problem per invalid file."""
    return _listing(sorted(suites_dir.glob("*.yaml")), lambda p: p.stem, _read_suite)


def suite_members(suite: SuiteSpec, paths: Paths) -> tuple[list[AgentSpec], list[TaskSpec]]:
    """The agents and tasks the suite lists, in its order; one SpecError naming the suite file
    and every agent or task file that is missing or invalid (a suite runs whole or not at all,
    and other suites are not concerned)."""
    agents: list[AgentSpec] = []
    tasks: list[TaskSpec] = []
    problems: list[str] = []
    for agent_id in suite.agents:
        try:
            agents.append(load_agent(paths.agents_dir, agent_id))
        except SpecError as exc:
            problems.append(f"agents: {agent_id!r}: {exc}")
    for task_id in suite.tasks:
        try:
            tasks.append(load_task(paths.tasks_dir, task_id))
        except SpecError as exc:
            problems.append(f"tasks: {task_id!r}: {exc}")
    if problems:
        suite_file = paths.suites_dir / f"{suite.id}.yaml"
        raise SpecError(
            f"suite {suite.id!r} ({suite_file}) cannot run:\n"
            + "".join(f"  - {problem}\n" for problem in problems)
            + f"Fix these files, or take them out of {suite_file}; other suites are unaffected."
        )
    return agents, tasks
