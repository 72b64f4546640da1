"""What each agent kind adds around its sandboxed process.

- ``baseline``: our own program, from its argv template.
- ``command``: an external agent CLI (pinned in ``cli``, installed by ``tmlbench agents
  install``, mounted read-only). Its model provider is reached only through the harness's
  gateway (``runner.agents.gateway``), which holds the key, counts usage and writes the transcript;
  every other host goes through the allow-listing proxy (``runner.agents.egress``), which records
  what it refused. The sandbox holds a placeholder key only.
- ``llm``: the sandbox runs the tool host; the model conversation runs here in the harness
  (``runner.agents.llm``), holding the API key the sandbox never sees.

A driver is used as a context manager around ``Sandbox.run``: it starts what must run beside
the sandbox, and afterwards says what it adds to the record (usage, or a status of its own).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from runner.agents.egress import (
    GATEWAY_SOCKET_NAME,
    SOCKET_NAME,
    EgressProxy,
    egress_binds,
    wrap_command,
)
from runner.agents.egress import socket_path as egress_socket
from runner.agents.gateway import PLACEHOLDER_KEY, ProviderGateway, gateway_url
from runner.agents.gateway.spend import default_ceilings
from runner.agents.gateway.transcript import MAX_TRANSCRIPT_BYTES
from runner.agents.installs import InstalledCli, require_installed
from runner.agents.llm.session import LlmSession
from runner.agents.provider_faults import review as review_faults
from runner.agents.templates import fill
from runner.attempts.limits import WatchedCap
from runner.attempts.records import DriverReport, EgressReport, ModelUsage, Verdict
from runner.errors import HarnessError, TmlbenchError
from runner.sandbox import Bind, Sandbox, SandboxPaths
from runner.sandbox.views import private_dir
from runner.specs import AgentSpec

TOOLHOST_DIR = Path(__file__).parent / "llm" / "toolhost"
TOOLS_INSIDE = "/run/tmlbench/tools"
CLI_INSIDE = "/opt/tmlbench/cli"
TRANSCRIPT_FILE = "transcript.jsonl"


def preflight(
    agent: AgentSpec, sandbox: Sandbox, clis_dir: Path | None, api_key: str | None = None
) -> InstalledCli | None:
    """Before anything runs: the agent's key is at hand, its CLI is installed and can run here."""
    key_env = api_key_env(agent)
    if key_env and not provider_key(agent, api_key):
        raise TmlbenchError(
            f"agent {agent.id} needs the environment variable {key_env} "
            "(its provider's API key); export it before running"
        )
    cli = require_installed(agent, clis_dir)
    if cli is not None and sandbox.name == "docker" and cli.runtime != "native":
        needs = "Node.js" if cli.runtime == "node" else "the harness's Python"
        raise TmlbenchError(
            f"agent {agent.id}: its CLI ({cli.spec.describe()}) needs {needs}, which the docker "
            "sandbox's image does not carry; run it with --backend bwrap"
        )
    return cli


def api_key_env(agent: AgentSpec) -> str | None:
    key_env = agent.llm.api_key_env if agent.llm else None
    return key_env or (agent.gateway.api_key_env if agent.gateway else None)


def provider_key(agent: AgentSpec, api_key: str | None = None) -> str | None:
    """The provider's API key: the one a caller passes (agents check), else $<api_key_env>."""
    if api_key is not None:
        return api_key
    key_env = api_key_env(agent)
    return os.environ.get(key_env) if key_env else None


class ProgramDriver:
    """A baseline or command agent: its argv template, nothing beside it."""

    binds: tuple[Bind, ...] = ()
    watched_cap: WatchedCap | None = None  # a cap it keeps beside the sandbox (spend)

    def __init__(self, agent: AgentSpec, agent_code_dir: Path | None):
        self.agent = agent
        self.agent_dir = agent_code_dir
        self._fault_evidence: list[str] | None = None  # set when faults decide the verdict

    def command(self, sandbox: Sandbox, fields: dict[str, str]) -> list[str]:
        return [fill(part, fields) for part in self.agent.command]

    def __enter__(self) -> ProgramDriver:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def environment(
        self, base: dict[str, str], sandbox: Sandbox, fields: dict[str, str]
    ) -> dict[str, str]:
        """The sandbox's complete environment: ``base`` (host-free) plus the driver's additions."""
        return base

    def prepare_home(self, home: Path, fields: dict[str, str]) -> None:
        """Write what the agent needs in HOME (the workspace) before it starts."""

    def report(self) -> DriverReport:
        """What the driver counted beside the sandbox (usage, egress), for the record."""
        return DriverReport()

    def status(self) -> Verdict | None:
        """A status that overrules grading (e.g. a fatal provider_error), or None."""
        return None

    def notes(self) -> list[str]:
        """What the record notes of what the driver truncated (e.g. its transcript)."""
        return []

    def review(self, verdict: Verdict) -> Verdict:
        """The final verdict, given the one grading would give (e.g. a provider fault's)."""
        return verdict

    def _review_faults(
        self, verdict: Verdict, unrecovered: int, evidence: tuple[str, ...]
    ) -> Verdict:
        """``verdict`` by the provider-fault rule (:func:`runner.agents.provider_faults.review`);
        when the faults decide it, the record lists them (:meth:`report`)."""
        reviewed = review_faults(verdict, unrecovered, evidence)
        if reviewed.status != verdict.status:
            self._fault_evidence = list(evidence)
        return reviewed


