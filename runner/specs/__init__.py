"""Validated, frozen models of the spec files: tasks, agents and suites.

Each family lives in its own module (``task``, ``agent``, ``suite``); import them from here.
Finding and loading them by id is ``registry``'s, on this package's surface too (loaded on first
use, see ``runner.rooms``: the registry imports the models above).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from runner.rooms import lazy_surface
from runner.specs.agent import (
    AgentLimits,
    AgentSpec,
    CliSpec,
    GatewaySpec,
    LlmSpec,
    TokenPrices,
)
from runner.specs.base import Frozen, load_yaml_model
from runner.specs.suite import DEFAULT_PROFILES_BY_BUDGET, SuiteSpec
from runner.specs.task import MetricSpec, SubmissionSpec, TaskSpec

if TYPE_CHECKING:
    from runner.specs.registry import SpecProblem as SpecProblem
    from runner.specs.registry import list_agents as list_agents
    from runner.specs.registry import list_suites as list_suites
    from runner.specs.registry import list_tasks as list_tasks
    from runner.specs.registry import load_agent as load_agent
    from runner.specs.registry import load_suite as load_suite
    from runner.specs.registry import load_task as load_task
    from runner.specs.registry import task_spec_sha256 as task_spec_sha256

__all__ = [
    "DEFAULT_PROFILES_BY_BUDGET",
    "AgentLimits",
    "AgentSpec",
    "CliSpec",
    "Frozen",
    "GatewaySpec",
    "LlmSpec",
    "MetricSpec",
    "SubmissionSpec",
    "SuiteSpec",
    "TaskSpec",
    "TokenPrices",
    "load_yaml_model",
]

__getattr__ = lazy_surface(__name__)
