"""One benchmarked attempt, run the way the bench runs it: a prepared task, a sandbox backend, a
record."""

from __future__ import annotations

from pathlib import Path

from runner.attempts.attempt import AttemptContext, AttemptPlan, run_attempt
from runner.sandbox import get_sandbox
from runner.specs import AgentSpec
from runner.specs.registry import agent_code_dir, load_task, task_spec_sha256
from tests.support.prepared_tasks import prepared


def attempt(
    paths,
    agent: AgentSpec,
    task_id: str,
    budget: int = 60,
    backend: str = "bwrap",
    code_dir: Path | None = None,
    **kwargs,
):
    task = load_task(paths.tasks_dir, task_id)
    ctx = AttemptContext(
        prepared=prepared(paths, task_id),
        runs_dir=paths.runs_dir,
        sandbox=get_sandbox(backend),
        agent_code_dir=code_dir or agent_code_dir(paths.agents_dir, agent),
        task_spec_sha256=task_spec_sha256(paths.tasks_dir, task_id),
        **kwargs,
    )
    return run_attempt(AttemptPlan(agent, task, budget, 0), ctx)
