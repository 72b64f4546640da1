"""What each agent kind adds around its sandboxed process.

- ``baseline``: our own program, from its argv template.
- ``command``: an external agent CLI from its argv template; with ``egress`` it reaches only
  its provider's hosts, through the harness's allow-listing proxy (``runner.egress``), and
  gets only the keys named in ``secrets`` (redacted from its logs and files afterwards).
- ``llm``: the sandbox runs the tool host; the model conversation runs here in the harness
  (``runner.llm``), holding the API key the sandbox never sees.

A driver is used as a context manager around ``Sandbox.run``: it starts what must run beside
the sandbox, and afterwards says what it adds to the record (usage, or a status of its own).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from runner.egress import SOCKET_NAME, EgressProxy, egress_binds, wrap_command
from runner.egress import socket_path as egress_socket
from runner.errors import HarnessError, TmlbenchError
from runner.llm.session import LlmSession
from runner.sandbox import Bind, Sandbox, SandboxPaths
from runner.specs import AgentSpec

TOOLHOST_DIR = Path(__file__).parent / "llm" / "toolhost"
TOOLS_INSIDE = "/run/tmlbench/tools"
TRANSCRIPT_FILE = "transcript.jsonl"


def check_credentials(agent: AgentSpec) -> None:
    """Before anything runs: every key the agent needs is set in the harness's environment."""
    names = list(agent.secrets.values())
    if agent.llm is not None and agent.llm.api_key_env:
        names.append(agent.llm.api_key_env)
    missing = [n for n in names if not os.environ.get(n)]
    if missing:
        raise TmlbenchError(
            f"agent {agent.id} needs the environment variable(s) {', '.join(missing)} "
            "(its provider's API key); export it before running"
        )


class ProgramDriver:
    """A baseline or command agent: its argv template, nothing beside it."""

    binds: tuple[Bind, ...] = ()

    def __init__(self, agent: AgentSpec, agent_code_dir: Path | None):
        self.agent = agent
        self.agent_dir = agent_code_dir

    def command(self, sandbox: Sandbox, fields: dict[str, str]) -> list[str]:
        return [part.format(**fields) for part in self.agent.command]

    def __enter__(self) -> ProgramDriver:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def extra_env(self) -> dict[str, str]:
        """Variables added to the sandbox's (otherwise host-free) environment."""
        return {}

    def record_fields(self) -> dict:
        return {}

    def status(self) -> dict | None:
        """A status that overrides grading (e.g. provider_error), or None."""
        return None


class CommandDriver(ProgramDriver):
    """An external agent CLI; with ``egress``, behind the allow-listing proxy."""

    def __init__(self, agent: AgentSpec, agent_code_dir: Path | None, run_dir: Path):
        super().__init__(agent, agent_code_dir)
        self.run_dir = run_dir
        self.secrets = {inside: os.environ.get(host, "") for inside, host in agent.secrets.items()}
        self.proxy: EgressProxy | None = None
        if agent.egress is not None:
            self.control = Path(tempfile.mkdtemp(prefix="tmlbench-egress-"))
            self.binds = egress_binds(self.control)
            self.proxy = EgressProxy(egress_socket(self.control), allow=agent.egress.allow)

    def command(self, sandbox: Sandbox, fields: dict[str, str]) -> list[str]:
        argv = super().command(sandbox, fields)
        if self.proxy is None:
            return argv
        forwarder, sockets = (sandbox.bind_path(b) for b in self.binds)
        return wrap_command(fields["python"], forwarder, f"{sockets}/{SOCKET_NAME}", argv)

    def extra_env(self) -> dict[str, str]:
        env = dict(self.secrets)
        if self.proxy is not None:
            env["NODE_USE_ENV_PROXY"] = "1"  # Node ≥ 24 honours HTTPS_PROXY only with this
        return env

    def __enter__(self) -> CommandDriver:
        if self.proxy is not None:
            self.proxy.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.proxy is not None:
            self.proxy.stop()
            shutil.rmtree(self.control, ignore_errors=True)
        redact(self.run_dir, [v for v in self.secrets.values() if v])

    def record_fields(self) -> dict:
        if self.proxy is None:
            return {}
        stats = self.proxy.stats()
        return {
            "egress_requests": stats.requests,
            "egress_denied": stats.denied,
            "egress_bytes_up": stats.bytes_up,
            "egress_bytes_down": stats.bytes_down,
        }


REDACTED = b"[redacted]"
REDACT_MAX_BYTES = 20 * 1024**2


def redact(run_dir: Path, secrets: list[str]) -> None:
    """Replace every secret in the attempt's logs and the files its agent left behind.

    Agent CLIs echo their configuration or cache keys under HOME (the workspace); none of it
    may outlive the attempt. Regular files only, never through a symlink.
    """
    needles = [s.encode() for s in secrets if len(s) >= 8]
    if not needles:
        return
    for root, _dirs, names in os.walk(run_dir):
        for name in names:
            path = Path(root) / name
            if path.is_symlink() or not path.is_file() or path.stat().st_size > REDACT_MAX_BYTES:
                continue
            data = path.read_bytes()
            cleaned = data
            for needle in needles:
                cleaned = cleaned.replace(needle, REDACTED)
            if cleaned != data:
                path.write_bytes(cleaned)


class LlmDriver(ProgramDriver):
    """The built-in coding agent: tool host in the sandbox, model loop in the harness."""

    def __init__(self, agent: AgentSpec, instructions: str, budget_seconds: int, run_dir: Path):
        super().__init__(agent, TOOLHOST_DIR)
        # A short host path: unix socket paths are limited to 107 bytes.
        self.control = Path(tempfile.mkdtemp(prefix="tmlbench-llm-"))
        self.binds = (Bind(self.control, TOOLS_INSIDE),)
        key_env = agent.llm.api_key_env if agent.llm else None
        self.session = LlmSession(
            agent,
            instructions,
            budget_seconds,
            self.control / "tools.sock",
            run_dir / TRANSCRIPT_FILE,
            os.environ.get(key_env) if key_env else None,
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

    def record_fields(self) -> dict:
        return self.session.record_fields()

    def status(self) -> dict | None:
        outcome = self.session.outcome
        if outcome.harness_fault:
            raise HarnessError(f"the agent loop failed:\n{outcome.harness_fault}")
        if outcome.provider_error:
            return {"status": "provider_error", "error_message": outcome.provider_error}
        return None


def make_driver(
    agent: AgentSpec,
    agent_code_dir: Path | None,
    instructions: str,
    budget_seconds: int,
    run_dir: Path,
) -> ProgramDriver:
    if agent.kind == "llm":
        return LlmDriver(agent, instructions, budget_seconds, run_dir)
    if agent.kind == "command":
        return CommandDriver(agent, agent_code_dir, run_dir)
    return ProgramDriver(agent, agent_code_dir)


def sandbox_fields(
    paths: SandboxPaths, agent: AgentSpec, budget: int, seed: int, prompt: str
) -> dict[str, str]:
    """The placeholders of an argv template, as seen inside the sandbox."""
    return {
        "python": paths.python,
        "agent_dir": paths.agent_dir,
        "workspace": paths.workspace,
        "budget": str(budget),
        "seed": str(seed),
        "instructions": f"{paths.workspace}/INSTRUCTIONS.md",
        "prompt": prompt,
        "model": agent.model.model_id or "",
        "provider": agent.model.provider or "",
    }
