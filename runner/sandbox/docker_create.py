"""``docker create`` for one attempt: the container's flags, its env file, the binds' modes.

The container (from the agent runtime image, ``make docker-image``: runner/sandbox/image/) has
no network, runs as uid/gid 65534 on a read-only root filesystem with a size-limited tmpfs at
/tmp, all capabilities dropped, no-new-privileges, memory (no swap around it), pids and CPU
caps, and docker-init as pid 1 so orphans are reaped. The workspace (its own filesystem, handed
to uid 65534: runner/sandbox/workspace.py) is the only writable bind (at /workspace); the
agent's code is read-only at /opt/agent and ``request.binds`` appear at their ``inside`` paths,
both through views that name no host path (runner/sandbox/views.py), as do /etc/hostname,
/etc/hosts and /etc/resolv.conf. The container's log driver is ``none`` so an agent cannot
fill the engine's disk with logs.

The environment is exactly ``request.env``: it travels in an ``--env-file`` (0600, removed as
soon as the container exists, never on a command line, which is world-readable in /proc), and
the variables docker adds on its own (HOSTNAME, and HOME or PATH when the request has none) are
removed again by ``/usr/bin/env -u NAME`` in front of the command.
"""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path
from typing import Protocol

from runner.errors import HarnessError
from runner.sandbox.base import SandboxRequest
from runner.sandbox.docker_cgroups import CGROUP_ROOT, cgroup_mounts
from runner.sandbox.docker_engine import LABEL, harness_labels
from runner.sandbox.seccomp import docker_profile_path
from runner.sandbox.views import NO_VIEWS, SynthesizedFiles

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


class Shows(Protocol):
    """How a read-only folder is bound (``Views``, or a harness in a container's ``Shown``)."""

    def view(self, folder: Path) -> Path: ...


def open_to_sandbox_user(bind_dir: Path) -> list[str]:
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


def write_env_file(env: dict[str, str]) -> str:
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


def create_args(
    request: SandboxRequest,
    name: str,
    env_file: str,
    image: str,
    views: Shows | None = None,
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
    # Instead of docker's own copies, named by their host paths; bound like any read-only
    # folder, so a harness in a container hands the engine a copy for this attempt only.
    etc = shown(SYNTH_ETC.folder())
    for file in SYNTH_ETC.files:
        a += ["--mount", f"type=bind,source={etc / file},target=/etc/{file},readonly"]
    for bind in request.binds:
        source = Path(bind.host).resolve() if bind.writable else shown(bind.host)
        mount = f"type=bind,source={source},target={bind.inside}"
        a += ["--mount", mount if bind.writable else f"{mount},readonly"]
    a += ["-w", WORKSPACE, "--env-file", env_file, "--entrypoint", "/usr/bin/env"]
    a += [image]
    for var in DOCKER_ADDS:
        if var not in request.env:
            a += ["-u", var]
    return [*a, "--", *request.command]
