"""``tmlbench agents check``: an offline pre-flight of a command agent, before a paid run.

It runs the agent's real CLI in the real sandbox against a scripted provider on loopback
that speaks the agent's protocol (``runner.agents.scripted_provider``) and plays a model that solves
the task by having the CLI execute commands it writes. Step by step it reports whether the
CLI is installed, starts, reaches the gateway, runs a command, writes a submission that
grades, and stops at its budget; each failure says what to do. No API key, no network.
"""

from __future__ import annotations

import contextlib
import json
import re
import secrets
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from runner.agents.installs import find_installed
from runner.agents.scripted_provider import ScriptedProvider, ScriptEntry, hang, solve_task_script
from runner.attempts.attempt import AttemptContext, AttemptPlan, run_attempt
from runner.attempts.records import RunRecord
from runner.config import Paths
from runner.errors import TmlbenchError
from runner.sandbox import get_sandbox
from runner.specs import AgentSpec
from runner.specs.registry import agent_code_dir, load_task, task_spec_sha256
from runner.tasks.preparation import prepare_twin
from runner.tasks.private_meta import TaskMeta

CHECK_TASK = "bank-customer-churn-ict-u-ai"
CHECK_ROWS = 2000
# The key variable the checked spec names; never set: the key is passed to the attempt itself.
KEY_ENV = "TMLBENCH_CHECK_PROVIDER_KEY"
# What the solving command prints; seen in a later request = its output reached the model.
COMMAND_OUTPUT = re.compile(r"local_validation_score:\s*[-+]?[0-9]")
STOP_SLACK_SECONDS = 3.0
STEP_NAMES = (
    "CLI installed",
    "starts",
    "reaches the gateway",
    "runs a command",
    "writes a submission that grades",
    "usage and transcript recorded",
    "stops at its budget",
)


@dataclass(frozen=True)
class CheckStep:
    name: str
    ok: bool | None  # None: not reached (an earlier step failed)
    detail: str
    hint: str = ""


@dataclass
class CheckReport:
    agent_id: str
    steps: list[CheckStep]
    runs_dir: Path

    @property
    def ok(self) -> bool:
        return all(step.ok for step in self.steps)


def check_agent(
    agent: AgentSpec,
    paths: Paths,
    *,
    backend: str = "bwrap",
    budget: int = 240,
    stop_budget: int = 20,
    work_dir: Path | None = None,
    on_step: Callable[[CheckStep], None] = lambda _step: None,
) -> CheckReport:
    """Run the pre-flight; ``work_dir`` keeps the prepared task and the two attempts' run folders."""
    if agent.kind != "command" or agent.gateway is None:
        raise TmlbenchError(
            f"agent {agent.id}: `agents check` is for command agents with a 'gateway' "
            f"(this one is kind {agent.kind!r}{'' if agent.gateway else ', without a gateway'})"
        )
    work = work_dir or Path(tempfile.mkdtemp(prefix=f"tmlbench-check-{agent.id}-"))
    report = CheckReport(agent.id, [], work / "runs")

    def add(step: CheckStep) -> bool:
        report.steps.append(step)
        on_step(step)
        return bool(step.ok)

    if not add(_installed_step(agent, paths)):
        return _rest_skipped(report, add)
    task = load_task(paths.tasks_dir, CHECK_TASK)
    prepared = prepare_twin(task, paths.tasks_dir, work / "data", rows=CHECK_ROWS)
    sandbox = get_sandbox(backend)

    def run(
        script: Sequence[ScriptEntry], budget_seconds: int, index: int
    ) -> tuple[RunRecord, ScriptedProvider]:
        key = "sk-check-" + secrets.token_hex(16)
        with ScriptedProvider(
            script, api_key=key, model=agent.model.model_id or "model"
        ) as provider:
            checked = point_at(agent, provider.base_url, KEY_ENV)
            ctx = AttemptContext(
                prepared=prepared,
                runs_dir=report.runs_dir,
                sandbox=sandbox,
                agent_code_dir=agent_code_dir(paths.agents_dir, agent),
                task_spec_sha256=task_spec_sha256(paths.tasks_dir, CHECK_TASK),
                clis_dir=paths.clis_dir,
                provider_key=key,  # the scripted provider's one-off key, handed to the gateway
            )
            record = run_attempt(AttemptPlan(checked, task, budget_seconds, index, "quick"), ctx)
        return record, provider

    record, provider = run(solve_task_script(), budget, 0)
    run_dir = report.runs_dir / record.run_id
    steps = _solve_steps(record, provider, run_dir, prepared.meta())
    for step in steps:
        if not add(step):
            return _rest_skipped(report, add)
    record, _ = run([hang(budget + stop_budget + 60)], stop_budget, 1)
    add(_stop_step(record, stop_budget, report.runs_dir / record.run_id))
    return report


def _installed_step(agent: AgentSpec, paths: Paths) -> CheckStep:
    name = "CLI installed"
    if agent.cli is None:
        return CheckStep(name, True, "no pinned CLI: the command runs from the sandbox's /usr")
    installed = find_installed(agent.cli, paths.clis_dir)
    if installed is None:
        return CheckStep(
            name,
            False,
            f"{agent.cli.describe()} is not installed",
            f"run `tmlbench agents install {agent.id}`",
        )
    return CheckStep(name, True, f"{installed.reported_version} ({agent.cli.describe()})")


