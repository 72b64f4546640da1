"""Faults every attempt of a setting would hit alike, found before any attempt starts.

An attempt whose task is not prepared, whose agent's CLI is missing, or which the sandbox
cannot run would fail, and every re-run of it would fail the same way: recording such attempts
would only use up the setting's harness-error ceiling and repeat one sentence per attempt. So
``Bench.run`` checks its settings here first and refuses the whole run, naming each distinct
fault once with the one thing to do about it (``Remedies``: a ``tmlbench`` command, or in
Dagster the asset to materialize). What a fault *is* lives here; how to fix it is worded by the
front end that started the run.

The checks mirror what the attempt path would raise on (``run_attempt``: isolation,
``drivers.preflight``, prepared data; ``attempt_runner``: the agent's code folder, the CPU pool),
which stays in place as a last defence.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, Protocol

from runner.agents.drivers import api_key_env, provider_key
from runner.agents.installs import find_installed
from runner.errors import TmlbenchError
from runner.sandbox import Sandbox
from runner.specs import AgentSpec
from runner.specs.registry import agent_code_dir
from runner.suites.benchmark_settings import Setting
from runner.tasks.prepared_files import PreparedTask, public_problems

FaultKind = Literal[
    "task_not_prepared",  # no prepared data for the task at the suite's scale
    "task_data_mismatch",  # prepared public files (or their metadata) do not match the manifest
    "cli_missing",  # the agent's pinned CLI is not installed
    "api_key_missing",  # the provider's key variable is unset
    "backend_unfit",  # the sandbox backend cannot run this agent (e.g. docker, a Node.js CLI)
    "not_isolated",  # an untrusted agent on a backend that does not isolate
    "too_many_cpus",  # the agent wants more CPUs than the machine offers
    "agent_spec",  # the agent's spec names something that is not there (its code folder)
    "sandbox_unavailable",  # the backend cannot run anything here (e.g. docker without root)
]


@dataclass(frozen=True)
class Fault:
    """One fault of the run's set-up: its kind, the task or agent it is about, what is wrong."""

    kind: FaultKind
    subject: str  # the task id (task faults) or the agent id (the others)
    problem: str  # what is wrong, without the remedy


class Remedies(Protocol):
    """How the front end that started a run words the one thing to do about a fault."""

    def fix(self, fault: Fault) -> str:
        """What to do so the fault is gone (a command, an asset to materialize, a field to set)."""
        ...

    def resume(self, setting: Setting) -> str:
        """How to resume a setting stopped at a fault ceiling once its fault is fixed."""
        ...

    def setting_name(self, key: str) -> str:
        """A setting as the front end shows it (its key ``agent|task|budget``, a partition)."""
        ...


@dataclass(frozen=True)
class CliRemedies:
    """The ``tmlbench`` commands that fix each fault, for a run started from the CLI."""

    suite_id: str

    def fix(self, fault: Fault) -> str:
        match fault.kind:
            case "task_not_prepared" | "task_data_mismatch":
                return f"run `tmlbench tasks prepare --suite {self.suite_id} {fault.subject}`"
            case "cli_missing":
                return f"run `tmlbench agents install {fault.subject}`"
            case "api_key_missing":
                return "export it before running"
            case "backend_unfit":
                return "run it with `--backend bwrap`"
            case "not_isolated":
                return "use `--backend bwrap`, or pass `--unsafe-no-isolation` to accept the risk"
            case "too_many_cpus" | "agent_spec":
                return "fix the spec file named"
            case "sandbox_unavailable":
                return "fix that, or choose another `--backend`"

    def resume(self, setting: Setting) -> str:
        return (
            f"`tmlbench resume --suite {self.suite_id} '{setting.key}'` "
            f"(then `tmlbench bench --suite {self.suite_id}`)"
        )

    def setting_name(self, key: str) -> str:
        return key


@dataclass
class Refusal:
    """A fault and the settings it keeps from running."""

    fault: Fault
    settings: list[str] = field(default_factory=list)


class RunRefused(TmlbenchError):
    """The run started no attempt: each of ``refusals`` would fail every attempt it touches."""

    def __init__(self, suite_id: str, refusals: list[Refusal], remedies: Remedies):
        self.suite_id = suite_id
        self.refusals = refusals
        super().__init__(refusal_message(suite_id, refusals, remedies))

    @property
    def settings(self) -> list[str]:
        """Every refused setting's key, once, in the order found."""
        return list(dict.fromkeys(key for r in self.refusals for key in r.settings))


def refusal_message(suite_id: str, refusals: list[Refusal], remedies: Remedies) -> str:
    """One line per distinct fault: what is wrong, which settings it stops, what to do."""
    n = len({key for r in refusals for key in r.settings})
    lines = [f"suite {suite_id}: {n} setting(s) cannot run, so no attempt was started:"]
    for r in refusals:
        which = (
            remedies.setting_name(r.settings[0])
            if len(r.settings) == 1
            else f"{len(r.settings)} settings"
        )
        lines.append(f"- {r.fault.problem} ({which}): {remedies.fix(r.fault)}")
    return "\n".join(lines)


