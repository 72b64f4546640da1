"""A runaway agent CLI against its spend ceilings, in the real sandbox on every isolating backend.

The stand-in (tests/sandbox_agents/spend_loop.py) posts model calls from four threads as fast
as it can and ignores every refusal. The gateway must forward no call past the attempt's
ceiling, the sandbox must end the attempt when the ceiling breaks (long before its budget),
and the record must say so: ``limit_exceeded="spend"``, ``runtime_error`` (a broken cap is the
agent's outcome: never ``provider_error`` or ``harness_error``), with the transcript within
its host budget and truncated with a note. One attempt per backend, a few seconds each.
"""

from __future__ import annotations

import json
import secrets

import pytest

from runner.agents.drivers import CommandDriver
from runner.agents.scripted_provider import ScriptedProvider, repeat, reply
from runner.config import REPO_ROOT
from runner.specs import AgentSpec
from tests.support.attempts import attempt

pytestmark = [pytest.mark.sandbox, pytest.mark.timeout(180)]

TASK = "bank-customer-churn-ict-u-ai"
AGENTS = REPO_ROOT / "tests" / "sandbox_agents"
KEY_ENV = "TMLBENCH_TEST_SPEND_KEY"
CEILING = 25  # model calls
TRANSCRIPT_BUDGET = 8 * 1024  # small enough that 25 calls and the refusals overflow it


def runaway(provider: ScriptedProvider) -> AgentSpec:
    return AgentSpec.model_validate(
        {
            "id": "spend-loop",
            "kind": "command",
            "title": "a CLI that calls its model in a loop",
            "harness": "stub-cli",
            "model": {"provider": "stub", "model_id": provider.model},
            "command": ["{python}", "{agent_dir}/spend_loop.py", "{model}"],
            "gateway": {
                "protocol": "openai-chat",
                "base_url": provider.base_url,
                "api_key_env": KEY_ENV,
                "prices": {"input_per_mtok": 3.0, "output_per_mtok": 15.0},
                "requests_per_minute": 100_000,  # the spend ceiling, not the rate, stops it
                "spend": {"requests": CEILING},
            },
            "env": {"PROVIDER_BASE_URL": "{gateway_url}", "PROVIDER_KEY": "{gateway_key}"},
        }
    )


@pytest.mark.parametrize("backend", ["bwrap", "docker"])
def test_a_runaway_cli_is_stopped_at_its_spend_ceiling(
    small_paths, monkeypatch: pytest.MonkeyPatch, backend: str
) -> None:
    key = "sk-test-" + secrets.token_hex(12)
    monkeypatch.setenv(KEY_ENV, key)
    monkeypatch.setattr(CommandDriver, "transcript_bytes", TRANSCRIPT_BUDGET)
    script = [repeat(reply("Still thinking.", usage=(1000, 20)))]
    with ScriptedProvider(script, api_key=key) as provider:
        record = attempt(small_paths, runaway(provider), TASK, budget=60, backend=backend,
                         code_dir=AGENTS)  # fmt: skip
        seen = len(provider.requests)
        assert provider.mismatches == []
    run_dir = small_paths.runs_dir / record.run_id
    assert seen == CEILING  # the provider never saw a call past the ceiling
    assert record.limit_exceeded == "spend"
    assert record.status == "runtime_error", record.error_message  # not timeout: ended early
    assert record.error_message == "the attempt broke its spend cap"
    assert record.submission_path is not None and record.score is None
    assert (record.requests, record.steps, record.provider_faults) == (CEILING, CEILING, 0)
    assert (record.tokens_in, record.tokens_out) == (1000 * CEILING, 20 * CEILING)
    assert record.provider_fault_evidence is None and record.rate_limited == 0
    notes = record.sandbox_notes or []
    assert any(n.startswith("spend cap: the agent's model calls reached gateway.spend.requests")
               for n in notes), notes  # fmt: skip
    assert any(n.startswith("transcript.jsonl truncated at its host budget") for n in notes)
    transcript = run_dir / "transcript.jsonl"
    assert transcript.stat().st_size <= TRANSCRIPT_BUDGET
    events = [json.loads(line) for line in transcript.read_text().splitlines()]
    assert [e["event"] for e in events[-2:]] == ["transcript_full", "gateway_stop"]
    assert events[-1]["stats"]["spend_refused"] >= 1
    assert key not in transcript.read_text()
