"""The shipped command agents whose real CLIs the agent tests run against the scripted provider."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from runner.config import REPO_ROOT
from runner.specs.registry import list_agents

TASK = "bank-customer-churn-ict-u-ai"
KEY_ENV = "TMLBENCH_TEST_PROVIDER_KEY"  # the provider key the pointed agents read
CLI_AGENTS = [a for a in list_agents(REPO_ROOT / "agents").specs if a.kind == "command"]
# One agent per CLI: the paper's models share a template, so one of each harness is enough
# (the Qwen3-Coder one, which every template has).
ONE_PER_CLI = list(
    {a.harness: a for a in sorted(CLI_AGENTS, key=lambda a: "qwen3-coder" in a.id)}.values()
)


Outcome = TypeVar("Outcome")

#: The most a scenario's budget grows to while a CLI has not reached it (Kilo's start-up on a
#: loaded 2-core host has taken 30 s).
MOST_BUDGET = 120


def until_reached(
    attempt_with: Callable[[int], Outcome],
    reached: Callable[[Outcome], bool],
    budget: int,
    most: int = MOST_BUDGET,
) -> tuple[Outcome, int]:
    """``attempt_with(budget)``, again with twice the budget while the CLI did not reach the
    scenario under test (``reached`` false), up to ``most`` seconds; (the outcome, its budget).

    A real CLI's start-up (Kilo's ~20 s, aider's and mini-swe-agent's imports) comes out of the
    attempt's budget, and a loaded host stretches it: a budget sized for the scenario can run
    out before the CLI's first model call, and that attempt says nothing about what the test
    asks. So the host's speed, not the CLI, decides how long a scenario gets; a CLI that still
    has not reached it at ``most`` seconds is judged on that attempt. A fast host pays nothing.
    """
    while True:
        outcome = attempt_with(budget)
        if reached(outcome) or budget >= most:
            return outcome, budget
        budget = min(2 * budget, most)