def _solve_steps(
    record: RunRecord, provider: ScriptedProvider, run_dir: Path, meta: TaskMeta
) -> list[CheckStep]:
    stderr = _tail(run_dir / "stderr.log") or _tail(run_dir / "stdout.log")
    logs = f"see {run_dir}/stderr.log and stdout.log"
    steps = []
    if record.status == "harness_error":
        return [CheckStep("starts", False, record.error_message or "harness error", logs)]
    started = bool(provider.requests) or record.exit_code == 0
    steps.append(
        CheckStep(
            "starts",
            started,
            f"ran {record.wall_seconds or 0:.1f} s, exit code {record.exit_code}",
            "" if started else f"it failed before calling its model: {stderr}; {logs}",
        )
    )
    requests = provider.requests
    reached = bool(requests) and all(r.authorized for r in requests)
    first = _first_call_seconds(run_dir / "transcript.jsonl")
    detail = (
        f"{len(requests)} request(s), real key added by the gateway; first model call "
        f"{first:.1f} s after the start" if reached and first is not None
        else f"{len(requests)} request(s), real key added by the gateway" if reached
        else "no request reached the provider"
    )  # fmt: skip
    if record.forbidden_requests:  # what a new CLI needs beyond the allow-list shows here
        detail += (
            f"; {record.forbidden_requests} request(s) off the gateway's allow-list refused "
            "with 403 (its transcript.jsonl's forbidden lines name them)"
        )
    hint = (
        ""
        if reached
        else "its base URL must be {gateway_url} and its key {gateway_key} (env or files in the "
        f"agent spec); hosts it tried instead: {record.egress_denied_hosts or 'none'}; {stderr}"
    )
    steps.append(CheckStep("reaches the gateway", reached, detail, hint))
    ran = any(COMMAND_OUTPUT.search(r.text) for r in requests[1:])
    steps.append(
        CheckStep(
            "runs a command",
            ran,
            "the model's command ran and its output came back"
            if ran
            else "the command the model asked for never ran (or its output never came back)",
            ""
            if ran
            else "let the CLI run shell commands without asking (its auto-approve/yolo flag) "
            f"and check the tool it offers the model; {logs}",
        )
    )
    constant = meta.constant_score
    graded = record.status == "success"
    detail = f"status {record.status}"
    if graded:
        detail += f", score {record.score:.4f} (constant prediction: {constant:.4f})"
    steps.append(
        CheckStep(
            "writes a submission that grades",
            graded,
            detail,
            "" if graded else f"{record.error_message or record.validation_message or ''}; {logs}",
        )
    )
    counted = record.tokens_in is not None and (run_dir / "transcript.jsonl").is_file()
    steps.append(
        CheckStep(
            "usage and transcript recorded",
            counted,
            f"{record.tokens_in} tokens in, {record.tokens_out} out, {record.requests} requests"
            if counted
            else "the gateway saw no usage",
            "" if counted else "the CLI's requests must go to {gateway_url}",
        )
    )
    return steps


def _stop_step(record: RunRecord, budget: int, run_dir: Path) -> CheckStep:
    wall = record.wall_seconds or 0.0
    stopped = record.status == "timeout" and wall <= budget + STOP_SLACK_SECONDS
    return CheckStep(
        "stops at its budget",
        stopped,
        f"model never answered: status {record.status} after {wall:.1f} s (budget {budget} s)",
        "" if stopped else f"see {run_dir}/stderr.log",
    )


def _rest_skipped(report: CheckReport, add: Callable[[CheckStep], bool]) -> CheckReport:
    done = {s.name for s in report.steps}
    for name in STEP_NAMES:
        if name not in done:
            add(CheckStep(name, None, "not reached"))
    return report


def point_at(agent: AgentSpec, provider_url: str, key_env: str) -> AgentSpec:
    """The agent with its gateway aimed at another provider (same base path as the real one)."""
    assert agent.gateway is not None
    path = urlsplit(agent.gateway.base_url).path.rstrip("/")
    origin = urlsplit(provider_url)
    gateway = agent.gateway.model_copy(
        update={"base_url": f"{origin.scheme}://{origin.netloc}{path}", "api_key_env": key_env}
    )
    return agent.model_copy(update={"gateway": gateway})


def _first_call_seconds(transcript: Path) -> float | None:
    """Seconds from the gateway's start (the attempt's) to the CLI's first model call."""
    try:
        lines = transcript.read_text(encoding="utf-8").splitlines()
    except OSError:
        return None
    starts = []
    for line in lines:
        with contextlib.suppress(ValueError, TypeError):
            event = json.loads(line)
            if isinstance(event, dict) and event.get("event") == "model_call":
                # ``t`` is written when a call ends, and calls may overlap (a title request
                # beside the first turn): the earliest start is t - seconds at its smallest.
                starts.append(float(event["t"]) - float(event.get("seconds", 0.0)))
    return min(starts, default=None)


def _tail(path: Path, limit: int = 400) -> str:
    try:
        data = path.read_bytes()[-limit:]
    except OSError:
        return ""
    return json.dumps(data.decode("utf-8", "replace").strip())[1:-1]
