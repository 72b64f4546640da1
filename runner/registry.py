"""Find and load task, agent and suite specs by id."""

from __future__ import annotations

import hashlib
from pathlib import Path

from runner.errors import SpecError
from runner.specs import AgentSpec, SuiteSpec, TaskSpec, load_yaml_model


def task_dir(tasks_dir: Path, task_id: str) -> Path:
    return tasks_dir / task_id


def load_task(tasks_dir: Path, task_id: str) -> TaskSpec:
    path = task_dir(tasks_dir, task_id) / "task.yaml"
    if not path.is_file():
        known = ", ".join(t.id for t in list_tasks(tasks_dir)) or "none"
        raise SpecError(f"unknown task {task_id!r}: {path} does not exist (known tasks: {known})")
    task = load_yaml_model(path, TaskSpec)
    if task.id != task_id:
        raise SpecError(f"{path}: id {task.id!r} does not match its folder name {task_id!r}")
    return task


def list_tasks(tasks_dir: Path) -> list[TaskSpec]:
    return [load_yaml_model(p, TaskSpec) for p in sorted(tasks_dir.glob("*/task.yaml"))]


def task_spec_sha256(tasks_dir: Path, task_id: str) -> str:
    return hashlib.sha256((task_dir(tasks_dir, task_id) / "task.yaml").read_bytes()).hexdigest()


def load_agent(agents_dir: Path, agent_id: str) -> AgentSpec:
    path = agents_dir / f"{agent_id}.yaml"
    if not path.is_file():
        known = ", ".join(a.id for a in list_agents(agents_dir)) or "none"
        raise SpecError(
            f"unknown agent {agent_id!r}: {path} does not exist (known agents: {known})"
        )
    agent = load_yaml_model(path, AgentSpec)
    if agent.id != agent_id:
        raise SpecError(f"{path}: id {agent.id!r} does not match its file name {agent_id!r}")
    return agent


def list_agents(agents_dir: Path) -> list[AgentSpec]:
    return [load_yaml_model(p, AgentSpec) for p in sorted(agents_dir.glob("*.yaml"))]


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


def load_suite(suites_dir: Path, suite_id: str) -> SuiteSpec:
    path = suites_dir / f"{suite_id}.yaml"
    if not path.is_file():
        known = ", ".join(sorted(p.stem for p in suites_dir.glob("*.yaml"))) or "none"
        raise SpecError(
            f"unknown suite {suite_id!r}: {path} does not exist (known suites: {known})"
        )
    suite = load_yaml_model(path, SuiteSpec)
    if suite.id != suite_id:
        raise SpecError(f"{path}: id {suite.id!r} does not match its file name {suite_id!r}")
    return suite
