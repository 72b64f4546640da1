"""Sandbox requests for the programs in tests/sandbox_agents: a workspace beside a fake private
folder, a request builder, and what an isolation probe must not reach on the host."""

from __future__ import annotations

import contextlib
import os
import socket
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from runner.config import REPO_ROOT
from runner.sandbox import (
    DockerSandbox,
    Sandbox,
    SandboxLimits,
    SandboxRequest,
    bwrap_available,
    bwrap_problem,
    docker_engine,
)

AGENTS = REPO_ROOT / "tests" / "sandbox_agents"
MIB = 2**20


def require_bwrap() -> None:
    if not bwrap_available():
        pytest.fail(f"bubblewrap is required for these tests: {bwrap_problem()}")


def containers(sb: DockerSandbox, selection: str) -> list[str]:
    """Names of the containers (any state) that docker's ``--filter selection`` picks
    (``name=<part>``, ``label=<key>=<value>``): what a test that made them finds left on the
    engine, whoever removed the others (another worker's harness sweeps orphans too). A listing
    that failed fails the test rather than reading as "nothing left"."""
    listed = docker_engine.docker_cli(
        sb.docker, "ps", "-a", "--filter", selection, "--format", "{{.Names}}"
    )
    assert listed.returncode == 0, listed.stderr
    return listed.stdout.split()


class Attempt:
    """A workspace next to a fake private dir, and a request builder."""

    def __init__(self, root: Path, sandbox: Sandbox):
        self.sandbox = sandbox
        self.task = root / "task"
        self.workspace = self.task / "workspace"
        self.private = self.task / "private"
        self.workspace.mkdir(parents=True)
        self.private.mkdir()
        (self.private / "answers.csv").write_text("id,target\n1,0\n")
        self.logs = root / "logs"
        self.marker = f"tmlbench-test-{uuid.uuid4().hex}"
        self.paths = sandbox.paths(self.workspace, AGENTS)

    def request(self, command: list[str], limits: SandboxLimits, **kw) -> SandboxRequest:
        env = {"PATH": "/usr/bin:/bin", "HOME": self.paths.workspace, "MARKER": self.marker}
        env.update(kw.pop("env", {}))
        return SandboxRequest(
            command=command,
            workspace=self.workspace,
            agent_dir=AGENTS,
            env=env,
            limits=limits,
            stdout_path=self.logs / "stdout.log",
            stderr_path=self.logs / "stderr.log",
            **kw,
        )

    def agent(self, script: str, *args: str) -> list[str]:
        return [self.paths.python, f"{self.paths.agent_dir}/{script}", *args]

    def survivors(self) -> list[int]:
        """Host pids of live processes that carry this attempt's marker in their environment."""
        needle = self.marker.encode()
        found = []
        for name in os.listdir("/proc"):
            if not name.isdigit():
                continue
            try:
                with open(f"/proc/{name}/environ", "rb") as f:
                    if needle in f.read():
                        found.append(int(name))
            except OSError:
                continue
        return found

    def stdout(self) -> str:
        return (self.logs / "stdout.log").read_text(errors="replace")

    def stderr(self) -> str:
        return (self.logs / "stderr.log").read_text(errors="replace")


@contextlib.contextmanager
def host_bait() -> Iterator[int]:
    """What an isolation probe must not reach: a secret in the harness's environment and a
    server on the host's loopback (its port is yielded)."""
    os.environ["TMLBENCH_TEST_API_KEY"] = "sk-live-secret"
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    try:
        yield listener.getsockname()[1]
    finally:
        del os.environ["TMLBENCH_TEST_API_KEY"]
        listener.close()


def probe_command(att: Attempt, port: int, *more_paths: str) -> list[str]:
    """probe.py trying the host's loopback, the private answers, a repo file and host secrets."""
    repo_file = REPO_ROOT / "pyproject.toml"
    paths = [str(att.private / "answers.csv"), str(repo_file), "/workspace/../private/answers.csv"]
    paths += ["/root/.bashrc", "/etc/shadow", *more_paths]
    return att.agent("probe.py", str(port), *paths)
