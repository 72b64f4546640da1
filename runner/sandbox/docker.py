"""``docker`` backend: one container per attempt, driven through the ``docker`` CLI.

Every attempt gets its own container from the agent runtime image (``make docker-image``;
runner/sandbox/image/): no network, uid/gid 65534, read-only root filesystem with a
size-limited tmpfs at /tmp, all capabilities dropped, no-new-privileges, memory (no swap
around it), pids and CPU caps, docker-init as pid 1 so orphans are reaped. The workspace (its own
filesystem, handed to uid 65534: runner/sandbox/workspace.py) is the only writable bind
(at /workspace); the agent's code is read-only at /opt/agent and ``request.binds`` appear
at their ``inside`` paths, both through views that name no host path
(runner/sandbox/views.py), as do /etc/hostname, /etc/hosts and /etc/resolv.conf.

The harness keeps the deadline itself (:class:`~runner.sandbox.lifecycle.Watchdog`): at
the deadline ``docker kill -s TERM``, after the grace period ``docker kill -s KILL`` (pid 1
dies, and with it the whole pid namespace), and always ``docker rm -f``. Output is attached with
``docker start -a`` and capped on the host; the container's log driver is ``none`` so an
agent cannot fill the engine's disk with logs.

The environment is exactly ``request.env``: it travels in an ``--env-file`` (0600, removed
as soon as the container exists, never on a command line, which is world-readable in
/proc), and the variables docker adds on its own (HOSTNAME, and HOME or PATH when the
request has none) are removed again by ``/usr/bin/env -u NAME`` in front of the command.

Each container sits in its own cgroup parent (runner/sandbox/docker_cgroups.py), so CPU
time and peak memory can be read after it is gone; the engine's CLI, its health check and
the removal of containers a crashed harness left behind are in runner/sandbox/docker_engine.py.

**A harness in a container** (the Docker deployment's run containers: orchestration/
deployments/README.md) starts the attempt's container on the host's engine through its
socket, and the engine resolves every bind source on the host. So the run folders are bound
into the harness's container at the same absolute paths as on the host, and
``$TMLBENCH_DOCKER_SHARED_DIR`` names one more such folder: the harness makes its sockets
and /etc files there (runner/sandbox/views.py) and copies read-only folders that exist only
in its image (the agent's code) into it for the attempt. Before the first attempt it checks
that the engine sees the workspace's folder and the shared folder as it does (a marker file
read back by a probe container), since a bind of a same-named but different host folder would
blame an empty workspace on the agent. The host's cgroup tree is not visible there: no
cgroup parent is made, and the record notes that CPU time and peak memory are unknown.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import stat
import subprocess
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

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
from runner.sandbox.docker_engine import (
    ENGINE_HINT,
    IMAGE,
    IMAGE_HINT,
    LABEL,
    docker_cli,
    docker_problem,
    harness_labels,
    remove_orphans,
    remove_orphans_once,
)
from runner.sandbox.lifecycle import Ended, Watchdog
from runner.sandbox.output import CappedLog, log_head, truncation_notes
from runner.sandbox.seccomp import docker_profile_path
from runner.sandbox.views import NO_VIEWS, SHARED_DIR_ENV, SynthesizedFiles, Views, shared_dir
from runner.sandbox.workspace import Workspace

# docker_problem and remove_orphans are imported from here (runner.sandbox, tests).
__all__ = ["IMAGE", "DockerSandbox", "docker_problem", "remove_orphans"]

WORKSPACE = "/workspace"
AGENT_DIR = "/opt/agent"
PYTHON = "/opt/venv/bin/python"
SANDBOX_UID = 65534
DOCKER_ADDS = ("HOSTNAME", "HOME", "PATH")  # set by docker/runc unless the request sets them
# Docker writes these three itself, bound from its data root; ours say the same, from a tmpfs.
SYNTH_ETC = SynthesizedFiles(
    "tmlbench-docker-etc-",
    {
        "hostname": "sandbox\n",
        "hosts": "127.0.0.1 localhost sandbox\n::1 localhost\n",
        "resolv.conf": "# no network in the sandbox\n",
    },
)
POLL = 0.05  # supervisor loop tick (seconds)
DRAIN_SECONDS = 1.0


# -- host-side preparation -------------------------------------------------------------------


def _open_to_sandbox_user(bind_dir: Path) -> list[str]:
    """Let uid/gid 65534 enter a bound folder and connect to the unix sockets directly in it.

    The harness's control folders are often 0700 (mkdtemp) and sockets 0755; under bwrap the
    sandbox uid maps to the harness's own, under docker it really is 65534. Access is given
    through the group (65534), never by making anything world-writable.
    """
    notes = []
    st = bind_dir.stat()
    if stat.S_ISDIR(st.st_mode) and st.st_mode & 0o005 != 0o005:
        os.chown(bind_dir, -1, SANDBOX_UID)
        os.chmod(bind_dir, stat.S_IMODE(st.st_mode) | 0o050)
        notes.append(f"bind {bind_dir}: group {SANDBOX_UID} may enter")
    if stat.S_ISDIR(st.st_mode):
        for entry in os.scandir(bind_dir):
            est = entry.stat(follow_symlinks=False)
            if stat.S_ISSOCK(est.st_mode) and est.st_mode & 0o006 != 0o006:
                os.chown(entry.path, -1, SANDBOX_UID, follow_symlinks=False)
                os.chmod(entry.path, stat.S_IMODE(est.st_mode) | 0o060)
                notes.append(f"socket {entry.path}: group {SANDBOX_UID} may connect")
    return notes


def _write_env_file(env: dict[str, str]) -> str:
    """The attempt's environment as a 0600 docker env file (one VAR=value per line)."""
    for key, value in env.items():
        bad_key = not key or "=" in key or any(c.isspace() for c in key) or key[0] == "#"
        if bad_key or any(c in value for c in "\n\r\0") or "\0" in key:
            raise HarnessError(
                f"environment variable {key!r} cannot be passed to a docker sandbox "
                "(names without '=' or spaces, values without newlines or NUL bytes)"
            )
    fd, path = tempfile.mkstemp(prefix="tmlbench-env-")  # created 0600
    with os.fdopen(fd, "w") as f:
        f.writelines(f"{k}={v}\n" for k, v in env.items())
    return path


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


