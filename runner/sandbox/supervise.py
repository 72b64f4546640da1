"""Run one launched attempt to completion or deadline: the part every backend shares.

A backend decides *what* to exec (the agent's command directly, or ``bwrap ... command``);
:func:`supervise` does the rest: per-attempt cgroups, the launcher that joins them before
anything else runs, capped logs read without ever blocking the deadline, the disk
watchdog, SIGTERM → grace → SIGKILL of every process, accounting and cleanup.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import json
import math
import os
import select
import signal
import stat
import subprocess
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from runner.errors import HarnessError
from runner.sandbox import cgroups
from runner.sandbox.base import SandboxRequest, SandboxResult

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

POLL_SLICE = 0.25  # longest sleep of the supervisor loop (seconds)
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


def workspace_bytes(root: Path) -> int:
    """Disk blocks used under ``root`` (symlinks not followed, hard links counted once)."""
    total = 0
    seen: set[tuple[int, int]] = set()
    stack = [str(root)]
    while stack:
        top = stack.pop()
        try:
            it = os.scandir(top)
        except OSError:
            continue
        with it:
            for entry in it:
                try:
                    st = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                if st.st_nlink > 1 and not entry.is_dir(follow_symlinks=False):
                    key = (st.st_dev, st.st_ino)
                    if key in seen:
                        continue
                    seen.add(key)
                total += st.st_blocks * 512
                if entry.is_dir(follow_symlinks=False):
                    stack.append(entry.path)
    return total


class DiskWatch(threading.Thread):
    """Polls the workspace size; over the cap, sets ``exceeded`` and calls ``on_exceed`` at once.

    An agent can write gigabytes per second, so the poll is frequent (``interval``, backed off
    to ``busy`` times the last scan's duration so a workspace with very many files costs the
    harness little CPU) and ``on_exceed`` (freezing the attempt) stops the writing right away
    instead of after the supervisor's next wake-up and a SIGTERM grace period.
    """

    def __init__(
        self,
        root: Path,
        limit: int,
        interval: float = 0.05,
        on_exceed: Callable[[], None] | None = None,
        busy: float = 20.0,
    ):
        super().__init__(name="tmlbench-diskwatch", daemon=True)
        self.root, self.limit, self.interval = root, limit, interval
        self.on_exceed, self.busy = on_exceed, busy
        self.stop = threading.Event()
        self.exceeded = threading.Event()
        self.peak = 0

    def run(self) -> None:
        wait = self.interval
        while not self.stop.wait(wait):
            started = time.monotonic()
            used = workspace_bytes(self.root)
            self.peak = max(self.peak, used)
            if used > self.limit:
                # Flag first: ``on_exceed`` may end the attempt at once (docker kills the
                # writers), and whoever sees it end must already know why.
                self.exceeded.set()
                if self.on_exceed is not None and not self.stop.is_set():
                    with contextlib.suppress(Exception):
                        self.on_exceed()
                return
            wait = max(self.interval, self.busy * (time.monotonic() - started))


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
    mfd = os.memfd_create("tmlbench-args", os.MFD_CLOEXEC)
    try:
        os.write(mfd, b"".join(a.encode() + b"\0" for a in args))
        os.lseek(mfd, 0, os.SEEK_SET)
        return fcntl.fcntl(mfd, fcntl.F_DUPFD_CLOEXEC, 10)
    finally:
        os.close(mfd)


def log_head(path: Path, n: int = 2000) -> str:
    try:
        with open(path, "rb") as f:
            return f.read(n).decode(errors="replace").strip()
    except OSError:
        return ""


def supervise(backend: str, request: SandboxRequest, launch: Launch) -> SandboxResult:
    limits = request.limits
    notes = list(launch.notes)
    if not request.workspace.is_dir():
        raise HarnessError(f"workspace {request.workspace} does not exist; create it first")

    ok, why = cgroups.available()
    cg: cgroups.AttemptCgroups | None = None
    if ok:
        cg = cgroups.AttemptCgroups.create(
            memory_bytes=limits.memory_bytes, pids=limits.pids, cpuset=limits.cpuset
        )
    else:
        notes.append(
            f"cgroups unavailable ({why}): process-group kill only, memory capped per "
            "process with RLIMIT_DATA, no pids/cpuset cap, no cpu/memory accounting"
        )

    try:
        return _run(backend, request, launch, cg, notes)
    finally:
        if cg is not None:
            for problem in cg.remove():
                notes.append(f"cgroup cleanup: {problem}")


def _run(
    backend: str,
    request: SandboxRequest,
    launch: Launch,
    cg: cgroups.AttemptCgroups | None,
    notes: list[str],
) -> SandboxResult:
    limits = request.limits
    procs_files = cg.procs_files() if cg is not None else []
    fsize_blocks = max(1, math.ceil(limits.disk_bytes / 512))
    data_kb = "-" if cg is not None else str(max(1, limits.memory_bytes // 1024))
    argv = [
        "/bin/sh",
        "-c",
        LAUNCHER,
        "tmlbench-launch",
        str(len(procs_files)),
        *procs_files,
        str(fsize_blocks),
        data_kb,
        "1" if launch.keep_pwd else "0",
        "bwrap" if launch.bwrap else "close",
        *launch.argv,
    ]

    try:
        out_log = CappedLog(request.stdout_path, request.log_cap_bytes)
    except OSError as exc:
        raise HarnessError(f"cannot write the attempt's stdout log: {exc}") from exc
    try:
        err_log = CappedLog(request.stderr_path, request.log_cap_bytes)
    except OSError as exc:
        out_log.close()
        raise HarnessError(f"cannot write the attempt's stderr log: {exc}") from exc
    status_buf = bytearray()
    fds: dict[int, CappedLog | None] = {}
    poller = select.poll()
    pidfd: int | None = None
    proc: subprocess.Popen[bytes] | None = None
    watch: DiskWatch | None = None
    timed_out = False
    reason: str | None = None

    def read_ready(timeout_s: float) -> bool:
        """Poll once; read what is there. True if the main process has exited."""
        try:
            events = poller.poll(max(0, int(timeout_s * 1000)))
        except InterruptedError:
            events = []
        exited = False
        for fd, _ev in events:
            if fd == pidfd:
                exited = True
                continue
            for _ in range(16):
                try:
                    data = os.read(fd, 65536)
                except BlockingIOError:
                    break
                except OSError:
                    data = b""
                if not data:
                    poller.unregister(fd)
                    os.close(fd)
                    del fds[fd]
                    break
                sink = fds[fd]
                if sink is None:
                    status_buf.extend(data[: 65536 - len(status_buf)])
                else:
                    sink.feed(data)
        return exited

    def terminate() -> None:
        """SIGTERM every process of the attempt (not bwrap's own supervisor processes)."""
        assert proc is not None
        _ok, child_pid, _ = _parse_status(bytes(status_buf))
        spare = {proc.pid, child_pid} if launch.bwrap else set()
        if cg is not None:
            cg.signal_all(signal.SIGTERM, exclude={p for p in spare if p})
            return
        for pid in descendants(proc.pid):
            if pid not in spare:
                _kill(pid, signal.SIGTERM)
        if not launch.bwrap:
            _killpg(proc.pid, signal.SIGTERM)

    def all_gone() -> bool:
        return cg.empty() if cg is not None else False

    def hard_kill() -> None:
        assert proc is not None
        if cg is not None:
            if not cg.kill_all():
                notes.append("some processes survived SIGKILL of the cgroup")
            if proc.poll() is None:  # e.g. the deadline came before the launcher joined
                _kill(proc.pid, signal.SIGKILL)
            return
        # Fallback: process group and every descendant we can still see. Under bwrap,
        # killing the pid-namespace init (or bwrap itself, --die-with-parent) takes the
        # whole namespace with it.
        _ok, child_pid, _ = _parse_status(bytes(status_buf))
        if launch.bwrap and child_pid and _is_ns_init(child_pid):
            # bwrap's pid-namespace init: if bwrap itself already died it was reparented
            # away from us, and killing it is the only way to reach the namespace.
            _kill(child_pid, signal.SIGKILL)
        for _ in range(3):
            victims = descendants(proc.pid)
            for pid in victims:
                _kill(pid, signal.SIGKILL)
            _killpg(proc.pid, signal.SIGKILL)
            _kill(proc.pid, signal.SIGKILL)
            if not victims:
                break
            time.sleep(0.01)

    start = time.monotonic()
    deadline = start + limits.wall_seconds
    pass_fds: tuple[int, ...] = ()
    try:
        if launch.fd_args is not None:
            pass_fds = (_args_fd(launch.fd_args),)
            at = len(argv) - len(launch.argv) + 1
            argv[at:at] = ["--args", str(pass_fds[0])]
        pipes = [os.pipe() for _ in range(3)]  # stdout, stderr, status
        try:
            proc = subprocess.Popen(
                argv,
                stdin=pipes[2][1],
                stdout=pipes[0][1],
                stderr=pipes[1][1],
                cwd=str(launch.cwd),
                env=dict(request.env),
                start_new_session=True,
                close_fds=True,
                pass_fds=pass_fds,
            )
        except (OSError, ValueError, TypeError) as exc:
            for r, w in pipes:
                os.close(r)
                os.close(w)
            raise HarnessError(f"cannot start the {backend} sandbox: {exc}") from exc
        for (r, w), sink in zip(pipes, (out_log, err_log, None), strict=True):
            os.close(w)
            os.set_blocking(r, False)
            fds[r] = sink
            poller.register(r, select.POLLIN | select.POLLHUP | select.POLLERR)
        with contextlib.suppress(OSError, AttributeError):
            pidfd = os.pidfd_open(proc.pid)
            poller.register(pidfd, select.POLLIN)

        # Over the disk cap the attempt is frozen at once (no more writes) and then killed
        # without the SIGTERM grace the deadline gets.
        watch = DiskWatch(
            request.workspace,
            limits.disk_bytes,
            on_exceed=functools.partial(cg._freeze, "FROZEN") if cg is not None else None,
        )
        watch.start()

        kill_at: float | None = None
        while proc.poll() is None:
            now = time.monotonic()
            if kill_at is None:
                if now >= deadline:
                    timed_out, reason = True, "timeout"
                elif watch.exceeded.is_set():
                    reason = "disk"
                if reason == "disk":
                    kill_at = now
                    continue
                if reason is not None:
                    terminate()
                    kill_at = now + max(0.0, limits.grace_seconds)
                    continue
                wake = min(deadline - now, POLL_SLICE)
            else:
                if now >= kill_at or all_gone():
                    break
                wake = min(kill_at - now, 0.02)
            read_ready(max(0.0, wake))

        hard_kill()
        try:
            proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            _kill(proc.pid, signal.SIGKILL)
            proc.wait()
        wall = time.monotonic() - start
        if pidfd is not None:
            poller.unregister(pidfd)

        drain_end = time.monotonic() + DRAIN_SECONDS
        while fds:
            left = drain_end - time.monotonic()
            if left <= 0:
                notes.append("output pipes still held open by escaped processes; stopped reading")
                break
            read_ready(min(left, 0.05))
    finally:
        for fd in pass_fds:
            os.close(fd)
        if watch is not None:
            watch.stop.set()
        for fd in list(fds):
            with contextlib.suppress(OSError):
                poller.unregister(fd)
            os.close(fd)
        fds.clear()
        if pidfd is not None:
            os.close(pidfd)
        out_log.close()
        err_log.close()
        if proc is not None and proc.returncode is None:
            _kill(proc.pid, signal.SIGKILL)
            with contextlib.suppress(Exception):
                proc.wait(timeout=2)

    exit_code = _exit_code(proc.returncode)
    launched, child_pid, _bwrap_exit = _parse_status(bytes(status_buf))
    killed_by_us = reason is not None
    if not launched and not killed_by_us:
        raise HarnessError(
            f"the {backend} sandbox launcher failed (exit {exit_code}): "
            f"{log_head(request.stderr_path) or 'no message'}"
        )
    if launch.bwrap and child_pid is None and not killed_by_us:
        raise HarnessError(
            f"bubblewrap could not start the sandbox (exit {exit_code}): "
            f"{log_head(request.stderr_path) or 'no message'}. Check that bwrap works here, e.g. "
            "`bwrap --unshare-all --ro-bind /usr /usr --symlink usr/bin /bin true`"
        )

    for log, stream in ((out_log, "stdout"), (err_log, "stderr")):
        if log.dropped:
            notes.append(f"{stream} truncated at {log.cap} bytes ({log.dropped} bytes dropped)")

    result = SandboxResult(
        backend=backend, exit_code=exit_code, wall_seconds=wall, timed_out=timed_out, notes=notes
    )
    if reason == "disk":
        result.limit_exceeded = "disk"
        notes.append(
            f"workspace grew past {limits.disk_bytes} bytes ({watch.peak if watch else 0})"
        )
    elif exit_code == 128 + signal.SIGXFSZ:
        result.limit_exceeded = "disk"
        notes.append("a file grew past the disk cap (SIGXFSZ)")
    if cg is not None:
        stats = cg.stats()
        result.cpu_seconds = stats.cpu_seconds
        result.peak_memory_bytes = stats.peak_memory_bytes
        memory_hit = stats.oom_kills > 0 or (
            exit_code == 128 + signal.SIGKILL
            and bool(stats.memory_limit_bytes)
            and (stats.peak_memory_bytes or 0) >= 0.98 * (stats.memory_limit_bytes or 0)
        )
        if memory_hit:
            notes.append(f"memory cap hit ({stats.oom_kills} OOM kill(s))")
        if stats.pids_max_events:
            notes.append(f"pids cap hit {stats.pids_max_events} time(s) (fork refused)")
        if result.limit_exceeded is None and (exit_code != 0 or timed_out):
            if memory_hit and not timed_out:
                result.limit_exceeded = "memory"
            elif stats.pids_max_events:
                result.limit_exceeded = "pids"
    return result


def strip_setid_bits(root: Path) -> list[str]:
    """Clear the setuid/setgid bits of everything under ``root``; a note if it changed any.

    Run as root, bwrap maps the sandbox's uid to the host's uid 0, so a file the agent
    marks setuid in its workspace is a setuid-root program on the host's disk (docker's
    sandbox user is a real host uid: harmless, but no set-id file outlives an attempt on any
    backend). Called once every process of the attempt is gone, so nothing can race it;
    symlinks are skipped. Meanwhile the run folder is the harness user's alone (0700).
    """
    changed = 0
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = os.path.join(dirpath, name)
            try:
                st = os.lstat(path)
                if stat.S_ISLNK(st.st_mode) or not st.st_mode & (stat.S_ISUID | stat.S_ISGID):
                    continue
                os.chmod(path, stat.S_IMODE(st.st_mode) & ~(stat.S_ISUID | stat.S_ISGID))
                changed += 1
            except OSError:
                continue
    return [f"cleared setuid/setgid bits on {changed} workspace file(s)"] if changed else []
