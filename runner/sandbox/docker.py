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

Each container sits in its own cgroup parent ``/tmlbench-docker/<name>``, which outlives
the container, so CPU time and peak memory can be read after it is gone (cgroup v1).
Containers are labelled with the harness's pid, its start time and the boot id, so the
first DockerSandbox of a process removes containers a crashed harness left behind.
"""

from __future__ import annotations

import contextlib
import errno
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

from runner.errors import HarnessError
from runner.sandbox.base import Sandbox, SandboxPaths, SandboxRequest
from runner.sandbox.cgroups import v1_mounts
from runner.sandbox.lifecycle import Ended, Watchdog
from runner.sandbox.seccomp import docker_profile_path
from runner.sandbox.supervise import CappedLog, log_head, truncation_notes
from runner.sandbox.views import NO_VIEWS, SynthesizedFiles, Views
from runner.sandbox.workspace import Workspace

IMAGE = "tmlbench-agent:latest"
WORKSPACE = "/workspace"
AGENT_DIR = "/opt/agent"
PYTHON = "/opt/venv/bin/python"
SANDBOX_UID = 65534
LABEL = "tmlbench.attempt"
CGROUP_ROOT = "tmlbench-docker"
DOCKER_ADDS = ("HOSTNAME", "HOME", "PATH")  # set by docker/runc unless the request sets them
ENGINE_HINT = (
    "start the Docker engine with `make docker-engine` (installs docker.io and starts dockerd)"
)
IMAGE_HINT = "build the agent runtime image with `make docker-image`"
# Docker writes these three itself, bound from its data root; ours say the same, from a tmpfs.
SYNTH_ETC = SynthesizedFiles(
    "tmlbench-docker-etc-",
    {
        "hostname": "sandbox\n",
        "hosts": "127.0.0.1 localhost sandbox\n::1 localhost\n",
        "resolv.conf": "# no network in the sandbox\n",
    },
)
CLI_TIMEOUT = 60.0  # seconds for docker create/inspect/rm; kill gets less
POLL = 0.05  # supervisor loop tick (seconds)
DRAIN_SECONDS = 1.0


def _docker(docker: str, *args: str, timeout: float = CLI_TIMEOUT) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(
            [docker, *args], capture_output=True, text=True, timeout=timeout, check=False
        )
    except subprocess.TimeoutExpired as exc:
        raise HarnessError(
            f"`docker {' '.join(args[:2])}` did not answer in {timeout:.0f} s; {ENGINE_HINT}"
        ) from exc
    except OSError as exc:
        raise HarnessError(f"cannot run the docker CLI ({docker}): {exc}") from exc


def docker_problem(image: str = IMAGE, docker: str | None = None) -> str | None:
    """None if the engine answers and ``image`` exists; otherwise what to do about it."""
    exe = docker or shutil.which("docker")
    if exe is None:
        return f"the docker CLI is not on PATH; {ENGINE_HINT}"
    try:
        ver = _docker(exe, "version", "--format", "{{.Server.Version}}", timeout=15)
    except HarnessError as exc:
        return str(exc)
    if ver.returncode != 0:
        why = (ver.stderr or ver.stdout).strip().splitlines()[-1:] or ["no answer"]
        return f"the Docker engine is not reachable ({why[0]}); {ENGINE_HINT}"
    img = _docker(exe, "image", "inspect", "--format", "{{.Id}}", image, timeout=15)
    if img.returncode != 0:
        return f"the docker sandbox image {image} is missing; {IMAGE_HINT}"
    return None


# -- who we are (labels) and orphans -------------------------------------------------------


def _boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return "unknown"


def _start_ticks(pid: int) -> str | None:
    """A process's start time (clock ticks since boot): with the pid, it names one process."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text[text.rfind(")") + 2 :].split()[19]


def _harness_alive(pid: str, start: str, boot: str) -> bool:
    if boot != _boot_id() or not pid.isdigit():
        return False
    return _start_ticks(int(pid)) == start


_orphans_lock = threading.Lock()
_orphans_done = False