class _Staging:
    """Read-only folders copied into the shared folder for one attempt (a harness in a
    container: the engine cannot see its image's files). Without a shared folder, nothing."""

    def __init__(self, shared: Path | None, name: str):
        self.root = shared / f"{name}-ro" if shared else None
        self.shared = shared
        self.copies: dict[Path, Path] = {}
        self.notes: list[str] = []

    def __enter__(self) -> _Staging:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.root is not None:
            shutil.rmtree(self.root, ignore_errors=True)

    def visible(self, folder: Path) -> Path:
        """``folder``, or its copy where the engine sees it."""
        if self.root is None or self.shared is None or folder.is_relative_to(self.shared):
            return folder
        if folder not in self.copies:
            target = self.root / str(len(self.copies))
            self.root.mkdir(mode=0o755, parents=True, exist_ok=True)
            shutil.copytree(folder, target, symlinks=True)
            for path in [target, *target.rglob("*")]:  # readable by the sandbox user
                if not path.is_symlink():
                    mode = stat.S_IMODE(path.stat().st_mode) & 0o755 | 0o644
                    runnable = path.is_dir() or mode & 0o100
                    path.chmod(mode | 0o111 if runnable else mode)
            self.copies[folder] = target
            self.notes.append(f"read-only folder {folder} copied to {target} for the engine")
        return self.copies[folder]


