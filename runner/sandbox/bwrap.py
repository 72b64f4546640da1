"""``bwrap`` backend: bubblewrap namespaces around the shared supervisor.

Inside the sandbox the agent sees only: /usr (with /bin, /lib, /lib64, /sbin as on the
host), a handful of /etc files, fresh /proc, /dev, a size-limited tmpfs at /tmp and
/dev/shm, the workspace read-write at /workspace (a filesystem of its own:
runner/sandbox/workspace.py), its own code read-only at /opt/agent and the harness's
Python read-only (venv at /opt/tmlbench/venv, the base interpreter at /opt/tmlbench/python
with its host path a symlink there, because the venv's python and its RUNPATH name it). Read-only folders are bound through views
(runner/sandbox/views.py), so the sandbox's mount table names no host folder. No network
(new net namespace: loopback only), new pid/ipc/uts/cgroup namespaces, all capabilities
dropped, uid/gid 65534 in a user namespace that cannot create further user namespaces,
and a seccomp filter (runner/sandbox/seccomp.py).

The environment is handed to bwrap through its own (exact) environment rather than
``--clearenv --setenv``, and bwrap's arguments through ``--args FD``: command lines are
world-readable in the host's /proc (and bwrap's shows up as /proc/1/cmdline inside the
sandbox, revealing host paths), environments are private to their owner.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
from pathlib import Path

from runner.errors import HarnessError
from runner.sandbox.base import Sandbox, SandboxPaths, SandboxRequest
from runner.sandbox.lifecycle import Ended
from runner.sandbox.seccomp import bwrap_filter
from runner.sandbox.supervise import Launch, memfd, supervise
from runner.sandbox.views import NO_VIEWS, SynthesizedFiles, Views
from runner.sandbox.workspace import Workspace

WORKSPACE = "/workspace"
AGENT_DIR = "/opt/agent"
VENV = "/opt/tmlbench/venv"
PYTHON_HOME = "/opt/tmlbench/python"  # the venv's base interpreter
SANDBOX_UID = 65534
INSTALL_HINT = "install bubblewrap (Debian/Ubuntu: `apt-get install bubblewrap`)"

# /etc files a Python program needs; copied from the host read-only when present.
ETC_FILES = (
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/alternatives",
    "/etc/localtime",
    "/etc/timezone",
    "/etc/ssl/certs",
    "/etc/ssl/openssl.cnf",
    "/etc/ca-certificates.conf",
    "/etc/mime.types",
)
# Synthesized instead of copied, so no host user, group or host name leaks in.
ETC_SYNTH = {
    "passwd": (
        "root:x:0:0:root:/root:/usr/sbin/nologin\n"
        f"agent:x:{SANDBOX_UID}:{SANDBOX_UID}:agent:{WORKSPACE}:/usr/sbin/nologin\n"
    ),
    "group": f"root:x:0:\nagent:x:{SANDBOX_UID}:\n",
    "hosts": "127.0.0.1 localhost\n::1 localhost\n",
    "nsswitch.conf": "passwd: files\ngroup: files\nhosts: files\n",
}
TOP_LEVEL = ("/bin", "/lib", "/lib64", "/lib32", "/libx32", "/sbin")


@functools.cache
def _bwrap_probe(exe: str) -> str | None:
    """None if ``exe`` can create our kind of sandbox here, else what went wrong."""
    argv = [exe, "--unshare-all", "--unshare-user", "--uid", str(SANDBOX_UID)]
    argv += ["--gid", str(SANDBOX_UID), "--die-with-parent", "--ro-bind", "/usr", "/usr"]
    argv += [*_top_level_args(), "--", "/usr/bin/true"]
    try:
        proc = subprocess.run(argv, capture_output=True, timeout=10, env={}, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return str(exc)
    if proc.returncode != 0:
        return proc.stderr.decode(errors="replace").strip() or f"exit {proc.returncode}"
    return None


def bwrap_problem() -> str | None:
    """None if bubblewrap works here; otherwise a message that says what to do."""
    if not sys.platform.startswith("linux"):
        return f"bubblewrap needs Linux (this is {sys.platform})"
    exe = shutil.which("bwrap")
    if exe is None:
        return f"bwrap not found on PATH; {INSTALL_HINT}"
    problem = _bwrap_probe(exe)
    if problem:
        return (
            f"bwrap at {exe} cannot create a sandbox: {problem}. It needs unprivileged user "
            "namespaces (sysctl user.max_user_namespaces > 0, "
            "kernel.apparmor_restrict_unprivileged_userns=0 on Ubuntu) or root"
        )
    try:  # the seccomp filter is part of the sandbox: no filter, no bwrap backend
        bwrap_filter()
    except HarnessError as exc:
        return str(exc)
    return None


def bwrap_available() -> bool:
    """Cheap and cached: is bubblewrap installed and able to create a sandbox here?"""
    return bwrap_problem() is None


def _top_level_args() -> list[str]:
    """/bin, /lib, ... as on the host: symlinks into /usr stay symlinks, real dirs are bound."""
    args: list[str] = []
    for path in TOP_LEVEL:
        if os.path.islink(path):
            args += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            args += ["--ro-bind", path, path]
    return args


SYNTH_ETC = SynthesizedFiles("tmlbench-etc-", ETC_SYNTH)


class BwrapSandbox(Sandbox):
    name = "bwrap"
    isolated = True

    def __init__(
        self,
        *,
        bwrap: str | None = None,
        prefix: str | Path | None = None,
        base_prefix: str | Path | None = None,
        executable: str | Path | None = None,
    ):
        found = bwrap or shutil.which("bwrap")
        if found is None:
            raise HarnessError(f"the bwrap sandbox needs bubblewrap: {INSTALL_HINT}")
        self.bwrap: str = found
        self.prefix = Path(prefix or sys.prefix).resolve()
        self.base_prefix = Path(os.path.abspath(base_prefix or sys.base_prefix))
        exe = Path(executable or sys.executable)
        try:
            rel = exe.absolute().relative_to(Path(prefix or sys.prefix).absolute())
        except ValueError:
            rel = Path("bin/python")
        self.python = f"{VENV}/{rel.as_posix()}"

    def paths(self, workspace: Path, agent_dir: Path) -> SandboxPaths:
        return SandboxPaths(workspace=WORKSPACE, agent_dir=AGENT_DIR, python=self.python)

    def argv(self, request: SandboxRequest, views: Views | None = None) -> list[str]:
        """The bwrap command line for ``request`` (host paths → sandbox paths).

        With ``views``, read-only folders are bound through them (no host path in the
        sandbox's mount table).
        """
        workspace = Path(request.workspace).resolve()
        agent_dir = Path(request.agent_dir).resolve()
        if not agent_dir.is_dir():
            raise HarnessError(f"agent directory {agent_dir} does not exist")
        shown = (views or NO_VIEWS).view
        tmp_size = str(max(1 << 20, min(request.limits.disk_bytes, request.limits.memory_bytes)))
        a = [self.bwrap, "--unshare-all", "--unshare-user", "--disable-userns"]
        a += ["--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_UID)]
        a += ["--die-with-parent", "--new-session", "--cap-drop", "ALL"]
        a += ["--hostname", "sandbox"]
        a += ["--ro-bind", "/usr", "/usr", *_top_level_args()]
        for path in ETC_FILES:
            a += ["--ro-bind-try", path, path]
        etc = SYNTH_ETC.folder()
        for name in ETC_SYNTH:
            a += ["--ro-bind", str(etc / name), f"/etc/{name}"]
        a += ["--proc", "/proc", "--dev", "/dev"]
        # Run as root, bwrap maps the sandbox's uid to the host's uid 0: no capabilities,
        # but owner access to root-owned files. /proc/sys/* (mode 0644, root) would then be
        # writable - kernel.core_pattern is a host root shell - so it is made read-only.
        # bwrap only covers it itself when the *directory* is writable, which it is not.
        a += ["--ro-bind", "/proc/sys", "/proc/sys"]
        a += ["--ro-bind-try", "/proc/sysrq-trigger", "/proc/sysrq-trigger"]
        a += ["--size", tmp_size, "--tmpfs", "/tmp"]
        a += ["--size", tmp_size, "--tmpfs", "/dev/shm"]
        base = self.base_prefix
        # The venv's python links to the base interpreter by its host path, and the
        # interpreter finds libpython by an absolute RUNPATH: that path must lead to it. It
        # is mounted at a neutral place and the host path is only a symlink there, so the
        # mount table names no host folder.
        if base.resolve() != self.prefix and not str(base).startswith("/usr/"):
            a += ["--ro-bind", str(shown(base)), PYTHON_HOME]
            for alias in sorted({str(base), str(base.resolve())}):
                a += ["--symlink", PYTHON_HOME, alias]
        a += ["--ro-bind", str(shown(self.prefix)), VENV]
        a += ["--ro-bind", str(shown(agent_dir)), AGENT_DIR]
        a += ["--bind", str(workspace), WORKSPACE]
        for bind in request.binds:
            if bind.writable:
                a += ["--bind", str(Path(bind.host).resolve()), bind.inside]
            else:
                a += ["--ro-bind", str(shown(bind.host)), bind.inside]
        a += ["--remount-ro", "/", "--chdir", WORKSPACE, "--json-status-fd", "3", "--"]
        # bwrap always sets PWD; drop it again unless the caller asked for one.
        if "PWD" in request.env:
            a += ["/usr/bin/env", f"PWD={request.env['PWD']}"]
        else:
            a += ["/usr/bin/env", "-u", "PWD", "--"]
        return a + list(request.command)

    def problem(self, runs_dir: Path) -> str | None:
        return bwrap_problem()

    def execute(self, request: SandboxRequest, workspace: Workspace) -> Ended:
        problem = bwrap_problem()
        if problem:
            raise HarnessError(problem)
        with Views.for_attempt(request.workspace) as views:
            argv = self.argv(request, views)
            split = argv.index("--")  # bwrap reads options from --args FD, not the command
            # The seccomp filter (runner/sandbox/seccomp.py), loaded by bwrap right before exec.
            seccomp_fd = memfd("tmlbench-seccomp", bwrap_filter())
            launch = Launch(
                argv=[argv[0], *argv[split:]],
                fd_args=[*argv[1:split], "--seccomp", str(seccomp_fd)],
                cwd=Path(request.workspace).resolve(),
                bwrap=True,
                inherit_fds=(seccomp_fd,),
                notes=[
                    f"bwrap: uid {SANDBOX_UID} in a user namespace, no network, seccomp",
                    *views.notes,
                ],
            )
            return supervise(self.name, request, launch, workspace)
