"""The one small interface every sandbox backend implements.

A backend runs one command with a hard wall-clock deadline and resource caps, and
reports what happened. It knows nothing about tasks, agents or grading.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path

from runner.attempts.limits import Limit, WatchedCap
from runner.errors import HarnessError
from runner.sandbox.lifecycle import Ended, classify
from runner.sandbox.workspace import Workspace

GIB = 1024**3


@dataclass(frozen=True)
class SandboxLimits:
    """Caps for one attempt. ``cpuset`` pins the attempt to host CPUs (e.g. "0" or "0-1")."""

    wall_seconds: float
    memory_bytes: int = 4 * GIB
    pids: int = 256
    disk_bytes: int = 2 * GIB
    inodes: int = 200_000  # files and folders the workspace may hold
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
    ``watched_cap``: a cap kept outside the sandbox (the gateway's spend ceilings); once it
    breaks, the attempt is ended at once and the result names it.
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
    watched_cap: WatchedCap | None = None

    def cap_broken(self) -> bool:
        """Whether the watched cap broke (polled by the backends' deadline loops)."""
        return self.watched_cap is not None and self.watched_cap.broken() is not None


@dataclass
class SandboxResult:
    backend: str
    exit_code: int | None  # shell convention: killed by signal N -> 128 + N
    wall_seconds: float
    timed_out: bool = False
    limit_exceeded: Limit | None = None  # the cap that ended the attempt, if one did
    cpu_seconds: float | None = None
    peak_memory_bytes: int | None = None
    workspace_bytes: int | None = None  # used when the attempt ended (own filesystem only)
    workspace_files: int | None = None
    workspace_removed: bool = False  # the cap ended it: nothing the agent wrote was kept
    workspace_listing: Path | None = None  # its largest files, when it was removed
    notes: list[str] = field(default_factory=list)


class Sandbox(ABC):
    """A place to run untrusted agent code.

    :meth:`run` is the whole lifecycle of an attempt, the same for every backend: the
    workspace gets its capped filesystem, the backend runs the command to its end
    (:meth:`execute`), the workspace is settled once every process is gone, and the caps'
    evidence is classified. A backend only says how to start, watch and kill.
    """

    name: str
    isolated: bool
    workspace_owner: tuple[int, int] | None = None  # uid/gid the workspace is handed to

    @abstractmethod
    def paths(self, workspace: Path, agent_dir: Path) -> SandboxPaths:
        """The in-sandbox paths of the workspace, the agent's code and the Python runtime."""

    def bind_path(self, bind: Bind) -> str:
        """Where ``bind`` appears to the sandboxed program."""
        return bind.inside

    def problem(self, runs_dir: Path) -> str | None:
        """What would fail every attempt of a run on this backend, on this machine, with its
        run folders in ``runs_dir``: asked once before the run's first attempt (None: nothing).
        """
        return None

    def run(self, request: SandboxRequest) -> SandboxResult:
        """Run the request to completion or deadline; never raises for anything the agent does."""
        if not request.workspace.is_dir():
            raise HarnessError(f"workspace {request.workspace} does not exist; create it first")
        if not Path(request.agent_dir).is_dir():
            raise HarnessError(f"agent directory {request.agent_dir} does not exist")
        limits = request.limits
        workspace = Workspace(
            request.workspace, limits.disk_bytes, limits.inodes, owner=self.workspace_owner
        )
        workspace.open()
        try:
            ended = self.execute(request, workspace)
        except BaseException:
            workspace.abandon()
            raise
        disk_hit = workspace.close(failed=ended.failed)
        watched = None
        if request.watched_cap is not None:
            note = request.watched_cap.broken()
            watched = (request.watched_cap.limit, note) if note is not None else None
        limit, notes = classify(ended, disk_hit=disk_hit, watched=watched)
        return SandboxResult(
            backend=self.name,
            exit_code=ended.exit_code,
            wall_seconds=ended.wall_seconds,
            timed_out=ended.timed_out,
            limit_exceeded=limit,
            cpu_seconds=ended.cpu_seconds,
            peak_memory_bytes=ended.peak_memory_bytes,
            workspace_bytes=workspace.usage.bytes,
            workspace_files=workspace.usage.files,
            workspace_removed=workspace.removed,
            workspace_listing=workspace.listing,
            notes=[*ended.notes, *workspace.notes, *notes],
        )

    @abstractmethod
    def execute(self, request: SandboxRequest, workspace: Workspace) -> Ended:
        """Start the command, keep the deadline and caps, kill every process, account.

        ``workspace.watch(on_exceed)`` once the command runs (the fallback disk poll), and
        ``workspace.exceeded`` in the deadline loop; return only when no process is left.
        """