ROOT_NEEDED = (
    f"the docker backend hands the workspace to the sandbox user {SANDBOX_UID} and needs a "
    "harness running as root"
)
_same_path_lock = threading.Lock()
_same_path_seen: set[Path] = set()


def check_engine_paths(docker: str, image: str, folders: list[Path]) -> None:
    """HarnessError unless the engine sees each of ``folders`` at the same path as we do.

    A marker file in each, read back by a probe container that binds them; once per folder
    and process. Only asked by a harness in a container (``$TMLBENCH_DOCKER_SHARED_DIR``).
    """
    with _same_path_lock:
        todo = [f for f in dict.fromkeys(folders) if f not in _same_path_seen]
        if not todo:
            return
        token = uuid.uuid4().hex
        markers = [f / f".tmlbench-engine-probe-{token}" for f in todo]
        args = ["run", "--rm", "--network", "none", "--read-only", "--cap-drop", "ALL"]
        args += ["--security-opt", "no-new-privileges", "--log-driver", "none", "--pull", "never"]
        args += ["--user", "0:0", "--entrypoint", "/bin/cat"]
        try:
            for i, (folder, marker) in enumerate(zip(todo, markers, strict=True)):
                marker.write_text(token)
                args += ["--mount", f"type=bind,source={folder},target=/probe/{i},readonly"]
            got = docker_cli(
                docker,
                *args,
                image,
                *[f"/probe/{i}/{m.name}" for i, m in enumerate(markers)],
                timeout=30,
            )
        finally:
            for marker in markers:
                marker.unlink(missing_ok=True)
        if got.returncode != 0 or got.stdout != token * len(todo):
            raise HarnessError(
                "this harness runs in a container and starts sandboxes on the Docker engine "
                f"outside it ({SHARED_DIR_ENV}), but the engine does not see "
                f"{', '.join(map(str, todo))} as this container does: bind each at the same "
                "absolute path in the container as on the Docker host (orchestration/"
                f"deployments/README.md). {(got.stderr or '').strip()[:300]}"
            )
        _same_path_seen.update(todo)


