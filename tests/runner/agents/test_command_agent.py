"""An external agent CLI (a stand-in) as a ``command`` agent: gateway, egress proxy, records.

The stand-in calls its provider through the harness's gateway with a placeholder key, tries
a host that is not allowed through the egress proxy and the host's loopback directly. The
provider sees the real key; the sandbox, the logs and the record never do.
"""

from __future__ import annotations

import json
import socket

import pytest

from runner.agents.gateway import PLACEHOLDER_KEY
from runner.agents.scripted_provider import ScriptedProvider, error, reply
from runner.config import REPO_ROOT
from runner.errors import TmlbenchError
from runner.specs import AgentSpec
from tests.support.attempts import attempt

pytestmark = [pytest.mark.sandbox, pytest.mark.timeout(120)]

TASK = "bank-customer-churn-ict-u-ai"
AGENTS = REPO_ROOT / "tests" / "sandbox_agents"
SECRET_ENV = "TMLBENCH_TEST_CLI_KEY"
SECRET = "sk-cli-secret-0123456789"


def cli_agent(provider: ScriptedProvider, direct_port: int, *args: str) -> AgentSpec:
    return AgentSpec.model_validate(
        {
            "id": "cli-stub",
            "kind": "command",
            "title": "stand-in agent CLI",
            "harness": "stub-cli",
            "model": {"provider": "stub", "model_id": provider.model},
            "command": ["{python}", "{agent_dir}/provider_cli.py", "denied.example:443",
                        str(direct_port), "{model}", *args],
            "gateway": {
                "protocol": "openai-chat",
                "base_url": provider.base_url,
                "api_key_env": SECRET_ENV,
                "prices": {"input_per_mtok": 1.0, "output_per_mtok": 2.0},
            },
            "env": {"PROVIDER_BASE_URL": "{gateway_url}", "PROVIDER_KEY": "{gateway_key}"},
            "files": {".config/stub/config.json": '{"baseURL": "{gateway_url}", "n": {"k": 1}}'},
        }
    )  # fmt: skip


@pytest.mark.parametrize("backend", ["bwrap", "docker"])
def test_a_cli_agent_reaches_its_provider_only_through_the_gateway_which_holds_the_key(
    small_paths, monkeypatch: pytest.MonkeyPatch, backend: str
):
    monkeypatch.setenv(SECRET_ENV, SECRET)
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    with ScriptedProvider([reply("hi", usage=(5, 1))], api_key=SECRET) as provider:
        agent = cli_agent(provider, listener.getsockname()[1])
        record = attempt(small_paths, agent, TASK, backend=backend, code_dir=AGENTS)
    listener.close()
    assert record.sandbox_backend == backend
    run_dir = small_paths.runs_dir / record.run_id
    stdout = (run_dir / "stdout.log").read_text()
    assert record.status == "success", (record.error_message, stdout)
    report = json.loads(stdout.splitlines()[0])
    assert report["base_url"] == "http://127.0.0.1:18081/v1"
    assert report["provider"]["status"] == 200
    assert report["provider"]["reply"]["choices"][0]["message"]["content"] == "hi"
    # The provider got the real key from the gateway; the CLI only ever held the placeholder.
    assert provider.requests[0].authorized and provider.mismatches == []
    assert f"debug: using key {PLACEHOLDER_KEY}" in stdout
    assert report["denied"].startswith("HTTP/1.1 403")
    assert report["direct"] in ("ConnectionRefusedError", "OSError", "TimeoutError")
    assert (record.requests, record.retries, record.steps) == (1, 0, 1)
    assert (record.tokens_in, record.tokens_out) == (5, 1)
    assert record.cost_usd == pytest.approx((5 * 1.0 + 1 * 2.0) / 1e6)
    assert record.egress_denied == 1 and record.egress_denied_hosts == {"denied.example:443": 1}
    assert record.transcript_path == "transcript.jsonl"
    calls = [json.loads(x) for x in (run_dir / "transcript.jsonl").read_text().splitlines()]
    model_calls = [c for c in calls if c["event"] == "model_call"]
    assert len(model_calls) == 1 and model_calls[0]["status"] == 200
    config = json.loads((run_dir / "workspace/.config/stub/config.json").read_text())
    assert config == {"baseURL": "http://127.0.0.1:18081/v1", "n": {"k": 1}}
    for path in run_dir.rglob("*"):
        if path.is_file():
            assert SECRET.encode() not in path.read_bytes(), path
    assert SECRET not in record.model_dump_json()


@pytest.mark.parametrize(
    ("answer", "gives_up", "status", "faults", "evidence"),
    [
        # The provider fails the last call and the agent fails: the provider's fault.
        (error(429), True, "provider_error", 1, ["call 1: HTTP 429 without Retry-After"]),
        # The agent succeeds anyway: its success stands, the fault is still counted.
        (error(503), False, "success", 1, None),
        # The agent's own bad request is no provider fault: its failure stays its own.
        (error(400, "bad request"), True, "runtime_error", 0, None),
    ],
    ids=["unrecovered-fault", "success-despite-fault", "agents-bad-request"],
)
def test_a_failed_attempt_after_an_unrecovered_provider_fault_is_a_provider_error(
    small_paths, monkeypatch, answer, gives_up, status, faults, evidence
):
    monkeypatch.setenv(SECRET_ENV, SECRET)
    with ScriptedProvider([answer], api_key=SECRET) as provider:
        agent = cli_agent(provider, 9, *(["give-up"] if gives_up else []))
        record = attempt(small_paths, agent, TASK, code_dir=AGENTS)
    assert record.status == status, record.error_message
    assert (record.requests, record.steps, record.provider_faults) == (1, 0, faults)
    assert record.provider_fault_evidence == evidence
    assert (record.tokens_in, record.failed_tokens_in, record.rate_limited) == (0, 0, 0)
    if status == "provider_error":
        assert record.error_message == (
            "the provider failed the agent's last call and the attempt ended before it "
            "recovered (call 1: HTTP 429 without Retry-After); the agent's own outcome would "
            "have been runtime_error"
        )
        assert record.score is None


def test_a_cli_agent_without_its_key_does_not_start(small_paths, monkeypatch):
    monkeypatch.delenv(SECRET_ENV, raising=False)
    with ScriptedProvider([]) as provider, pytest.raises(TmlbenchError, match=SECRET_ENV):
        attempt(small_paths, cli_agent(provider, 9), TASK, code_dir=AGENTS)
    assert not any(small_paths.runs_dir.rglob("record.json"))


def test_a_cli_agent_whose_cli_is_not_installed_says_how_to_install_it(small_paths, tmp_path):
    agent = AgentSpec.model_validate(
        {"id": "needs-cli", "kind": "command", "title": "t", "harness": "h", "command": ["x"],
         "cli": {"npm": "@example/agent", "version": "1.2.3", "bin": "agent"}}
    )  # fmt: skip
    with pytest.raises(TmlbenchError, match="tmlbench agents install needs-cli"):
        attempt(small_paths, agent, TASK, code_dir=AGENTS, clis_dir=tmp_path)
    assert not any(small_paths.runs_dir.rglob("record.json"))
