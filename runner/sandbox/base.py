"""The one small interface every sandbox backend implements.

A backend runs one command with a hard wall-clock deadline and resource caps, and
reports what happened. It knows nothing about tasks, agents or grading.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path

GIB = 1024**3


@dataclass(frozen=True)
class SandboxLimits:
    """Caps for one attempt. ``cpuset`` pins the attempt to host CPUs (e.g. "0" or "0-1")."""

    wall_seconds: float
    memory_bytes: int = 4 * GIB
    pids: int = 256
    disk_bytes: int = 2 * GIB
    cpuset: str | None = None
    grace_seconds: float = 1.0


@dataclass(frozen=True)
class SandboxPaths:
    """Where things appear inside the sandbox, for building the agent's command line."""

    workspace: str
    agent_dir: str
    python: str


@dataclass(frozen=True)
class Bind:
    """A host folder the harness shares with the sandbox, e.g. one holding a unix socket.

    ``inside`` is where an isolating backend mounts it; ask ``Sandbox.bind_path`` where a
    given backend makes it appear (the process backend has no mounts: the host path).
    """

    host: Path
    inside: str
    writable: bool = False


@dataclass(frozen=True)
class SandboxRequest:
    """Run ``command`` (argv as seen inside), ``workspace`` writable, ``agent_dir`` read-only.

    ``env`` is the complete environment inside the sandbox: nothing of the host's leaks in.
    """

    command: list[str]
    workspace: Path
    agent_dir: Path
    env: dict[str, str]
    limits: SandboxLimits
    stdout_path: Path
    stderr_path: Path
    log_cap_bytes: int = 5 * 1024**2
    binds: tuple[Bind, ...] = ()


@dataclass
class SandboxResult:
    backend: str
    exit_code: int | None  # shell convention: killed by signal N -> 128 + N
    wall_seconds: float
    timed_out: bool = False
    limit_exceeded: str | None = None  # "memory", "pids" or "disk" when a cap ended the attempt
    cpu_seconds: float | None = None
    peak_memory_bytes: int | None = None
    notes: list[str] = field(default_factory=list)


class Sandbox(ABC):
    """A place to run untrusted agent code."""

    name: str
    isolated: bool

    @abstractmethod
    def paths(self, workspace: Path, agent_dir: Path) -> SandboxPaths:
        """The in-sandbox paths of the workspace, the agent's code and the Python runtime."""

    def bind_path(self, bind: Bind) -> str:
        """Where ``bind`` appears to the sandboxed program."""
        return bind.inside

    @abstractmethod
    def run(self, request: SandboxRequest) -> SandboxResult:
        """Run the request to completion or deadline; never raises for anything the agent does."""