class _Shown:
    """How a read-only folder is bound: its view (no host path), else its engine-visible copy."""

    def __init__(self, views: Views, staging: _Staging):
        self.views, self.staging = views, staging

    def view(self, folder: Path) -> Path:
        return self.staging.visible(self.views.view(folder))


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

    def create_args(
        self,
        request: SandboxRequest,
        name: str,
        env_file: str,
        views: Views | _Shown | None = None,
    ) -> list[str]:
        """``docker create`` arguments (after ``docker``) for ``request``; no values of env.

        With ``views``, read-only folders are bound through them (no host path in the
        container's mount table).
        """
        limits = request.limits
        workspace = Path(request.workspace).resolve()
        shown = (views or NO_VIEWS).view
        agent_dir = shown(request.agent_dir)
        tmp_size = max(1 << 20, min(limits.disk_bytes, limits.memory_bytes))
        fsize = max(1, int(limits.disk_bytes))
        a = ["create", "--name", name, "--pull", "never"]
        a += ["--label", f"{LABEL}={name}", *harness_labels()]
        a += ["--network", "none", "--hostname", "sandbox", "--read-only"]
        a += ["--user", f"{SANDBOX_UID}:{SANDBOX_UID}", "--cap-drop", "ALL"]
        a += ["--security-opt", "no-new-privileges", "--init", "--ipc", "private"]
        # Docker's default profile plus our denials (runner/sandbox/seccomp.py).
        a += ["--security-opt", f"seccomp={docker_profile_path()}"]
        a += ["--memory", str(int(limits.memory_bytes))]
        a += ["--memory-swap", str(int(limits.memory_bytes))]
        a += ["--pids-limit", str(int(limits.pids))]
        if limits.cpuset is not None:
            a += ["--cpuset-cpus", limits.cpuset]
        else:
            a += ["--cpus", str(len(os.sched_getaffinity(0)))]
        if cgroup_mounts():  # else the host's tree is out of sight: it could not be removed
            a += ["--cgroup-parent", f"/{CGROUP_ROOT}/{name}"]
        a += ["--ulimit", f"fsize={fsize}:{fsize}", "--ulimit", "core=0:0"]
        a += ["--tmpfs", f"/tmp:rw,nosuid,nodev,size={tmp_size},mode=1777"]
        # Docker shows the container its cgroup tree (read-only); an agent has no business there.
        a += ["--tmpfs", "/sys/fs/cgroup:ro,nosuid,nodev,noexec,size=4k"]
        a += ["--shm-size", str(tmp_size), "--log-driver", "none"]
        a += ["--mount", f"type=bind,source={workspace},target={WORKSPACE}"]
        a += ["--mount", f"type=bind,source={agent_dir},target={AGENT_DIR},readonly"]
        etc = SYNTH_ETC.folder()  # instead of docker's own copies, named by their host paths
        for name in SYNTH_ETC.files:
            a += ["--mount", f"type=bind,source={etc / name},target=/etc/{name},readonly"]
        for bind in request.binds:
            source = Path(bind.host).resolve() if bind.writable else shown(bind.host)
            mount = f"type=bind,source={source},target={bind.inside}"
            a += ["--mount", mount if bind.writable else f"{mount},readonly"]
        a += ["-w", WORKSPACE, "--env-file", env_file, "--entrypoint", "/usr/bin/env"]
        a += [self.image]
        for var in DOCKER_ADDS:
            if var not in request.env:
                a += ["-u", var]
        return [*a, "--", *request.command]

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
                notes += _open_to_sandbox_user(Path(bind.host).resolve())
            with (
                Views.for_attempt(request.workspace) as views,
                _Staging(shared, name) as staging,
            ):
                notes += views.notes
                ended = self._run(request, workspace, name, _Shown(views, staging))
                notes += staging.notes
        finally:
            # The container's cgroups went with it; its cgroup parent kept the totals.
            notes += remove_cgroup_parent(name)
        ended.notes[:0] = notes
        return ended

    def _run(
        self, request: SandboxRequest, workspace: Workspace, name: str, views: _Shown
    ) -> Ended:
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
            state = self._state(name)
        finally:
            docker_cli(self.docker, "rm", "-f", "-v", name)
            notes += _stop_pumps(pumps)
            out_log.close()
            err_log.close()

        if state.get("StartedAt", "0001").startswith("0001") and dog.reason is None:
            raise HarnessError(
                f"the docker sandbox container did not start (docker exit {proc.returncode}): "
                f"{log_head(request.stderr_path) or state.get('Error') or 'no message'}"
            )
        exit_code = state.get("ExitCode")
        notes += truncation_notes(out_log, err_log)
        ended = Ended(
            exit_code=exit_code if isinstance(exit_code, int) else None,
            wall_seconds=wall,
            timed_out=dog.timed_out,
            memory_limit_bytes=limits.memory_bytes,
            oom_kills=1 if state.get("OOMKilled") else 0,
            pids_max_events=pid_events,
            notes=notes,
        )
        self._account(name, ended)
        return ended

    def _create(self, request: SandboxRequest, name: str, views: _Shown) -> str:
        """``docker create`` the attempt's container; its id."""
        env_file = _write_env_file(request.env)
        try:
            created = docker_cli(self.docker, *self.create_args(request, name, env_file, views))
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

    def _state(self, name: str) -> dict[str, Any]:
        """The container's ``.State`` as ``docker inspect`` prints it ({} if it cannot)."""
        got = docker_cli(self.docker, "inspect", "--format", "{{json .State}}", name)
        if got.returncode != 0:
            return {}
        try:
            state = json.loads(got.stdout)
        except ValueError:
            return {}
        return state if isinstance(state, dict) else {}

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