def remove_orphans(docker: str) -> list[str]:
    """Remove tmlbench containers whose harness process is gone; returns their names."""
    fmt = (
        '{{.Names}}\t{{.Label "tmlbench.harness_pid"}}\t'
        '{{.Label "tmlbench.harness_start"}}\t{{.Label "tmlbench.boot_id"}}'
    )
    listed = _docker(docker, "ps", "-a", "--filter", f"label={LABEL}", "--format", fmt)
    if listed.returncode != 0:
        raise HarnessError(f"cannot list containers: {listed.stderr.strip()}; {ENGINE_HINT}")
    removed = []
    for line in listed.stdout.splitlines():
        name, pid, start, boot = ([*line.split("\t"), "", "", ""])[:4]
        if name and not _harness_alive(pid, start, boot):
            _docker(docker, "rm", "-f", "-v", name)
            _remove_cgroup_parent(name)
            removed.append(name)
    return removed


# -- cgroups (v1) of the container's parent -------------------------------------------------


def _cgroup_mounts() -> dict[str, Path]:
    """controller (or name=...) -> mount point of every cgroup v1 hierarchy mounted at its root."""
    return {c: point for c, (point, root) in v1_mounts().items() if root == "/"}


def _cgroup_parent_dirs(name: str) -> list[Path]:
    return sorted({mp / CGROUP_ROOT / name for mp in _cgroup_mounts().values()})


def _remove_cgroup_parent(name: str) -> list[str]:
    problems = []
    for d in _cgroup_parent_dirs(name):
        for attempt in range(40):
            try:
                d.rmdir()
                break
            except FileNotFoundError:
                break
            except OSError as exc:
                if exc.errno not in (errno.EBUSY, errno.ENOTEMPTY) or attempt == 39:
                    problems.append(f"cannot remove cgroup {d}: {exc}")
                    break
                time.sleep(0.025)
    return problems


