"""Provider faults against the built-in agent: real bwrap attempts, the scripted provider on
loopback, each scenario's status and counts as the provider-fault rule says.

The built-in agent's client does not stream, so a fault "mid-stream" reaches it as the
provider's non-streamed answer to the same step: ``stream_error`` is the HTTP error status
itself, ``cut`` sends half of the JSON document (close-delimited or chunked). An error inside
a 200 body, and the other replies the scripted provider does not play, are in
``test_llm_client.py``.
"""

from __future__ import annotations

import pytest

from runner.agents.scripted_provider import (
    ScriptedProvider,
    cut,
    error,
    hang,
    load_conversation,
    reply,
    stream_error,
)
from runner.agents.scripted_provider import call as tool_call
from runner.attempts.records import RunRecord
from runner.config import REPO_ROOT
from tests.support.llm_attempts import KEY, KEY_ENV, run

pytestmark = [pytest.mark.sandbox, pytest.mark.timeout(180)]

CONVERSATION = load_conversation(REPO_ROOT / "tests" / "conversations" / "valid_submission.json")
WRITE_SCRIPT, RUN_SCRIPT, FINISH = CONVERSATION  # solve.py written, run (the submission), finish


@pytest.fixture(autouse=True)
def provider_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, KEY)


def calls(record: RunRecord) -> tuple[object, ...]:
    """(requests, retries, steps, provider faults, interrupted calls)."""
    return (
        record.requests,
        record.retries,
        record.steps,
        record.provider_faults,
        record.interrupted_calls,
    )


def test_a_429_without_retry_after_backs_off_and_recovers(small_paths):
    with ScriptedProvider([error(429, "slow down"), *CONVERSATION], api_key=KEY) as provider:
        record = run(small_paths, provider)
    assert provider.mismatches == []
    assert record.status == "success", record.error_message
    assert calls(record) == (4, 1, 3, 1, 0)
    assert (record.tokens_in, record.tokens_out) == provider.usage_totals()
    assert (record.failed_tokens_in, record.failed_tokens_out) == (0, 0)
    assert record.provider_fault_evidence is None and record.rate_limited is None


def test_a_5xx_before_every_reply_is_a_provider_error_with_evidence(small_paths):
    busy = error(503, "overloaded", retry_after=0.1)
    with ScriptedProvider([], api_key=KEY, then=busy) as provider:
        record = run(small_paths, provider, max_retries=2)
    assert record.status == "provider_error"
    assert calls(record) == (3, 2, 0, 3, 0)
    assert record.provider_fault_evidence == [
        f"call {n}: HTTP 503 (server_error)" for n in (1, 2, 3)
    ]
    assert record.error_message == (
        "the provider failed the agent's last 3 calls and the attempt ended before it "
        "recovered (call 3: HTTP 503 (server_error)); the agent's own outcome would have been "
        "runtime_error"
    )
    assert (record.tokens_in, record.tokens_out, record.cost_usd) == (0, 0, 0.0)


def test_a_5xx_mid_reply_after_a_step_is_the_providers(small_paths):
    failing = stream_error(tool_calls=[tool_call("run", {"command": "ls"})], usage=(900, 40))
    script = [WRITE_SCRIPT, failing, failing]
    with ScriptedProvider(script, api_key=KEY, then=failing) as provider:
        record = run(small_paths, provider, max_retries=1)
    assert record.status == "provider_error", record.error_message
    assert calls(record) == (3, 1, 1, 2, 0)
    assert (record.tokens_in, record.tokens_out) == provider.usage_totals() == (1850, 640)
    assert record.provider_fault_evidence == [
        "call 2: HTTP 500 (server_error)",
        "call 3: HTTP 500 (server_error)",
    ]


@pytest.mark.parametrize("framing", ["close", "chunked"])
def test_a_cut_reply_is_interrupted_a_fault_and_retried(small_paths, framing):
    broken = cut(tool_calls=[tool_call("run", {"command": "ls"})], usage=(800, 30), framing=framing)
    with ScriptedProvider([broken, *CONVERSATION], api_key=KEY) as provider:
        record = run(small_paths, provider)
    assert provider.mismatches == []
    assert record.status == "success", record.error_message
    assert calls(record) == (4, 1, 3, 1, 1)
    # the cut reply's tokens were never reported: not in the totals, nor failed
    assert (record.tokens_in, record.tokens_out) == provider.usage_totals() == (7090, 720)
    assert (record.failed_tokens_in, record.failed_tokens_out) == (0, 0)


def test_cuts_to_the_end_are_a_provider_error_even_after_steps(small_paths):
    broken = cut(tool_calls=[tool_call("run", {"command": "ls"})], framing="chunked")
    with ScriptedProvider([WRITE_SCRIPT], api_key=KEY, then=broken) as provider:
        record = run(small_paths, provider, max_retries=1)
    assert record.status == "provider_error"
    assert calls(record) == (3, 1, 1, 2, 2)
    assert record.provider_fault_evidence == [
        "call 2: reply cut by the provider before its end",
        "call 3: reply cut by the provider before its end",
    ]


def test_faults_after_the_submission_leave_a_success(small_paths):
    busy = error(500, "internal error")
    with ScriptedProvider([WRITE_SCRIPT, RUN_SCRIPT], api_key=KEY, then=busy) as provider:
        record = run(small_paths, provider, max_retries=1)
    assert record.status == "success", record.error_message
    assert calls(record) == (4, 1, 2, 2, 0)
    assert record.provider_fault_evidence is None  # counted, but it decided nothing
    assert (record.tokens_in, record.tokens_out) == provider.usage_totals()


def test_the_budget_ending_mid_call_is_the_agents_timeout(small_paths):
    # a 503, recovered by the call the budget then cuts: the provider was answering
    script = [error(503, retry_after=0.1), hang(60)]
    with ScriptedProvider(script, api_key=KEY) as provider:
        record = run(small_paths, provider, budget=4)
    assert record.status == "timeout"
    assert calls(record) == (2, 1, 0, 1, 1)
    assert record.provider_fault_evidence is None
    assert (record.tokens_in, record.tokens_out) == (0, 0)


def test_a_request_the_provider_refuses_is_the_agents(small_paths):
    script = [WRITE_SCRIPT, error(400, "Invalid 'messages[3]': unsupported content")]
    with ScriptedProvider(script, api_key=KEY) as provider:
        record = run(small_paths, provider)
    assert provider.mismatches == []
    # the loop ends on the failed call as a CLI would: exit 1, the agent's runtime_error
    assert record.status == "runtime_error"
    assert record.error_message == "the agent exited with code 1 and left no submission"
    assert calls(record) == (2, 0, 1, 0, 0)
    assert record.provider_fault_evidence is None


def test_a_429_retry_after_past_the_budget_is_unrecovered(small_paths):
    script = [reply(tool_calls=[tool_call("run", {"command": "ls"})]), error(429, retry_after=25)]
    with ScriptedProvider(script, api_key=KEY) as provider:
        record = run(small_paths, provider, budget=5)
    assert provider.mismatches == []
    assert record.status == "provider_error"
    assert calls(record) == (2, 0, 1, 1, 0)
    assert record.provider_fault_evidence == ["call 2: HTTP 429 with Retry-After: 25"]
    assert record.error_message.endswith("the agent's own outcome would have been timeout")
