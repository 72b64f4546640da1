"""``docker`` backend: one container per attempt, driven through the ``docker`` CLI.

This module is the attempt's container lifecycle: create it (its flags, env file and binds:
runner/sandbox/docker_create.py), start it attached, keep the deadline, read its end state and
accounting, remove it. A harness that itself runs in a container binds through the shared folder
and checks the engine sees its paths (runner/sandbox/docker_in_container.py). The engine's CLI,
the image, its health check and the removal of containers a crashed harness left behind are in
runner/sandbox/docker_engine.py; each container's cgroup parent in
runner/sandbox/docker_cgroups.py, so CPU time and peak memory can be read after it is gone.

The harness keeps the deadline itself (:class:`~runner.sandbox.lifecycle.Watchdog`): at
the deadline ``docker kill -s TERM``, after the grace period ``docker kill -s KILL`` (pid 1
dies, and with it the whole pid namespace), and always ``docker rm -f``. Output is attached with
``docker start -a`` and capped on the host.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import threading
import time
import uuid
from pathlib import Path

from runner.errors import HarnessError
from runner.sandbox.base import Sandbox, SandboxPaths, SandboxRequest
from runner.sandbox.docker_cgroups import (
    CGROUP_ROOT,
    cgroup_mounts,
    pids_max_events,
    read_int,
    remove_cgroup_parent,
    signal_members,
)
from runner.sandbox.docker_create import (
    AGENT_DIR,
    PYTHON,
    SANDBOX_UID,
    WORKSPACE,
    create_args,
    open_to_sandbox_user,
    write_env_file,
)
from runner.sandbox.docker_engine import (
    ENGINE_HINT,
    IMAGE,
    IMAGE_HINT,
    container_state,
    docker_cli,
    docker_problem,
    remove_orphans,
    remove_orphans_once,
)
from runner.sandbox.docker_in_container import Shown, Staging, check_engine_paths
from runner.sandbox.lifecycle import Ended, Watchdog
from runner.sandbox.output import CappedLog, log_head, truncation_notes
from runner.sandbox.views import Views, shared_dir
from runner.sandbox.workspace import Workspace

# docker_problem and remove_orphans are imported from here (runner.sandbox, tests).
__all__ = ["IMAGE", "DockerSandbox", "docker_problem", "remove_orphans"]

POLL = 0.05  # supervisor loop tick (seconds)
DRAIN_SECONDS = 1.0
ROOT_NEEDED = (
    f"the docker backend hands the workspace to the sandbox user {SANDBOX_UID} and needs a "
    "harness running as root"
)


class _Pump(threading.Thread):
    """Copies one pipe of ``docker start -a`` into a capped log until EOF."""

    def __init__(self, fd: int, log: CappedLog):
        super().__init__(name="tmlbench-docker-log", daemon=True)
        self.fd, self.log = fd, log

    def run(self) -> None:
        with contextlib.suppress(OSError, ValueError):
            while data := os.read(self.fd, 65536):
                self.log.feed(data)


def _stop_pumps(pumps: list[_Pump]) -> list[str]:
    """Let the pumps read to EOF for a moment; notes if some pipe stayed open."""
    notes = []
    for pump in pumps:
        pump.join(DRAIN_SECONDS)
    if any(p.is_alive() for p in pumps):
        notes.append("output pipes still open after the container ended; stopped reading")
    for pump in pumps:
        if not pump.is_alive():
            os.close(pump.fd)
    return notes


class DockerSandbox(Sandbox):
    name = "docker"
    isolated = True
    workspace_owner = (SANDBOX_UID, SANDBOX_UID)

    def __init__(self, *, image: str = IMAGE, docker: str | None = None):
        self.image = image
        exe = docker or shutil.which("docker")
        if exe is None:
            raise HarnessError(f"the docker sandbox needs the docker CLI; {ENGINE_HINT}")
        self.docker = exe
        problem = docker_problem(image, exe)
        if problem:
            raise HarnessError(problem)
        remove_orphans_once(exe)

    def paths(self, workspace: Path, agent_dir: Path) -> SandboxPaths:
        return SandboxPaths(workspace=WORKSPACE, agent_dir=AGENT_DIR, python=PYTHON)

    def problem(self, runs_dir: Path) -> str | None:
        # What ``execute`` and ``run`` would raise on for every attempt, asked once up front.
        if os.geteuid() != 0:
            return ROOT_NEEDED
        shared = shared_dir()
        if shared is None:
            return None
        try:
            shared.mkdir(mode=0o711, parents=True, exist_ok=True)
            runs_dir.mkdir(parents=True, exist_ok=True)
            check_engine_paths(self.docker, self.image, [shared.resolve(), runs_dir.resolve()])
        except (HarnessError, OSError) as exc:
            return str(exc)
        return None

    def execute(self, request: SandboxRequest, workspace: Workspace) -> Ended:
        if os.geteuid() != 0:
            raise HarnessError(ROOT_NEEDED)
        name = f"tmlbench-{uuid.uuid4().hex[:16]}"
        notes = [f"docker: {self.image}, uid {SANDBOX_UID}, no network, read-only root"]
        shared = shared_dir()
        try:
            if shared is not None:
                shared.mkdir(mode=0o711, parents=True, exist_ok=True)
                run_folders = Path(request.workspace).resolve().parent.parent
                check_engine_paths(self.docker, self.image, [shared.resolve(), run_folders])
                notes.append(f"docker: harness in a container; engine-visible folder {shared}")
            for bind in request.binds:
                notes += open_to_sandbox_user(Path(bind.host).resolve())
            with (
                Views.for_attempt(request.workspace) as views,
                Staging(shared, name) as staging,
            ):
                notes += views.notes
                ended = self._run(request, workspace, name, Shown(views, staging))
                notes += staging.notes
        finally:
            # The container's cgroups went with it; its cgroup parent kept the totals.
            notes += remove_cgroup_parent(name)
        ended.notes[:0] = notes
        return ended

    def _run(self, request: SandboxRequest, workspace: Workspace, name: str, views: Shown) -> Ended:
        limits = request.limits
        cid = self._create(request, name, views)
        pids_mount = cgroup_mounts().get("pids")
        cgroup = pids_mount / CGROUP_ROOT / name / cid if pids_mount else None
        pids_events = cgroup / "pids.events" if cgroup else None
        procs = cgroup / "cgroup.procs" if cgroup else None

        out_log = CappedLog(request.stdout_path, request.log_cap_bytes)
        err_log = CappedLog(request.stderr_path, request.log_cap_bytes)
        pumps: list[_Pump] = []
        notes: list[str] = []
        start = time.monotonic()
        dog = Watchdog(start, limits.wall_seconds, limits.grace_seconds)
        try:
            proc, pumps = self._start_attached(name, out_log, err_log)
            # Over the (polled) disk cap the writers are killed at once: no grace.
            workspace.watch(lambda: signal_members(procs, signal.SIGKILL, below_main=False))
            pid_events = self._wait(proc, name, dog, workspace, procs, pids_events, request)
            if dog.reason is not None or workspace.exceeded:
                self._kill(name, "KILL", procs)  # pid 1 dies, and with it the pid namespace
            wall = time.monotonic() - start
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            state = container_state(self.docker, name)
        finally:
            docker_cli(self.docker, "rm", "-f", "-v", name)
            notes += _stop_pumps(pumps)
            out_log.close()
            err_log.close()

        if not state.started and dog.reason is None:
            raise HarnessError(
                f"the docker sandbox container did not start (docker exit {proc.returncode}): "
                f"{log_head(request.stderr_path) or state.error or 'no message'}"
            )
        notes += truncation_notes(out_log, err_log)
        ended = Ended(
            exit_code=state.exit_code,
            wall_seconds=wall,
            timed_out=dog.timed_out,
            memory_limit_bytes=limits.memory_bytes,
            oom_kills=1 if state.oom_killed else 0,
            pids_max_events=pid_events,
            notes=notes,
        )
        self._account(name, ended)
        return ended

    def _create(self, request: SandboxRequest, name: str, views: Shown) -> str:
        """``docker create`` the attempt's container; its id."""
        env_file = write_env_file(request.env)
        try:
            created = docker_cli(
                self.docker, *create_args(request, name, env_file, self.image, views)
            )
        finally:
            os.unlink(env_file)
        if created.returncode != 0:
            raise HarnessError(
                f"docker could not create the sandbox container: {created.stderr.strip()}"
                + (f"; {IMAGE_HINT}" if "No such image" in created.stderr else "")
            )
        return created.stdout.strip()

    def _start_attached(
        self, name: str, out_log: CappedLog, err_log: CappedLog
    ) -> tuple[subprocess.Popen[bytes], list[_Pump]]:
        """``docker start --attach``, its output pumped into the capped logs."""
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        try:
            proc = subprocess.Popen(
                [self.docker, "start", "--attach", name],
                stdin=subprocess.DEVNULL,
                stdout=out_w,
                stderr=err_w,
                start_new_session=True,
                close_fds=True,
            )
        except OSError as exc:
            for fd in (out_r, out_w, err_r, err_w):
                os.close(fd)
            raise HarnessError(f"cannot start the docker sandbox: {exc}") from exc
        os.close(out_w)
        os.close(err_w)
        pumps = [_Pump(out_r, out_log), _Pump(err_r, err_log)]
        for pump in pumps:
            pump.start()
        return proc, pumps

    def _wait(
        self,
        proc: subprocess.Popen[bytes],
        name: str,
        dog: Watchdog,
        workspace: Workspace,
        procs: Path | None,
        pids_events: Path | None,
        request: SandboxRequest,
    ) -> int:
        """Until the container ends or the watchdog says kill; the pids cap's refusals."""
        pid_events = 0
        while True:
            step = dog.next(
                time.monotonic(),
                disk_exceeded=workspace.exceeded,
                cap_broken=request.cap_broken(),
            )
            if step.action == "kill":
                break
            if step.action == "terminate":
                self._kill(name, "TERM", procs)
                signal_members(procs, signal.SIGTERM, below_main=True)
                continue
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=min(step.wait, POLL))
                break
            if pids_events is not None:
                pid_events = max(pid_events, pids_max_events(pids_events))
        return pid_events

    def _kill(self, name: str, sig: str, procs: Path | None) -> None:
        """``docker kill``; an already-stopped container makes it fail, which is fine.

        An engine too slow to answer must not stretch the deadline: then the container's
        processes are killed from the host directly.
        """
        try:
            docker_cli(self.docker, "kill", "-s", sig, name, timeout=1.0)
        except HarnessError:
            signal_members(procs, signal.SIGKILL, below_main=False)

    def _account(self, name: str, result: Ended) -> None:
        mounts = cgroup_mounts()
        mem, cpu = mounts.get("memory"), mounts.get("cpuacct")
        usage = read_int(cpu / CGROUP_ROOT / name / "cpuacct.usage") if cpu else None
        peak = read_int(mem / CGROUP_ROOT / name / "memory.max_usage_in_bytes") if mem else None
        result.cpu_seconds = usage / 1e9 if usage is not None else None
        result.peak_memory_bytes = peak
        if usage is None or peak is None:
            result.notes.append(
                "no cgroup v1 accounting for the container (cpu_seconds/peak_memory_bytes unset)"
            )
