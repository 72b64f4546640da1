"""Per-attempt cgroups (v1): caps, accounting and a reliable kill-everything.

One attempt gets one cgroup in each of the memory, pids, cpuset, cpuacct and freezer
hierarchies, named ``<own cgroup>/tmlbench/<harness pid>-<its start time>-<uuid>``. They are nested under the cgroup the
harness itself runs in (not the hierarchy root) so a harness that is itself limited or
accounted (a container, a systemd slice) stays limited and accounted with its children.

The launcher process writes its own pid into every ``cgroup.procs`` before it execs
anything, so every process of the attempt is born inside and cannot leave (the sandbox
cannot see or write the cgroup filesystem). Killing is freeze → SIGKILL every member →
thaw, repeated until the cgroup is empty, so double-forks and setsid() do not help.

A harness killed with SIGKILL cannot remove its cgroups (and, on the process backend, its
attempts' processes outlive it). The first attempt a harness starts therefore removes the
cgroups whose harness (the pid and start time in the name) is gone, killing what runs in them.
"""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from runner.errors import HarnessError

CONTROLLERS = ("memory", "pids", "cpuset", "cpuacct", "freezer")


@dataclass(frozen=True)
class CgroupStats:
    cpu_seconds: float | None
    peak_memory_bytes: int | None
    oom_kills: int
    memory_failcnt: int
    memory_limit_bytes: int | None
    pids_max_events: int


def v1_mounts() -> dict[str, tuple[Path, str]]:
    """controller (or name=...) -> (mount point, mount root) of every cgroup v1 hierarchy."""
    found: dict[str, tuple[Path, str]] = {}
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return found
    for line in lines:
        left, _, right = line.partition(" - ")
        rparts, lparts = right.split(), left.split()
        if len(rparts) < 3 or rparts[0] != "cgroup":
            continue
        for opt in rparts[2].split(","):
            if opt.startswith("name=") or ("=" not in opt and opt not in ("rw", "ro")):
                found.setdefault(opt, (Path(lparts[4]), lparts[3]))
    return found


def _mounts() -> dict[str, tuple[Path, str]]:
    """The hierarchies of the controllers an attempt uses."""
    return {c: mount for c, mount in v1_mounts().items() if c in CONTROLLERS}


def _own_paths() -> dict[str, str]:
    """controller -> this process's cgroup path in that hierarchy."""
    own: dict[str, str] = {}
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return own
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        for ctl in parts[1].split(","):
            if ctl in CONTROLLERS:
                own[ctl] = parts[2]
    return own


def parent_dirs() -> dict[str, Path] | None:
    """Where attempt cgroups are created, per controller; None if cgroups v1 is unusable."""
    mounts = _mounts()
    if any(ctl not in mounts for ctl in CONTROLLERS):
        return None
    own = _own_paths()
    parents: dict[str, Path] = {}
    for ctl in CONTROLLERS:
        mount_point, root = mounts[ctl]
        rel = own.get(ctl, "/")
        if root != "/" and (rel == root or rel.startswith(root.rstrip("/") + "/")):
            rel = rel[len(root) :]
        elif root != "/":
            rel = "/"
        parents[ctl] = mount_point / rel.lstrip("/") / "tmlbench"
    return parents


def available() -> tuple[bool, str]:
    """Can this process create attempt cgroups? (ok, reason if not)."""
    parents = parent_dirs()
    if parents is None:
        return False, "cgroup v1 hierarchies for memory/pids/cpuset/cpuacct/freezer not mounted"
    for ctl, parent in parents.items():
        base = parent.parent
        if not os.access(base, os.W_OK):
            return False, f"no write access to {base} ({ctl} cgroup); run as root"
    return True, ""


def _read(path: Path) -> str:
    return path.read_text().strip()


def _write(path: Path, value: str) -> None:
    with open(path, "w") as f:
        f.write(value)


