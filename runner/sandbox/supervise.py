"""Run one launched attempt to its end: the process side of the bwrap and process backends.

A backend decides *what* to exec (the agent's command directly, or ``bwrap ... command``);
:func:`supervise` does the rest: per-attempt cgroups, the launcher that joins them before
anything else runs, capped logs read without ever blocking the deadline (:class:`Output`),
the deadline and caps (:class:`~runner.sandbox.lifecycle.Watchdog`), SIGTERM → grace →
SIGKILL of every process (:class:`Reaper`), accounting and cleanup.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import math
import os
import select
import signal
import subprocess
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from runner.errors import HarnessError
from runner.sandbox import cgroups
from runner.sandbox.base import SandboxLimits, SandboxRequest
from runner.sandbox.lifecycle import Ended, Watchdog
from runner.sandbox.workspace import Workspace

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

DRAIN_SECONDS = 1.0  # after the kill, how long to wait for pipes to reach EOF


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


class CappedLog:
    """Keeps the first ``cap`` bytes of a stream in a file and counts the rest."""

    def __init__(self, path: Path, cap: int):
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self.cap = max(0, int(cap))
        self.file = open(path, "wb")  # noqa: SIM115 - closed in close()
        self.written = 0
        self.dropped = 0

    def feed(self, data: bytes) -> None:
        room = self.cap - self.written
        if room > 0:
            chunk = data[:room]
            self.file.write(chunk)
            self.written += len(chunk)
        self.dropped += max(0, len(data) - max(room, 0))

    def close(self) -> None:
        if self.file.closed:
            return
        if self.dropped:
            self.file.write(
                f"\n[tmlbench: log truncated at {self.cap} bytes; "
                f"{self.dropped} more bytes dropped]\n".encode()
            )
        self.file.close()


def _ppid_map() -> dict[int, list[int]]:
    children: dict[int, list[int]] = defaultdict(list)
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            stat = Path(f"/proc/{name}/stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2 :].split()
        with contextlib.suppress(IndexError, ValueError):
            children[int(fields[1])].append(int(name))
    return children


def descendants(pid: int) -> list[int]:
    """Live descendants of ``pid`` (host view), found by walking /proc."""
    children = _ppid_map()
    out: list[int] = []
    stack = [pid]
    while stack:
        for child in children.get(stack.pop(), []):
            out.append(child)
            stack.append(child)
    return out


def _kill(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, sig)


def _killpg(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def _is_ns_init(pid: int) -> bool:
    """Is ``pid`` still a pid-namespace init (pid 1 inside), i.e. not a reused pid?"""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    for line in status.splitlines():
        if line.startswith("NSpid:"):
            ids = line.split()[1:]
            return len(ids) > 1 and ids[-1] == "1"
    return False


def _exit_code(returncode: int | None) -> int | None:
    """Shell convention: killed by signal N → 128 + N (what bwrap reports too)."""
    if returncode is None:
        return None
    return 128 - returncode if returncode < 0 else returncode


def _parse_status(raw: bytes) -> tuple[bool, int | None, int | None]:
    """(launcher ok, bwrap child pid, bwrap exit code) from the status pipe."""
    text = raw.decode(errors="replace")
    ok = text.startswith("ok\n")
    rest = text[3:] if ok else ""
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
        except ValueError:
            break
        if isinstance(doc, dict):
            child_pid = doc.get("child-pid", child_pid)
            exit_code = doc.get("exit-code", exit_code)
    return ok, child_pid, exit_code


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


def truncation_notes(stdout: CappedLog, stderr: CappedLog) -> list[str]:
    """What the log caps dropped, for the result's notes."""
    return [
        f"{stream} truncated at {log.cap} bytes ({log.dropped} bytes dropped)"
        for log, stream in ((stdout, "stdout"), (stderr, "stderr"))
        if log.dropped
    ]


def log_head(path: Path, n: int = 2000) -> str:
    try:
        with open(path, "rb") as f:
            return f.read(n).decode(errors="replace").strip()
    except OSError:
        return ""


