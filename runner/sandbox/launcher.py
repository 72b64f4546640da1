"""Starting an attempt: the shell launcher that joins the cgroups and sets rlimits first.

A backend says what to exec (:class:`Launch`); :func:`start_launcher` starts it behind the
launcher, and :func:`check_launched` tells a sandbox that never started the agent (the
harness's fault) from an agent that failed.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import math
import os
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, StrictInt, ValidationError

from runner.errors import HarnessError
from runner.sandbox import cgroups
from runner.sandbox.base import SandboxRequest
from runner.sandbox.output import Output, log_head

# The launcher: join every cgroup, set rlimits, report "ok" on the status pipe (fd 0),
# then exec the real command with stdin = /dev/null. Arguments, in order:
#   n_cgroups, cgroup.procs files..., fsize blocks (512 B), data kbytes or "-",
#   keep_pwd (0/1), status mode ("bwrap": keep the status pipe as fd 3 for
#   bwrap --json-status-fd 3; "close": close it), then the command.
# Everything travels as positional arguments, so no path is ever parsed by the shell.
LAUNCHER = r"""
n=$1; shift
while [ "$n" -gt 0 ]; do
  echo $$ > "$1" || { echo "tmlbench-launch: cannot join cgroup $1" >&2; exit 125; }
  shift; n=$((n - 1))
done
ulimit -f "$1" || exit 125; shift
if [ "$1" != - ]; then ulimit -d "$1" || exit 125; fi; shift
if [ "$1" = 0 ]; then unset PWD; fi; shift
mode=$1; shift
echo ok >&0
if [ "$mode" = bwrap ]; then exec 3>&0 0</dev/null; else exec 0</dev/null; fi
exec "$@"
"""


@dataclass
class Launch:
    """What a backend wants run: ``argv`` (host view) after the launcher, from ``cwd``."""

    argv: list[str]
    cwd: Path
    bwrap: bool = False  # bwrap gets the status pipe as fd 3 (--json-status-fd 3)
    keep_pwd: bool = False
    # Inserted right after argv[0] as ``--args FD`` (NUL-separated, read from a memfd) so
    # they show up neither in the host's process list nor in the sandbox's /proc/1/cmdline.
    fd_args: list[str] | None = None
    # Descriptors the launched program inherits (e.g. bwrap's --seccomp FD); supervise closes
    # them once the attempt has ended. Their numbers must be >= 10 (the launcher owns 0-3).
    inherit_fds: tuple[int, ...] = ()
    notes: list[str] = field(default_factory=list)


def exit_code_of(returncode: int | None) -> int | None:
    """Shell convention: killed by signal N → 128 + N (what bwrap reports too)."""
    if returncode is None:
        return None
    return 128 - returncode if returncode < 0 else returncode


class _BwrapStatus(BaseModel):
    """One JSON document bwrap writes on ``--json-status-fd`` (it closes that descriptor in
    the sandbox, so only bwrap writes there): the first names the child, the last its exit."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    child_pid: StrictInt | None = Field(default=None, alias="child-pid")
    exit_code: StrictInt | None = Field(default=None, alias="exit-code")


@dataclass(frozen=True)
class LaunchStatus:
    """What the status pipe said: the launcher's "ok" (it joined the cgroups and set the
    rlimits), and under bwrap its sandbox's child pid and exit code."""

    launched: bool
    child_pid: int | None = None
    exit_code: int | None = None


def parse_status(raw: bytes) -> LaunchStatus:
    """The status pipe's bytes: "ok\\n", then bwrap's JSON documents one after another."""
    text = raw.decode(errors="replace")
    if not text.startswith("ok\n"):
        return LaunchStatus(launched=False)
    rest = text[3:]
    child_pid = exit_code = None
    decoder = json.JSONDecoder()
    pos = 0
    while True:
        while pos < len(rest) and rest[pos].isspace():
            pos += 1
        if pos >= len(rest):
            break
        try:
            doc, pos = decoder.raw_decode(rest, pos)
        except ValueError:  # not JSON: nothing after it can be read
            break
        try:
            status = _BwrapStatus.model_validate(doc)
        except ValidationError:  # no status document of bwrap's: skipped
            continue
        child_pid = status.child_pid if status.child_pid is not None else child_pid
        exit_code = status.exit_code if status.exit_code is not None else exit_code
    return LaunchStatus(launched=True, child_pid=child_pid, exit_code=exit_code)


