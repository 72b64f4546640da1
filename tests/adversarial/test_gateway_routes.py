"""The provider gateway's allow-list, attacked from inside the sandbox: an agent CLI (a
stand-in) sends the provider operations a model call never needs through the gateway that
holds the key. Only its one model call reaches the provider; the rest are the gateway's own
403s, counted on the record. One attempt per isolating backend.
"""

from __future__ import annotations

import json

import pytest

from runner.agents.scripted_provider import ScriptedProvider, reply
from runner.config import REPO_ROOT
from runner.specs import AgentSpec
from tests.support.attempts import attempt

pytestmark = [pytest.mark.sandbox, pytest.mark.timeout(120)]

TASK = "bank-customer-churn-ict-u-ai"
AGENTS = REPO_ROOT / "tests" / "sandbox_agents"
SECRET_ENV = "TMLBENCH_TEST_ROUTES_KEY"
SECRET = "sk-routes-secret-0123456789"
FORBIDDEN = 10  # the stand-in's forbidden requests (tests/sandbox_agents/route_prober.py)


def prober(provider: ScriptedProvider) -> AgentSpec:
    return AgentSpec.model_validate(
        {
            "id": "route-prober",
            "kind": "command",
            "title": "stand-in agent CLI probing the gateway's routes",
            "harness": "stub-cli",
            "model": {"provider": "stub", "model_id": provider.model},
            "command": ["{python}", "{agent_dir}/route_prober.py", "{model}"],
            "gateway": {
                "protocol": "openai-chat",
                "base_url": provider.base_url,
                "api_key_env": SECRET_ENV,
            },
            "env": {"PROVIDER_BASE_URL": "{gateway_url}", "PROVIDER_KEY": "{gateway_key}"},
        }
    )


@pytest.mark.parametrize("backend", ["bwrap", "docker"])
def test_only_the_model_call_reaches_the_provider_and_the_rest_is_counted(
    small_paths, monkeypatch: pytest.MonkeyPatch, backend: str
):
    monkeypatch.setenv(SECRET_ENV, SECRET)
    with ScriptedProvider([reply("hi", usage=(5, 1))], api_key=SECRET) as provider:
        record = attempt(small_paths, prober(provider), TASK, backend=backend, code_dir=AGENTS)
    assert record.sandbox_backend == backend
    run_dir = small_paths.runs_dir / record.run_id
    stdout = (run_dir / "stdout.log").read_text()
    assert record.status == "success", (record.error_message, stdout)
    report = json.loads(stdout.splitlines()[0])
    assert len(report["forbidden"]) == FORBIDDEN
    for request, status_line in report["forbidden"].items():
        assert status_line == "HTTP/1.1 403 Forbidden", request
    assert report["allowed"] == 200
    # The provider saw the one model call, with the real key, and nothing else.
    assert [(r.method, r.path) for r in provider.requests] == [("POST", "/v1/chat/completions")]
    assert provider.requests[0].authorized
    assert (record.requests, record.steps, record.tokens_in) == (1, 1, 5)
    assert (record.forbidden_requests, record.other_requests) == (FORBIDDEN, 0)
    events = [json.loads(x) for x in (run_dir / "transcript.jsonl").read_text().splitlines()]
    forbidden = [f"{e['method']} {e['target']}" for e in events if e["event"] == "forbidden"]
    assert forbidden == list(report["forbidden"])
