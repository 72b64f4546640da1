"""The shipped command agents whose real CLIs the agent tests run against the scripted provider."""

from __future__ import annotations

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