class CommandDriver(ProgramDriver):
    """An external agent CLI: provider through the gateway, other hosts through the proxy."""

    transcript_bytes = MAX_TRANSCRIPT_BYTES  # the transcript's host budget per attempt

    def __init__(
        self,
        agent: AgentSpec,
        agent_code_dir: Path | None,
        run_dir: Path,
        cli: InstalledCli | None,
        api_key: str | None = None,
        budget_seconds: int = 0,
    ):
        super().__init__(agent, agent_code_dir)
        self.cli = cli
        # A short host path: unix socket paths are limited to 107 bytes.
        self.control = private_dir("tmlbench-cmd-")  # sockets: on a tmpfs, no host path
        self.control.chmod(0o755)
        allow = agent.egress.allow if agent.egress else ()
        self.proxy = EgressProxy(egress_socket(self.control), allow=allow)
        self.gateway: ProviderGateway | None = None
        if agent.gateway is not None:
            spend = agent.gateway.spend
            ceilings = default_ceilings(
                budget_seconds,
                requests=spend.requests,
                tokens=spend.tokens,
                cost_usd=spend.cost_usd,
                prices=agent.gateway.prices,
            )
            self.gateway = ProviderGateway(
                self.control / GATEWAY_SOCKET_NAME,
                protocol=agent.gateway.protocol,
                base_url=agent.gateway.base_url,
                api_key=provider_key(agent, api_key),
                transcript_path=run_dir / TRANSCRIPT_FILE,
                request_timeout=agent.gateway.request_timeout_seconds,
                requests_per_minute=agent.gateway.requests_per_minute,
                spend=ceilings,
                max_transcript_bytes=self.transcript_bytes,
            )
            self.watched_cap = self.gateway.spend  # the sandbox ends the attempt past it
        self.binds = egress_binds(self.control)
        if cli is not None:
            self.binds += (Bind(cli.root, CLI_INSIDE),)

    def gateway_fields(self) -> dict[str, str]:
        if self.gateway is None:
            return {}
        return {
            "gateway_url": gateway_url(self.gateway.inside_path),
            "gateway_key": PLACEHOLDER_KEY,
        }

    def command(self, sandbox: Sandbox, fields: dict[str, str]) -> list[str]:
        argv = super().command(sandbox, fields | self.gateway_fields())
        forwarder, sockets = (sandbox.bind_path(b) for b in self.binds[:2])
        gateway_socket = f"{sockets}/{GATEWAY_SOCKET_NAME}" if self.gateway else None
        return wrap_command(
            fields["python"], forwarder, f"{sockets}/{SOCKET_NAME}", argv,
            gateway_socket_inside=gateway_socket,
        )  # fmt: skip

    def environment(
        self, base: dict[str, str], sandbox: Sandbox, fields: dict[str, str]
    ) -> dict[str, str]:
        fields = fields | self.gateway_fields()
        env = dict(base)
        if self.cli is not None:
            # After the harness's Python (so `python` has pandas), before the system's.
            cli_bin = f"{sandbox.bind_path(self.binds[-1])}/{self.cli.bin_dir}"
            python_dir, _, rest = env["PATH"].partition(":")
            env["PATH"] = f"{python_dir}:{cli_bin}:{rest}"
        env["NODE_USE_ENV_PROXY"] = "1"  # Node >= 24 honours HTTPS_PROXY only with this
        env.update({name: fill(value, fields) for name, value in self.agent.env.items()})
        return env

    def prepare_home(self, home: Path, fields: dict[str, str]) -> None:
        fields = fields | self.gateway_fields()
        for name, text in self.agent.files.items():
            path = home / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(fill(text, fields), encoding="utf-8")

    def __enter__(self) -> CommandDriver:
        self.proxy.start()
        if self.gateway is not None:
            self.gateway.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.gateway is not None:
            self.gateway.stop()
        self.proxy.stop()
        shutil.rmtree(self.control, ignore_errors=True)

    def report(self) -> DriverReport:
        usage = ModelUsage()  # the gateway's count of model usage, if it has one
        transcript = None
        if self.gateway is not None and self.agent.gateway is not None:
            usage = self.gateway.stats().usage(self.agent.gateway.prices, self._fault_evidence)
            if self.gateway.transcript_path.is_file():
                transcript = self.gateway.transcript_path.name
        egress = self.proxy.stats()
        return DriverReport.of(
            usage,
            EgressReport(
                egress_requests=egress.requests,
                egress_denied=egress.denied,
                egress_denied_hosts=egress.denied_hosts or None,
                egress_bytes_up=egress.bytes_up,
                egress_bytes_down=egress.bytes_down,
            ),
            transcript_path=transcript,
        )

    def notes(self) -> list[str]:
        note = self.gateway.transcript_note() if self.gateway is not None else None
        return [note] if note else []

    def status(self) -> Verdict | None:
        problem = self.gateway.stats().provider_error if self.gateway else None
        if problem:
            return Verdict(status="provider_error", error_message=problem)
        return None

    def review(self, verdict: Verdict) -> Verdict:
        """``provider_error`` for an attempt that would fail after unrecovered provider
        faults (the agent's last model call through the gateway was one)."""
        if self.gateway is None:
            return verdict
        stats = self.gateway.stats()
        return self._review_faults(verdict, stats.unrecovered_faults, stats.fault_evidence)