def _args_fd(args: list[str]) -> int:
    """A memfd holding ``args`` NUL-separated, at fd >= 10 (the launcher owns 0-3)."""
    if any("\0" in a for a in args):
        raise HarnessError("sandbox arguments must not contain NUL bytes")
    return memfd("tmlbench-args", b"".join(a.encode() + b"\0" for a in args))


def memfd(name: str, data: bytes) -> int:
    """A close-on-exec memfd at fd >= 10 holding ``data``, positioned at its start."""
    mfd = os.memfd_create(name, os.MFD_CLOEXEC)
    try:
        os.write(mfd, data)
        os.lseek(mfd, 0, os.SEEK_SET)
        return fcntl.fcntl(mfd, fcntl.F_DUPFD_CLOEXEC, 10)
    finally:
        os.close(mfd)


def start_launcher(
    backend: str,
    request: SandboxRequest,
    launch: Launch,
    cg: cgroups.AttemptCgroups | None,
    output: Output,
) -> subprocess.Popen[bytes]:
    """Start the launcher (it joins the cgroups and sets rlimits, then execs the command)."""
    limits = request.limits
    procs_files = cg.procs_files() if cg is not None else []
    argv = [
        "/bin/sh",
        "-c",
        LAUNCHER,
        "tmlbench-launch",
        str(len(procs_files)),
        *procs_files,
        str(max(1, math.ceil(limits.disk_bytes / 512))),  # RLIMIT_FSIZE, 512-byte blocks
        "-" if cg is not None else str(max(1, limits.memory_bytes // 1024)),  # RLIMIT_DATA
        "1" if launch.keep_pwd else "0",
        "bwrap" if launch.bwrap else "close",
        *launch.argv,
    ]
    pass_fds = launch.inherit_fds
    out_w, err_w, status_w = (w for _r, w in output.pipes)
    try:
        if launch.fd_args is not None:
            pass_fds = (_args_fd(launch.fd_args), *pass_fds)
            at = len(argv) - len(launch.argv) + 1
            argv[at:at] = ["--args", str(pass_fds[0])]
        proc = subprocess.Popen(
            argv,
            stdin=status_w,
            stdout=out_w,
            stderr=err_w,
            cwd=str(launch.cwd),
            env=dict(request.env),
            start_new_session=True,
            close_fds=True,
            pass_fds=pass_fds,
        )
    except (OSError, ValueError, TypeError) as exc:
        raise HarnessError(f"cannot start the {backend} sandbox: {exc}") from exc
    finally:
        close_fds(pass_fds)  # the child has its copies (or never started)
    output.attach(proc.pid)
    return proc


def close_fds(fds: tuple[int, ...]) -> None:
    """Close ``fds``, already closed ones included."""
    for fd in fds:
        with contextlib.suppress(OSError):
            os.close(fd)


def check_launched(
    backend: str,
    request: SandboxRequest,
    launch: Launch,
    output: Output,
    proc: subprocess.Popen[bytes],
    *,
    killed: bool,
) -> None:
    """A sandbox that never started the agent is the harness's fault, not the agent's."""
    status = parse_status(bytes(output.status))
    if killed:
        return
    exit_code = exit_code_of(proc.returncode)
    if not status.launched:
        raise HarnessError(
            f"the {backend} sandbox launcher failed (exit {exit_code}): "
            f"{log_head(request.stderr_path) or 'no message'}"
        )
    if launch.bwrap and status.child_pid is None:
        raise HarnessError(
            f"bubblewrap could not start the sandbox (exit {exit_code}): "
            f"{log_head(request.stderr_path) or 'no message'}. Check that bwrap works here, e.g. "
            "`bwrap --unshare-all --ro-bind /usr /usr --symlink usr/bin /bin true`"
        )
