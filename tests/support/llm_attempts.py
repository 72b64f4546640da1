"""The built-in llm agent against a scripted provider on loopback, as one benchmarked attempt."""

from __future__ import annotations

from runner.agents.scripted_provider import ScriptedProvider
from runner.attempts.records import RunRecord
from runner.specs import AgentSpec
from tests.support.attempts import attempt

TASK = "bank-customer-churn-ict-u-ai"
KEY_ENV = "TMLBENCH_TEST_PROVIDER_KEY"
KEY = "sk-test-key"
PRICE_IN, PRICE_OUT = 2.0, 8.0  # USD per million tokens


def llm_agent(provider: ScriptedProvider, **llm: object) -> AgentSpec:
    return AgentSpec.model_validate(
        {
            "id": "llm-stub",
            "kind": "llm",
            "title": "built-in agent against the scripted provider",
            "harness": "tmlbench-llm",
            "model": {"provider": "stub", "model_id": provider.model},
            "llm": {
                "base_url": provider.base_url,
                "api_key_env": KEY_ENV,
                "prices": {"input_per_mtok": PRICE_IN, "output_per_mtok": PRICE_OUT},
                "max_retries": 3,
                **llm,
            },
        }
    )


def run(
    paths, provider: ScriptedProvider, budget: int = 120, backend: str = "bwrap", **llm: object
) -> RunRecord:
    return attempt(paths, llm_agent(provider, **llm), TASK, budget, backend=backend)