class Output:
    """The attempt's stdout and stderr (into capped logs) and the launcher's status pipe.

    Read with ``poll`` and non-blocking descriptors, so no amount of output (or silence) can
    hold up the deadline; the status pipe keeps at most 64 KiB.
    """

    STATUS_CAP = 65536

    def __init__(self, request: SandboxRequest):
        try:
            self.stdout = CappedLog(request.stdout_path, request.log_cap_bytes)
        except OSError as exc:
            raise HarnessError(f"cannot write the attempt's stdout log: {exc}") from exc
        try:
            self.stderr = CappedLog(request.stderr_path, request.log_cap_bytes)
        except OSError as exc:
            self.stdout.close()
            raise HarnessError(f"cannot write the attempt's stderr log: {exc}") from exc
        self.status = bytearray()
        self.sinks: dict[int, CappedLog | None] = {}
        self.poller = select.poll()
        self.pidfd: int | None = None
        self.pipes = [os.pipe() for _ in range(3)]  # stdout, stderr, status (write ends: child)

    def attach(self, pid: int) -> None:
        """The child has its ends: keep only ours, and watch the child's exit (pidfd)."""
        for (r, w), sink in zip(self.pipes, (self.stdout, self.stderr, None), strict=True):
            os.close(w)
            os.set_blocking(r, False)
            self.sinks[r] = sink
            self.poller.register(r, select.POLLIN | select.POLLHUP | select.POLLERR)
        self.pipes = []
        with contextlib.suppress(OSError, AttributeError):
            self.pidfd = os.pidfd_open(pid)
            self.poller.register(self.pidfd, select.POLLIN)

    def read(self, timeout: float) -> None:
        """Wait up to ``timeout`` seconds for output or the child's exit; take what is there."""
        try:
            events = self.poller.poll(max(0, int(timeout * 1000)))
        except InterruptedError:
            return
        for fd, _ev in events:
            if fd != self.pidfd:
                self._take(fd)

    def _take(self, fd: int) -> None:
        for _ in range(16):
            try:
                data = os.read(fd, 65536)
            except BlockingIOError:
                return
            except OSError:
                data = b""
            if not data:
                self.poller.unregister(fd)
                os.close(fd)
                del self.sinks[fd]
                return
            sink = self.sinks[fd]
            if sink is None:
                self.status.extend(data[: self.STATUS_CAP - len(self.status)])
            else:
                sink.feed(data)

    def drain(self, seconds: float) -> bool:
        """After the kill: read to EOF for at most ``seconds``; False if pipes stayed open."""
        if self.pidfd is not None:
            self.poller.unregister(self.pidfd)
            os.close(self.pidfd)
            self.pidfd = None
        end = time.monotonic() + seconds
        while self.sinks:
            left = end - time.monotonic()
            if left <= 0:
                return False
            self.read(min(left, 0.05))
        return True

    def close(self) -> None:
        for r, w in self.pipes:
            os.close(r)
            os.close(w)
        for fd in list(self.sinks):
            with contextlib.suppress(OSError):
                self.poller.unregister(fd)
            os.close(fd)
        self.sinks.clear()
        if self.pidfd is not None:
            os.close(self.pidfd)
        self.stdout.close()
        self.stderr.close()


class Reaper:
    """Signals every process of the attempt: through its cgroups, or found in /proc without.

    Under bwrap, bwrap itself and its pid-namespace init are spared the SIGTERM (they pass
    it on to nobody and must stay to reap); the kill takes the whole namespace.
    """

    def __init__(
        self,
        proc: subprocess.Popen[bytes],
        cg: cgroups.AttemptCgroups | None,
        output: Output,
        bwrap: bool,
    ):
        self.proc, self.cg, self.output, self.bwrap = proc, cg, output, bwrap
        self.notes: list[str] = []

    def _bwrap_child(self) -> int | None:
        return _parse_status(bytes(self.output.status))[1]

    def all_gone(self) -> bool:
        return self.cg.empty() if self.cg is not None else False

    def terminate(self) -> None:
        spare = {self.proc.pid, self._bwrap_child()} if self.bwrap else set()
        if self.cg is not None:
            self.cg.signal_all(signal.SIGTERM, exclude={p for p in spare if p})
            return
        for pid in descendants(self.proc.pid):
            if pid not in spare:
                _kill(pid, signal.SIGTERM)
        if not self.bwrap:
            _killpg(self.proc.pid, signal.SIGTERM)

    def kill(self) -> None:
        """SIGKILL everything and reap the launcher (never waits unboundedly)."""
        if self.cg is not None:
            if not self.cg.kill_all():
                self.notes.append("some processes survived SIGKILL of the cgroup")
            if self.proc.poll() is None:  # e.g. the deadline came before the launcher joined
                _kill(self.proc.pid, signal.SIGKILL)
        else:
            self._kill_without_cgroups()
        try:
            self.proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            _kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait()

    def _kill_without_cgroups(self) -> None:
        # Under bwrap, killing the pid-namespace init takes the whole namespace with it: if
        # bwrap itself already died, the init was reparented away from us and this is the
        # only way to reach the namespace.
        child = self._bwrap_child()
        if self.bwrap and child and _is_ns_init(child):
            _kill(child, signal.SIGKILL)
        for _ in range(3):
            victims = descendants(self.proc.pid)
            for pid in victims:
                _kill(pid, signal.SIGKILL)
            _killpg(self.proc.pid, signal.SIGKILL)
            _kill(self.proc.pid, signal.SIGKILL)
            if not victims:
                break
            time.sleep(0.01)


