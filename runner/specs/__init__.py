"""Validated, frozen models of the spec files: tasks, agents and suites.

Each family lives in its own module (``task``, ``agent``, ``suite``); import them from here.
"""

from __future__ import annotations

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
