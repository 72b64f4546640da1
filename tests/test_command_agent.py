"""An external agent CLI (a stand-in) as a ``command`` agent: provider-only egress, keys, records.

The stand-in calls the scripted provider through the harness's allow-listing proxy, the only
way out of its sandbox; the record carries the proxy's counts, and its key is in no log.
"""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from runner.errors import TmlbenchError
from runner.registry import list_agents
from runner.specs import AgentSpec
from tests.openai_stub import ScriptedProvider, reply
from tests.test_attempt import attempt

pytestmark = [pytest.mark.sandbox, pytest.mark.timeout(120)]

TASK = "bank-customer-churn-ict-u-ai"
AGENTS = Path(__file__).parent / "sandbox_agents"
SECRET_ENV = "TMLBENCH_TEST_CLI_KEY"
SECRET = "sk-cli-secret-0123456789"


def cli_agent(provider: ScriptedProvider, direct_port: int) -> AgentSpec:
    allowed = f"127.0.0.1:{provider.port}"
    return AgentSpec.model_validate(
        {
            "id": "cli-stub",
            "kind": "command",
            "title": "stand-in agent CLI",
            "harness": "stub-cli",
            "model": {"provider": "stub", "model_id": provider.model},
            "command": ["{python}", "{agent_dir}/provider_cli.py", allowed,
                        "denied.example:443", str(direct_port), "{model}"],
            "egress": {"allow": [allowed]},
            "secrets": {"PROVIDER_KEY": SECRET_ENV},
        }
    )  # fmt: skip


@pytest.mark.parametrize("backend", ["bwrap", "docker"])
def test_a_cli_agent_reaches_only_its_provider_and_its_key_stays_out_of_the_logs(
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
    assert report["provider"]["status"] == 200
    assert report["provider"]["reply"]["choices"][0]["message"]["content"] == "hi"
    assert provider.requests[0].authorized and provider.mismatches == []
    assert report["denied"].startswith("HTTP/1.1 403")
    assert report["direct"] in ("ConnectionRefusedError", "OSError", "TimeoutError")
    assert (record.egress_requests, record.egress_denied) == (1, 1)
    assert record.egress_bytes_up > 0 and record.egress_bytes_down > 0
    assert "debug: using key [redacted]" in stdout
    for path in run_dir.rglob("*"):
        if path.is_file():
            assert SECRET.encode() not in path.read_bytes(), path
    assert SECRET not in record.model_dump_json()


def test_a_cli_agent_without_its_key_does_not_start(small_paths, monkeypatch):
    monkeypatch.delenv(SECRET_ENV, raising=False)
    with ScriptedProvider([]) as provider, pytest.raises(TmlbenchError, match=SECRET_ENV):
        attempt(small_paths, cli_agent(provider, 9), TASK, code_dir=AGENTS)
    assert not any(small_paths.runs_dir.rglob("record.json"))


def test_shipped_cli_templates_fill_every_placeholder():
    from runner.drivers import sandbox_fields
    from runner.sandbox import SandboxPaths

    paths = SandboxPaths(workspace="/workspace", agent_dir="/opt/agent", python="/py")
    clis = [a for a in list_agents(Path(__file__).parents[1] / "agents") if a.kind == "command"]
    assert {a.harness for a in clis} >= {"kilo-cli", "aider", "codex-cli"}
    for agent in clis:
        fields = sandbox_fields(paths, agent, 600, 7, "Do the task in INSTRUCTIONS.md")
        argv = [part.format(**fields) for part in agent.command]
        assert argv[-1] == "Do the task in INSTRUCTIONS.md", agent.id
        assert not any("{" in part for part in argv), agent.id
        assert agent.egress and agent.secrets and not agent.trusted
    kilo = next(a for a in clis if a.harness == "kilo-cli")
    argv = [p.format(**sandbox_fields(paths, kilo, 600, 7, "P")) for p in kilo.command]
    assert argv[:6] == ["kilo", "--nosplash", "--auto", "--json", "--yolo", "--timeout"]
    assert argv[6:14] == ["600", "--workspace", "/workspace", "--provider", "chutes", "--model",
                          "Qwen/Qwen3-Coder-480B-A35B-Instruct-FP8", "P"][:8]  # fmt: skip