def supervise(backend: str, request: SandboxRequest, launch: Launch, workspace: Workspace) -> Ended:
    """Run one launched attempt: cgroups, launch, deadline and caps, kill, account."""
    limits = request.limits
    notes = list(launch.notes)
    try:
        cg = _attempt_cgroups(limits, notes)
    except BaseException:
        _close(launch.inherit_fds)  # _launch owns them from here on
        raise
    try:
        try:
            output = Output(request)
        except BaseException:
            _close(launch.inherit_fds)
            raise
        proc: subprocess.Popen[bytes] | None = None
        try:
            start = time.monotonic()
            proc = _launch(backend, request, launch, cg, output)
            reaper = Reaper(proc, cg, output, launch.bwrap)
            workspace.watch(on_exceed=cg.freeze if cg is not None else None)
            dog = Watchdog(start, limits.wall_seconds, limits.grace_seconds)
            while proc.poll() is None:
                step = dog.next(
                    time.monotonic(),
                    disk_exceeded=workspace.exceeded,
                    all_gone=dog.kill_at is not None and reaper.all_gone(),
                )
                if step.action == "kill":
                    break
                if step.action == "terminate":
                    reaper.terminate()
                output.read(step.wait)
            reaper.kill()
            wall = time.monotonic() - start
            if not output.drain(DRAIN_SECONDS):
                notes.append("output pipes still held open by escaped processes; stopped reading")
        finally:
            if proc is not None and proc.returncode is None:  # a fault of ours mid-attempt
                Reaper(proc, cg, output, launch.bwrap).kill()
            output.close()
        notes += reaper.notes + truncation_notes(output.stdout, output.stderr)
        _check_launched(backend, request, launch, output, proc, killed=dog.reason is not None)
        ended = Ended(exit_code=_exit_code(proc.returncode), wall_seconds=wall, notes=notes)
        ended.timed_out = dog.timed_out
        if cg is not None:
            stats = cg.stats()
            ended.cpu_seconds = stats.cpu_seconds
            ended.peak_memory_bytes = stats.peak_memory_bytes
            ended.memory_limit_bytes = stats.memory_limit_bytes
            ended.oom_kills = stats.oom_kills
            ended.pids_max_events = stats.pids_max_events
        return ended
    finally:
        if cg is not None:
            notes += [f"cgroup cleanup: {problem}" for problem in cg.remove()]


def _attempt_cgroups(limits: SandboxLimits, notes: list[str]) -> cgroups.AttemptCgroups | None:
    ok, why = cgroups.available()
    if ok:
        return cgroups.AttemptCgroups.create(
            memory_bytes=limits.memory_bytes, pids=limits.pids, cpuset=limits.cpuset
        )
    notes.append(
        f"cgroups unavailable ({why}): process-group kill only, memory capped per "
        "process with RLIMIT_DATA, no pids/cpuset cap, no cpu/memory accounting"
    )
    return None


def _launch(
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
        _close(pass_fds)  # the child has its copies (or never started)
    output.attach(proc.pid)
    return proc


def _close(fds: tuple[int, ...]) -> None:
    for fd in fds:
        with contextlib.suppress(OSError):
            os.close(fd)


def _check_launched(
    backend: str,
    request: SandboxRequest,
    launch: Launch,
    output: Output,
    proc: subprocess.Popen[bytes],
    *,
    killed: bool,
) -> None:
    """A sandbox that never started the agent is the harness's fault, not the agent's."""
    launched, child_pid, _bwrap_exit = _parse_status(bytes(output.status))
    if killed:
        return
    exit_code = _exit_code(proc.returncode)
    if not launched:
        raise HarnessError(
            f"the {backend} sandbox launcher failed (exit {exit_code}): "
            f"{log_head(request.stderr_path) or 'no message'}"
        )
    if launch.bwrap and child_pid is None:
        raise HarnessError(
            f"bubblewrap could not start the sandbox (exit {exit_code}): "
            f"{log_head(request.stderr_path) or 'no message'}. Check that bwrap works here, e.g. "
            "`bwrap --unshare-all --ro-bind /usr /usr --symlink usr/bin /bin true`"
        )
