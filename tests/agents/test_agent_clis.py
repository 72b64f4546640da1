"""Every shipped agent CLI, installed from its registry at its pinned version, run for real.

Each ``kind: command`` agent in agents/ runs in the bwrap sandbox against the scripted
provider on loopback, which speaks the CLI's protocol and plays a model that has the CLI
execute the commands it writes (look at the data, fit scikit-learn, write submission.csv).
The CLI talks only to the gateway, with a placeholder key; the provider sees the real one.
`make test` installs the CLIs first (`tmlbench agents install --all`, cached).
"""

from __future__ import annotations

import json
import secrets

import pytest

from runner.agents.check import point_at
from runner.agents.installs import find_installed
from runner.agents.scripted_provider import ScriptedProvider, error, hang, repeat, solve_task_script
from runner.errors import TmlbenchError
from runner.specs import AgentSpec
from tests.support.attempts import attempt
from tests.support.cli_agents import CLI_AGENTS, KEY_ENV, ONE_PER_CLI, TASK

pytestmark = [pytest.mark.sandbox, pytest.mark.slow, pytest.mark.timeout(600)]


def installed(agent: AgentSpec) -> AgentSpec:
    assert agent.cli is not None
    assert find_installed(agent.cli) is not None, (
        f"{agent.cli.describe()} is not installed: run `make clis` "
        f"(tmlbench agents install {agent.id})"
    )
    return agent


def run(paths, monkeypatch, agent: AgentSpec, script: list, budget: int, backend: str = "bwrap"):
    """One attempt of ``agent`` against a scripted provider; returns (record, provider, run_dir)."""
    key = "sk-test-" + secrets.token_hex(12)
    monkeypatch.setenv(KEY_ENV, key)
    model = agent.model.model_id or "model"
    with ScriptedProvider(script, api_key=key, model=model, any_model=True) as provider:
        pointed = point_at(installed(agent), provider.base_url, KEY_ENV)
        record = attempt(paths, pointed, TASK, budget, backend=backend)
    run_dir = paths.runs_dir / record.run_id
    for path in run_dir.rglob("*"):  # the key stays in the harness: nowhere in the run folder
        if path.is_file() and not path.is_symlink():
            assert key.encode() not in path.read_bytes(), path
    assert key not in record.model_dump_json()
    return record, provider, run_dir


def calls_of(run_dir) -> list[str]:
    """The gateway's transcript lines other than model calls: what a CLI sent besides them."""
    lines = (run_dir / "transcript.jsonl").read_text().splitlines()
    return [line for line in lines if '"model_call"' not in line]


def _ids(agents):
    return [a.id for a in agents]


@pytest.mark.parametrize("agent", ONE_PER_CLI, ids=_ids(ONE_PER_CLI))
def test_the_cli_solves_the_task_by_running_the_commands_its_model_writes(
    small_paths, monkeypatch, agent: AgentSpec
):
    record, provider, run_dir = run(small_paths, monkeypatch, agent, solve_task_script(), 240)
    logs = (run_dir / "stderr.log").read_text(errors="replace")[-3000:]
    assert record.status == "success", (record.error_message, record.validation_message, logs)
    meta = json.loads((small_paths.data_dir / "tasks" / TASK / "private/meta.json").read_text())
    assert record.score > meta["constant_score"] + 0.1, (record.score, meta)
    assert record.harness_version == find_installed(agent.cli).reported_version
    # Every model call went through the gateway, which added the real key.
    assert provider.requests and all(r.authorized for r in provider.requests)
    assert provider.mismatches == []
    assert record.requests == len(provider.requests) >= 2
    # The gateway's allow-list blocks none of the CLI's own calls (a 403 here is a regression).
    assert (record.forbidden_requests, record.other_requests) == (0, 0), calls_of(run_dir)
    assert record.tokens_in and record.tokens_out and record.steps >= 2
    assert record.cost_usd is None or record.cost_usd > 0
    calls = [json.loads(line) for line in (run_dir / "transcript.jsonl").read_text().splitlines()]
    assert sum(c["event"] == "model_call" for c in calls) == record.requests


@pytest.mark.parametrize("agent", ONE_PER_CLI, ids=_ids(ONE_PER_CLI))
def test_a_rate_limit_then_success_is_a_counted_retry(small_paths, monkeypatch, agent):
    script = [error(429, "slow down", retry_after=1), *solve_task_script()]
    record, provider, _ = run(small_paths, monkeypatch, agent, script, 240)
    assert record.status == "success", record.error_message
    assert record.retries >= 1 and provider.requests[0].status == 429
    # One provider fault, recovered; only the complete replies are steps and tokens.
    assert (record.provider_faults, record.provider_fault_evidence) == (1, None)
    assert record.steps == record.requests - 1
    assert (record.tokens_in, record.tokens_out) == provider.usage_totals()
    assert (record.failed_tokens_in, record.interrupted_calls) == (0, 0)


@pytest.mark.parametrize("agent", ONE_PER_CLI, ids=_ids(ONE_PER_CLI))
def test_a_rejected_key_is_a_provider_error(small_paths, monkeypatch, agent):
    script = [repeat(error(401, "invalid api key", code="invalid_api_key"))]
    record, _, _ = run(small_paths, monkeypatch, agent, script, 30)
    assert record.status == "provider_error", record.error_message
    assert "401" in record.error_message


@pytest.mark.parametrize("agent", ONE_PER_CLI, ids=_ids(ONE_PER_CLI))
def test_a_provider_that_stops_answering_ends_in_a_timeout_at_the_budget(
    small_paths, monkeypatch, agent
):
    script = [error(429, "slow down", retry_after=1), repeat(hang(120))]
    budget = 30 if agent.harness == "kilo-cli" else 15  # Kilo alone takes ~20 s to start
    record, _, _ = run(small_paths, monkeypatch, agent, script, budget)
    # The budget stops the call the CLI made after the 429: a cut call, not a fault, and the
    # provider was answering again (it was still thinking): the timeout is the agent's.
    assert record.status == "timeout", record.error_message
    assert record.wall_seconds <= budget + 3
    assert (record.provider_faults, record.steps, record.provider_fault_evidence) == (1, 0, None)
    assert record.interrupted_calls >= 1 and record.requests == record.interrupted_calls + 1


def test_self_contained_clis_run_in_the_docker_sandbox_too_and_the_others_are_refused(
    small_paths, monkeypatch
):
    native = [a for a in ONE_PER_CLI if installed(a) and find_installed(a.cli).runtime == "native"]
    assert native, "Claude Code and OpenCode ship native binaries"
    for agent in native:
        record, _, _ = run(small_paths, monkeypatch, agent, solve_task_script(), 240, "docker")
        assert record.sandbox_backend == "docker"
        assert record.status == "success", (agent.id, record.error_message)
    needs_runtime = next(a for a in ONE_PER_CLI if find_installed(a.cli).runtime != "native")
    with pytest.raises(TmlbenchError, match="--backend bwrap"):
        run(small_paths, monkeypatch, needs_runtime, solve_task_script(), 60, "docker")


def test_every_shipped_cli_agent_has_its_template_tested():
    assert {a.harness for a in CLI_AGENTS} == {a.harness for a in ONE_PER_CLI}
    assert len(ONE_PER_CLI) >= 6, sorted(a.harness for a in ONE_PER_CLI)