def _start_time(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (``/proc/<pid>/stat`` field 22)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rpartition(")")[2].split()[19]  # fields after "pid (comm)" start at field 3


def _owner_tag() -> str:
    """``<pid>-<start time>`` of this process: a harness identity that survives pid reuse."""
    return f"{os.getpid()}-{_start_time(os.getpid()) or 0}"


def _owner_alive(name: str) -> bool | None:
    """Is the harness named in a cgroup's name still running? None if the name has no owner."""
    parts = name.split("-")
    if len(parts) != 3 or not parts[0].isdigit() or not parts[1].isdigit():
        return None  # made by an older harness: nothing says whose it is, leave it alone
    return _start_time(int(parts[0])) == parts[1]


_stale_lock = threading.Lock()
_stale_checked = False


def remove_stale() -> list[str]:
    """Kill and remove the attempt cgroups of harnesses that died (once per process).

    Returns the names removed. Cgroups of live harnesses (their attempts may be running right
    now) and of unknown owners are left alone.
    """
    global _stale_checked
    with _stale_lock:
        if _stale_checked:
            return []
        _stale_checked = True
        parents = parent_dirs()
        if parents is None:
            return []
        names = set()
        for parent in parents.values():
            with contextlib.suppress(OSError):
                names |= {d.name for d in parent.iterdir() if d.is_dir()}
        stale = sorted(n for n in names if _owner_alive(n) is False)
        for name in stale:
            dirs = {ctl: parents[ctl] / name for ctl in CONTROLLERS}
            dirs = {ctl: d for ctl, d in dirs.items() if d.is_dir()}
            if "freezer" in dirs:  # killing goes through the freezer cgroup
                AttemptCgroups(dirs).remove()
            else:
                for d in dirs.values():
                    with contextlib.suppress(OSError):
                        d.rmdir()
        return stale


def _ensure_parent(ctl: str, parent: Path) -> None:
    """Create ``.../tmlbench`` once; a cpuset parent needs cpus and mems before children work."""
    try:
        parent.mkdir(exist_ok=True)
    except OSError as exc:
        raise HarnessError(
            f"cannot create cgroup {parent}: {exc}; run the harness as root"
        ) from exc
    if ctl == "cpuset":
        for knob in ("cpuset.cpus", "cpuset.mems"):
            if not _read(parent / knob):
                _write(parent / knob, _read(parent.parent / knob))


class AttemptCgroups:
    """The cgroups of one attempt. Use :meth:`create`, then always :meth:`remove`."""

    def __init__(self, dirs: dict[str, Path]):
        self.dirs = dirs

    @classmethod
    def create(
        cls, *, memory_bytes: int, pids: int, cpuset: str | None, name: str | None = None
    ) -> AttemptCgroups:
        parents = parent_dirs()
        if parents is None:
            raise HarnessError("cgroup v1 is not mounted")
        name = name or f"{_owner_tag()}-{uuid.uuid4().hex}"
        self = cls({})
        try:
            for ctl in CONTROLLERS:
                _ensure_parent(ctl, parents[ctl])
            remove_stale()
            for ctl in CONTROLLERS:
                d = parents[ctl] / name
                d.mkdir()
                self.dirs[ctl] = d
            self._configure(memory_bytes=memory_bytes, pids=pids, cpuset=cpuset)
        except OSError as exc:
            self.remove()
            raise HarnessError(f"cannot set up the attempt's cgroups: {exc}") from exc
        except BaseException:
            self.remove()
            raise
        return self

    def _configure(self, *, memory_bytes: int, pids: int, cpuset: str | None) -> None:
        mem = self.dirs["memory"]
        _write(mem / "memory.limit_in_bytes", str(int(memory_bytes)))
        memsw = mem / "memory.memsw.limit_in_bytes"
        if memsw.exists():
            # No swapping around the cap: memory+swap gets the same limit.
            with contextlib.suppress(OSError):
                _write(memsw, str(int(memory_bytes)))
        _write(self.dirs["pids"] / "pids.max", str(int(pids)))
        cs = self.dirs["cpuset"]
        parent = cs.parent
        cpus = cpuset if cpuset is not None else _read(parent / "cpuset.cpus")
        try:
            _write(cs / "cpuset.cpus", cpus)
        except OSError as exc:
            raise HarnessError(
                f"cannot pin the attempt to CPUs {cpus!r} (host allows "
                f"{_read(parent / 'cpuset.cpus')!r}): {exc}; fix the cpuset limit"
            ) from exc
        _write(cs / "cpuset.mems", _read(parent / "cpuset.mems"))

    # -- membership -------------------------------------------------------------------
    def procs_files(self) -> list[str]:
        return [str(self.dirs[ctl] / "cgroup.procs") for ctl in CONTROLLERS]

    def pids(self) -> list[int]:
        try:
            text = (self.dirs["freezer"] / "cgroup.procs").read_text()
        except OSError:
            return []
        return [int(x) for x in text.split()]

    def empty(self) -> bool:
        return not self.pids()

    # -- killing ----------------------------------------------------------------------
    def signal_all(self, sig: int, exclude: set[int] | frozenset[int] = frozenset()) -> None:
        for pid in self.pids():
            if pid in exclude:
                continue
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)

    def freeze(self) -> None:
        """Stop every process of the attempt where it is (e.g. a writer over the disk cap)."""
        self._freeze("FROZEN")

    def _freeze(self, state: str, timeout: float = 0.3) -> None:
        knob = self.dirs["freezer"] / "freezer.state"
        with contextlib.suppress(OSError):
            _write(knob, state)
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            try:
                if _read(knob) == state:
                    return
            except OSError:
                return
            time.sleep(0.002)

    def kill_all(self, timeout: float = 1.5) -> bool:
        """Freeze, SIGKILL every member, thaw; repeat until empty. True if the cgroup is empty."""
        end = time.monotonic() + timeout
        while True:
            if self.empty():
                return True
            self._freeze("FROZEN")
            self.signal_all(signal.SIGKILL)
            self._freeze("THAWED")
            # Killed tasks leave the cgroup as they exit; give them a moment.
            settle = time.monotonic() + 0.05
            while time.monotonic() < settle and not self.empty():
                time.sleep(0.002)
            if time.monotonic() > end:
                return self.empty()

    # -- accounting -------------------------------------------------------------------
    def stats(self) -> CgroupStats:
        mem = self.dirs.get("memory")
        cpu = self.dirs.get("cpuacct")
        pids = self.dirs.get("pids")

        def num(path: Path | None, name: str) -> int | None:
            if path is None:
                return None
            try:
                return int(_read(path / name))
            except (OSError, ValueError):
                return None

        oom_kills = 0
        if mem is not None:
            with contextlib.suppress(OSError):
                for line in (mem / "memory.oom_control").read_text().splitlines():
                    key, _, value = line.partition(" ")
                    if key == "oom_kill":
                        oom_kills = int(value)
        pid_events = 0
        if pids is not None:
            with contextlib.suppress(OSError, ValueError):
                key, _, value = _read(pids / "pids.events").partition(" ")
                if key == "max":
                    pid_events = int(value)
        usage = num(cpu, "cpuacct.usage")
        return CgroupStats(
            cpu_seconds=usage / 1e9 if usage is not None else None,
            peak_memory_bytes=num(mem, "memory.max_usage_in_bytes"),
            oom_kills=oom_kills,
            memory_failcnt=num(mem, "memory.failcnt") or 0,
            memory_limit_bytes=num(mem, "memory.limit_in_bytes"),
            pids_max_events=pid_events,
        )

    # -- cleanup ----------------------------------------------------------------------
    def remove(self) -> list[str]:
        """Kill what is left, then remove every cgroup. Returns problems (empty if clean)."""
        problems: list[str] = []
        if self.dirs and not self.kill_all():
            problems.append("processes survived the final kill")
        for ctl, d in list(self.dirs.items()):
            for attempt in range(50):
                try:
                    d.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError as exc:
                    if exc.errno != errno.EBUSY or attempt == 49:
                        problems.append(f"cannot remove {d}: {exc}")
                        break
                    if ctl == "freezer":
                        self._freeze("THAWED")
                    self.kill_all(timeout=0.1)
                    time.sleep(0.01)
            self.dirs.pop(ctl, None)
        return problems
