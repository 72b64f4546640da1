"""Every shipped agent CLI, installed from its registry at its pinned version, run for real.

Each ``kind: command`` agent in agents/ runs in the bwrap sandbox against the scripted
provider on loopback, which speaks the CLI's protocol and plays a model that has the CLI
execute the commands it writes (look at the data, fit scikit-learn, write submission.csv).
The CLI talks only to the gateway, with a placeholder key; the provider sees the real one.
`make test` installs the CLIs first (`tmlbench agents install --all`, cached).

One real attempt per CLI and scenario: the solving tests and the retry's share one attempt
(the ``solved`` fixture); a rejected key, a provider that stops answering and the docker
backend have one each (and another with twice the budget when a loaded host's start-up used the
first up before the CLI reached the scenario: ``until_reached``).
"""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass
from pathlib import Path

import pytest

from runner.agents.check import point_at
from runner.agents.installs import find_installed
from runner.agents.scripted_provider import ScriptedProvider, error, hang, repeat, solve_task_script
from runner.attempts.records import RunRecord
from runner.config import Paths
from runner.errors import TmlbenchError
from runner.specs import AgentSpec
from tests.support.attempts import attempt
from tests.support.cli_agents import CLI_AGENTS, KEY_ENV, ONE_PER_CLI, TASK, until_reached
from tests.support.prepared_tasks import shared_paths

# xdist_group: its module fixtures (each CLI's shared attempt) run once, on one worker, not on each
pytestmark = [
    pytest.mark.sandbox,
    pytest.mark.slow,
    pytest.mark.timeout(600),
    pytest.mark.xdist_group("agent_clis"),
]


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


@dataclass
class Solved:
    """One attempt of a CLI that met a rate limit, then solved the task (what it left)."""

    agent: AgentSpec
    paths: Paths
    record: RunRecord
    provider: ScriptedProvider
    run_dir: Path


@pytest.fixture(scope="module", params=ONE_PER_CLI, ids=_ids(ONE_PER_CLI))
def solved(request: pytest.FixtureRequest, small_data: Path, tmp_path_factory) -> Solved:
    """Each CLI's one attempt at the task, shared by the tests below (one real run per CLI): the
    provider answers its first call with a 429 (Retry-After: 1 s), then plays the model that
    solves the task. A rate limit retried is part of every real session, so the solving tests
    lose nothing to it, and the retry's tests get a CLI that went on to the end."""
    agent: AgentSpec = request.param
    paths = shared_paths(small_data, tmp_path_factory.mktemp(f"solved-{agent.harness}") / "runs")
    script = [error(429, "slow down", retry_after=1), *solve_task_script()]
    with pytest.MonkeyPatch.context() as monkeypatch:
        record, provider, run_dir = run(paths, monkeypatch, agent, script, 240)
    return Solved(agent, paths, record, provider, run_dir)


def test_the_cli_solves_the_task_by_running_the_commands_its_model_writes(solved: Solved):
    record, provider, run_dir = solved.record, solved.provider, solved.run_dir
    logs = (run_dir / "stderr.log").read_text(errors="replace")[-3000:]
    assert record.status == "success", (record.error_message, record.validation_message, logs)
    meta = json.loads((solved.paths.data_dir / "tasks" / TASK / "private/meta.json").read_text())
    assert record.score > meta["constant_score"] + 0.1, (record.score, meta)
    assert solved.agent.cli is not None
    assert record.harness_version == find_installed(solved.agent.cli).reported_version
    # Every model call went through the gateway, which added the real key.
    assert provider.requests and all(r.authorized for r in provider.requests)
    assert provider.mismatches == []
    assert record.requests == len(provider.requests) >= 3
    # The gateway's allow-list blocks none of the CLI's own calls (a 403 here is a regression).
    assert (record.forbidden_requests, record.other_requests) == (0, 0), calls_of(run_dir)
    assert record.tokens_in and record.tokens_out and record.steps >= 2
    assert record.cost_usd is None or record.cost_usd > 0
    calls = [json.loads(line) for line in (run_dir / "transcript.jsonl").read_text().splitlines()]
    assert sum(c["event"] == "model_call" for c in calls) == record.requests


def test_a_rate_limit_then_success_is_a_counted_retry(solved: Solved):
    record, provider = solved.record, solved.provider
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
    # Kilo, Codex, OpenCode and aider stop at the 401; Claude Code retries it until the budget
    # ends the attempt, mini-swe-agent with backoff for ~20 s (cut short by 15 s: the same
    # verdict, the last call a fault). Kilo's ~20 s of start-up gets a budget it never uses up.
    budget = 60 if agent.harness == "kilo-cli" else 15
    (record, _, _), _ = until_reached(
        lambda budget: run(small_paths, monkeypatch, agent, script, budget),
        lambda outcome: len(outcome[1].requests) >= 1,  # the key was tried
        budget,
    )
    assert record.status == "provider_error", record.error_message
    assert "401" in record.error_message


@pytest.mark.parametrize("agent", ONE_PER_CLI, ids=_ids(ONE_PER_CLI))
def test_a_provider_that_stops_answering_ends_in_a_timeout_at_the_budget(
    small_paths, monkeypatch, agent
):
    script = [error(429, "slow down", retry_after=1), repeat(hang(120))]
    (record, _, _), budget = until_reached(
        lambda budget: run(small_paths, monkeypatch, agent, script, budget),
        lambda outcome: len(outcome[1].requests) >= 2,  # the 429, then the call left hanging
        30 if agent.harness == "kilo-cli" else 15,  # Kilo alone takes ~20 s to start
    )
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
