"""Every shipped agent CLI meets the gateway's answer past a spend ceiling, for real.

The harness ends the attempt at the first refused call; here that is switched off (the
sandbox does not watch the cap), so what each real CLI does with its protocol's quota error
shows: it must take it for an exhausted quota and stop, not retry it in a loop. Measured:
Codex ("Quota exceeded. Check your plan and billing details."), OpenCode, Kilo and aider stop
at the first refusal; Claude Code stops after the few calls it had started at once;
mini-swe-agent (litellm) retries every 4xx it does not know, with backoff, 10 times at most,
so its budget here ends it after a few. The record says ``limit_exceeded="spend"`` however the
attempt ended. Six attempts, ~1.5 minutes (Kilo takes ~20 s to make its first call); one that
never got as far as the ceiling is tried again with twice the budget (``until_reached``).
"""

from __future__ import annotations

import json
import secrets
import threading

import pytest

from runner.agents.check import point_at
from runner.agents.scripted_provider import (
    ReceivedRequest,
    ScriptedProvider,
    Step,
    call,
    reply,
    shell_call_arguments,
    shell_tool,
)
from runner.attempts.records import RunRecord
from runner.sandbox.base import SandboxRequest
from runner.specs import AgentSpec
from tests.support.attempts import attempt
from tests.support.cli_agents import KEY_ENV, ONE_PER_CLI, TASK, until_reached

pytestmark = [pytest.mark.sandbox, pytest.mark.slow, pytest.mark.timeout(600)]

CEILING = 2  # model calls
#: harness -> (budget, at most how many calls the CLI makes past the ceiling before it stops)
EXPECTED = {
    "codex-cli": (40, 1),
    "opencode": (40, 1),
    "kilo-cli": (60, 1),
    "aider": (40, 1),
    "claude-code": (40, 8),  # the calls it started at once (the turn, its title, ...)
    # Retried with backoff until the budget ends: how many fit depends on the machine's speed
    # (5 under load), never more than litellm's 10 retries.
    "mini-swe-agent": (25, 10),
}


class Working:
    """A model that keeps the CLI busy with a harmless command (or, for aider, an edit)."""

    def __init__(self) -> None:
        self.n = 0
        self.lock = threading.Lock()

    def __call__(self, request: ReceivedRequest) -> Step:
        with self.lock:
            self.n += 1
            n = self.n
        tool = shell_tool(request.tools)
        if tool is not None:
            arguments = shell_call_arguments(tool, f"echo still working {n}")
            return reply(tool_calls=[call(tool.name, arguments)], usage=(700 + n, 30))
        if any(m.role == "system" and "SEARCH/REPLACE" in m.text for m in request.messages):
            edit = f"notes_{n}.txt\n```\n<<<<<<< SEARCH\n=======\nstep {n}\n>>>>>>> REPLACE\n```\n"
            return reply(f"Keeping notes.\n\n{edit}", usage=(700 + n, 30))
        return reply(f"THOUGHT: working.\n\n```bash\necho still working {n}\n```", usage=(700, 30))


def test_every_family_is_expected() -> None:
    assert set(EXPECTED) == {a.harness for a in ONE_PER_CLI}


def quota_attempt(paths, monkeypatch, agent: AgentSpec, budget: int) -> tuple[RunRecord, int]:
    """One attempt with a spend ceiling of ``CEILING`` calls; (record, calls forwarded)."""
    key = "sk-test-" + secrets.token_hex(12)
    monkeypatch.setenv(KEY_ENV, key)
    model = agent.model.model_id or "model"
    with ScriptedProvider([], api_key=key, model=model, any_model=True, then=Working()) as p:
        pointed = point_at(agent, p.base_url, KEY_ENV)
        assert pointed.gateway is not None
        spend = pointed.gateway.spend.model_copy(update={"requests": CEILING})
        pointed = pointed.model_copy(
            update={"gateway": pointed.gateway.model_copy(update={"spend": spend})}
        )
        return attempt(paths, pointed, TASK, budget), len(p.requests)


@pytest.mark.parametrize("agent", ONE_PER_CLI, ids=lambda a: a.harness)
def test_a_cli_stops_at_the_gateways_quota_error(small_paths, monkeypatch, agent: AgentSpec):
    budget, most = EXPECTED[agent.harness]
    monkeypatch.setattr(SandboxRequest, "cap_broken", lambda self: False)  # let the CLI decide
    (record, forwarded), _ = until_reached(
        lambda budget: quota_attempt(small_paths, monkeypatch, agent, budget),
        lambda outcome: outcome[0].limit_exceeded == "spend",  # it got as far as the ceiling
        budget,
    )
    run_dir = small_paths.runs_dir / record.run_id
    events = [json.loads(x) for x in (run_dir / "transcript.jsonl").read_text().splitlines()]
    refused = sum(1 for e in events if e["event"] == "spend_refused")
    assert forwarded == CEILING and record.requests == CEILING
    assert record.limit_exceeded == "spend", record.sandbox_notes
    assert 1 <= refused <= most, refused
    if agent.harness != "mini-swe-agent":  # it gave up by itself, before its budget
        assert record.status == "runtime_error", (record.status, record.exit_code)
        assert record.exit_code not in (137, 143), record.exit_code  # not killed