class Preflight:
    """The checks of one run's set-up: each task and agent is looked at once, however many
    settings share it."""

    def __init__(
        self,
        prepared: dict[str, PreparedTask],
        sandbox: Sandbox,
        *,
        agents_dir: Path,
        clis_dir: Path | None,
        host_cpus: int,
        runs_dir: Path,
        allow_unsafe: bool = False,
    ):
        self.prepared = prepared
        self.sandbox = sandbox
        self.agents_dir = agents_dir
        self.clis_dir = clis_dir
        self.host_cpus = host_cpus
        self.allow_unsafe = allow_unsafe
        self.runs_dir = runs_dir
        self._tasks: dict[str, list[Fault]] = {}
        self._agents: dict[str, list[Fault]] = {}
        self._sandbox: list[Fault] | None = None

    def refusals(self, settings: Iterable[Setting]) -> list[Refusal]:
        """Every distinct fault of these settings, with the settings it stops (none: all clear)."""
        found: dict[Fault, Refusal] = {}
        for setting in settings:
            for fault in self.faults(setting):
                found.setdefault(fault, Refusal(fault)).settings.append(setting.key)
        return list(found.values())

    def faults(self, setting: Setting) -> list[Fault]:
        task = setting.task.id
        if task not in self._tasks:
            self._tasks[task] = task_faults(task, self.prepared[task])
        agent = setting.agent
        if agent.id not in self._agents:
            self._agents[agent.id] = self._agent_faults(agent)
        if self._sandbox is None:  # asked once, and only if some setting wants attempts
            problem = self.sandbox.problem(self.runs_dir)
            self._sandbox = (
                [Fault("sandbox_unavailable", self.sandbox.name, problem)] if problem else []
            )
        return [
            *self._sandbox,
            *self._tasks[task],
            *self._agents[agent.id],
            *self._cpu_faults(setting),
        ]

    def _agent_faults(self, agent: AgentSpec) -> list[Fault]:
        faults = []
        if not self.sandbox.isolated and not agent.trusted and not self.allow_unsafe:
            faults.append(
                Fault(
                    "not_isolated",
                    agent.id,
                    f"agent {agent.id} is not a trusted built-in and the {self.sandbox.name} "
                    "backend does not isolate it",
                )
            )
        key_env = api_key_env(agent)
        if key_env and not provider_key(agent):
            faults.append(
                Fault(
                    "api_key_missing",
                    agent.id,
                    f"agent {agent.id} needs the environment variable {key_env} (its provider's "
                    "API key), which is not set",
                )
            )
        if agent.cli is not None:
            cli = find_installed(agent.cli, self.clis_dir)
            if cli is None:
                faults.append(
                    Fault(
                        "cli_missing",
                        agent.id,
                        f"agent {agent.id}'s CLI ({agent.cli.describe()}) is not installed",
                    )
                )
            elif self.sandbox.name == "docker" and cli.runtime != "native":
                needs = "Node.js" if cli.runtime == "node" else "the harness's Python"
                faults.append(
                    Fault(
                        "backend_unfit",
                        agent.id,
                        f"agent {agent.id}'s CLI needs {needs}, which the docker sandbox's image "
                        "does not carry",
                    )
                )
        try:
            agent_code_dir(self.agents_dir, agent)
        except TmlbenchError as exc:
            faults.append(Fault("agent_spec", agent.id, str(exc)))
        return faults

    def _cpu_faults(self, setting: Setting) -> list[Fault]:
        agent = setting.agent
        if agent.limits.cpus <= self.host_cpus:
            return []
        suite = setting.suite_id or "(none)"
        return [
            Fault(
                "too_many_cpus",
                agent.id,
                f"agent {agent.id} wants {agent.limits.cpus} CPUs per attempt (its limits.cpus, "
                f"or suite {suite}'s cpus_per_attempt) but this machine offers {self.host_cpus}",
            )
        ]


def task_faults(task_id: str, prepared: PreparedTask) -> list[Fault]:
    """What keeps the task's prepared data from being used: not there, or not what its manifest
    (or its metadata, which every record reads for the trivial score) says."""
    if not prepared.exists():
        return [
            Fault("task_not_prepared", task_id, f"task {task_id} is not prepared ({prepared.root})")
        ]
    try:
        problems = public_problems(prepared)
        prepared.trivial_score()  # read into every record: unreadable metadata fails them all
    except TmlbenchError as exc:
        problems = [str(exc).split("; re-prepare")[0]]
    if not problems:
        return []
    more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
    return [
        Fault(
            "task_data_mismatch",
            task_id,
            f"task {task_id}'s prepared data does not match its manifest: {problems[0]}{more}",
        )
    ]