def _read_int(path: Path) -> int | None:
    try:
        return int(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def _cgroup_members(procs: Path | None) -> list[int]:
    try:
        return [int(x) for x in procs.read_text().split()] if procs else []
    except (OSError, ValueError):
        return []


def _ns_pid_and_ppid(pid: int) -> tuple[int | None, int | None]:
    """(pid inside its namespace, parent pid on the host) of a host pid."""
    ns_pid = ppid = None
    with contextlib.suppress(OSError, ValueError, IndexError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("NSpid:"):
                ns_pid = int(line.split()[-1])
            elif line.startswith("PPid:"):
                ppid = int(line.split()[1])
    return ns_pid, ppid


def _signal_members(procs: Path | None, sig: int, *, below_main: bool) -> None:
    """Signal the container's processes from the host (we are root on the engine's host).

    ``below_main``: spare docker-init (pid 1) and its child, the agent's main process, which
    ``docker kill`` reaches through docker-init; everything they started gets ``sig`` too,
    as under bwrap, where every process of the attempt gets the SIGTERM.
    """
    members = _cgroup_members(procs)
    init = next((p for p in members if _ns_pid_and_ppid(p)[0] == 1), None)
    for pid in members:
        if below_main and (pid == init or _ns_pid_and_ppid(pid)[1] == init):
            continue
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)


def _pids_max_events(path: Path) -> int:
    try:
        key, _, value = path.read_text().strip().partition(" ")
        return int(value) if key == "max" else 0
    except (OSError, ValueError):
        return 0


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


class DockerSandbox(Sandbox):
    name = "docker"
    isolated = True
    workspace_owner = (SANDBOX_UID, SANDBOX_UID)

    def __init__(self, *, image: str = IMAGE, docker: str | None = None):
        global _orphans_done
        self.image = image
        exe = docker or shutil.which("docker")
        if exe is None:
            raise HarnessError(f"the docker sandbox needs the docker CLI; {ENGINE_HINT}")
        self.docker = exe
        problem = docker_problem(image, exe)
        if problem:
            raise HarnessError(problem)
        with _orphans_lock:
            if not _orphans_done:
                remove_orphans(exe)
                _orphans_done = True

    def paths(self, workspace: Path, agent_dir: Path) -> SandboxPaths:
        return SandboxPaths(workspace=WORKSPACE, agent_dir=AGENT_DIR, python=PYTHON)

    def create_args(
        self, request: SandboxRequest, name: str, env_file: str, views: Views | None = None
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
        a += ["--label", f"{LABEL}={name}", "--label", f"tmlbench.harness_pid={os.getpid()}"]
        a += ["--label", f"tmlbench.harness_start={_start_ticks(os.getpid()) or ''}"]
        a += ["--label", f"tmlbench.boot_id={_boot_id()}"]
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
            raise HarnessError(
                f"the docker backend hands the workspace to the sandbox user {SANDBOX_UID} "
                "and needs a harness running as root"
            )
        name = f"tmlbench-{uuid.uuid4().hex[:16]}"
        notes = [f"docker: {self.image}, uid {SANDBOX_UID}, no network, read-only root"]
        try:
            for bind in request.binds:
                notes += _open_to_sandbox_user(Path(bind.host).resolve())
            with Views.for_attempt(request.workspace) as views:
                notes += views.notes
                ended = self._run(request, workspace, name, views)
        finally:
            # The container's cgroups went with it; its cgroup parent kept the totals.
            notes += _remove_cgroup_parent(name)
        ended.notes[:0] = notes
        return ended

    def _run(self, request: SandboxRequest, workspace: Workspace, name: str, views: Views) -> Ended:
        limits = request.limits
        env_file = _write_env_file(request.env)
        try:
            created = _docker(self.docker, *self.create_args(request, name, env_file, views))
        finally:
            os.unlink(env_file)
        if created.returncode != 0:
            raise HarnessError(
                f"docker could not create the sandbox container: {created.stderr.strip()}"
                + (f"; {IMAGE_HINT}" if "No such image" in created.stderr else "")
            )
        cid = created.stdout.strip()
        pids_mount = _cgroup_mounts().get("pids")
        cgroup = pids_mount / CGROUP_ROOT / name / cid if pids_mount else None
        pids_events = cgroup / "pids.events" if cgroup else None
        procs = cgroup / "cgroup.procs" if cgroup else None

        out_log = CappedLog(request.stdout_path, request.log_cap_bytes)
        err_log = CappedLog(request.stderr_path, request.log_cap_bytes)
        pumps: list[_Pump] = []
        notes: list[str] = []
        pid_events = 0
        start = time.monotonic()
        dog = Watchdog(start, limits.wall_seconds, limits.grace_seconds)
        try:
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
            # Over the (polled) disk cap the writers are killed at once: no grace.
            workspace.watch(lambda: _signal_members(procs, signal.SIGKILL, below_main=False))
            while True:
                step = dog.next(time.monotonic(), disk_exceeded=workspace.exceeded)
                if step.action == "kill":
                    break
                if step.action == "terminate":
                    self._kill(name, "TERM", procs)
                    _signal_members(procs, signal.SIGTERM, below_main=True)
                    continue
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(timeout=min(step.wait, POLL))
                    break
                if pids_events is not None:
                    pid_events = max(pid_events, _pids_max_events(pids_events))
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
            _docker(self.docker, "rm", "-f", "-v", name)
            for pump in pumps:
                pump.join(DRAIN_SECONDS)
            if any(p.is_alive() for p in pumps):
                notes.append("output pipes still open after the container ended; stopped reading")
            for pump in pumps:
                if not pump.is_alive():
                    os.close(pump.fd)
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

    def _kill(self, name: str, sig: str, procs: Path | None) -> None:
        """``docker kill``; an already-stopped container makes it fail, which is fine.

        An engine too slow to answer must not stretch the deadline: then the container's
        processes are killed from the host directly.
        """
        try:
            _docker(self.docker, "kill", "-s", sig, name, timeout=1.0)
        except HarnessError:
            _signal_members(procs, signal.SIGKILL, below_main=False)

    def _state(self, name: str) -> dict:
        got = _docker(self.docker, "inspect", "--format", "{{json .State}}", name)
        if got.returncode != 0:
            return {}
        try:
            return json.loads(got.stdout)
        except ValueError:
            return {}

    def _account(self, name: str, result: Ended) -> None:
        mounts = _cgroup_mounts()
        mem, cpu = mounts.get("memory"), mounts.get("cpuacct")
        usage = _read_int(cpu / CGROUP_ROOT / name / "cpuacct.usage") if cpu else None
        peak = _read_int(mem / CGROUP_ROOT / name / "memory.max_usage_in_bytes") if mem else None
        result.cpu_seconds = usage / 1e9 if usage is not None else None
        result.peak_memory_bytes = peak
        if usage is None or peak is None:
            result.notes.append(
                "no cgroup v1 accounting for the container (cpu_seconds/peak_memory_bytes unset)"
            )