class LlmDriver(ProgramDriver):
    """The built-in coding agent: tool host in the sandbox, model loop in the harness."""

    def __init__(
        self,
        agent: AgentSpec,
        instructions: str,
        budget_seconds: int,
        run_dir: Path,
        api_key: str | None = None,
    ):
        super().__init__(agent, TOOLHOST_DIR)
        # A short host path: unix socket paths are limited to 107 bytes.
        self.control = private_dir("tmlbench-llm-")
        self.binds = (Bind(self.control, TOOLS_INSIDE),)
        self.session = LlmSession(
            agent,
            instructions,
            budget_seconds,
            self.control / "tools.sock",
            run_dir / TRANSCRIPT_FILE,
            provider_key(agent, api_key),
        )

    def command(self, sandbox: Sandbox, fields: dict[str, str]) -> list[str]:
        socket_path = f"{sandbox.bind_path(self.binds[0])}/tools.sock"
        return [fields["python"], f"{fields['agent_dir']}/toolhost.py", socket_path]

    def __enter__(self) -> LlmDriver:
        self.session.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.session.stop()
        shutil.rmtree(self.control, ignore_errors=True)

    def report(self) -> DriverReport:
        usage = self.session.usage(self._fault_evidence)
        return DriverReport.of(usage, transcript_path=self.session.transcript_path.name)

    def status(self) -> Verdict | None:
        outcome = self.session.outcome
        if outcome.harness_fault:
            raise HarnessError(f"the agent loop failed:\n{outcome.harness_fault}")
        if outcome.provider_error:
            return Verdict(status="provider_error", error_message=outcome.provider_error)
        if outcome.agent_fault:  # the sandboxed side broke the tool-host protocol
            return Verdict(status="runtime_error", error_message=outcome.agent_fault)
        return None

    def review(self, verdict: Verdict) -> Verdict:
        """``provider_error`` for an attempt that would fail after unrecovered provider
        faults (the model loop's last call was one)."""
        return self._review_faults(verdict, *self.session.client.calls.unrecovered())


def make_driver(
    agent: AgentSpec,
    agent_code_dir: Path | None,
    instructions: str,
    budget_seconds: int,
    run_dir: Path,
    cli: InstalledCli | None = None,
    api_key: str | None = None,
) -> ProgramDriver:
    if agent.kind == "llm":
        return LlmDriver(agent, instructions, budget_seconds, run_dir, api_key)
    if agent.kind == "command":
        return CommandDriver(agent, agent_code_dir, run_dir, cli, api_key, budget_seconds)
    return ProgramDriver(agent, agent_code_dir)


def sandbox_fields(
    paths: SandboxPaths, agent: AgentSpec, budget: int, seed: int, prompt: str
) -> dict[str, str]:
    """The placeholders of a template, as seen inside the sandbox (the gateway's: see CommandDriver)."""
    return {
        "python": paths.python,
        "agent_dir": paths.agent_dir,
        "workspace": paths.workspace,
        "home": paths.workspace,
        "budget": str(budget),
        "seed": str(seed),
        "instructions": f"{paths.workspace}/INSTRUCTIONS.md",
        "prompt": prompt,
        "model": agent.model.model_id or "",
        "provider": agent.model.provider or "",
    }
