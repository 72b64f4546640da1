"""Tries to leave the sandbox's namespaces or gain privileges; reports what each try got.

argv: workspace, --harness-pid PID (the harness's pid on the host), --marker. Also
reports the command line of every process it can see (host paths must not show up).
"""

import argparse
import ctypes
import os
import resource

from _report import emit, outcome

p = argparse.ArgumentParser()
p.add_argument("workspace")
p.add_argument("--harness-pid", type=int)
p.add_argument("--marker")
a = p.parse_args()
libc = ctypes.CDLL(None, use_errno=True)
tries: dict = {}
report: dict = {"tries": tries, "uid": os.getuid(), "pid": os.getpid()}


def c(fn, *args) -> None:
    if fn(*args) == -1:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


CLONE = {"user": 0x10000000, "mount": 0x00020000, "net": 0x40000000, "pid": 0x20000000}
for ns, flag in CLONE.items():
    tries[f"unshare_{ns}"] = outcome(lambda f=flag: c(libc.unshare, f))
tries["setuid_0"] = outcome(lambda: os.setuid(0))
tries["mount_tmpfs"] = outcome(lambda: c(libc.mount, b"none", b"/tmp", b"tmpfs", 0, None))
tries["remount_root_rw"] = outcome(lambda: c(libc.mount, None, b"/", None, 0x20 | 0x1000, None))
tries["chroot"] = outcome(lambda: os.chroot("/tmp"))
tries["sethostname"] = outcome(lambda: c(libc.sethostname, b"pwned", 5))


class FileHandle(ctypes.Structure):
    _fields_ = [
        ("handle_bytes", ctypes.c_uint),
        ("handle_type", ctypes.c_int),
        ("f_handle", ctypes.c_ubyte * 128),
    ]


def shocker() -> None:
    """open_by_handle_at: with a handle one can open any inode of the host filesystem."""
    fh = FileHandle(handle_bytes=128)
    mount_id = ctypes.c_int()
    c(
        libc.name_to_handle_at,
        -100,
        a.workspace.encode(),
        ctypes.byref(fh),
        ctypes.byref(mount_id),
        0,
    )
    fd = os.open(a.workspace, os.O_RDONLY)
    c(libc.open_by_handle_at, fd, ctypes.byref(fh), os.O_RDONLY)


tries["open_by_handle_at"] = outcome(shocker)
tries["signal_harness"] = outcome(lambda: os.kill(a.harness_pid, 0))
tries["raise_fsize_limit"] = outcome(
    lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY,) * 2)
)


def write(path: str, data: bytes) -> None:
    """Unbuffered, so the error (if any) comes from this write, not a later flush."""
    fd = os.open(path, os.O_WRONLY)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


tries["oom_score_adj_-1000"] = outcome(lambda: write("/proc/self/oom_score_adj", b"-1000"))
tries["nice_-20"] = outcome(lambda: os.setpriority(os.PRIO_PROCESS, 0, -20))
tries["sysrq_trigger"] = outcome(lambda: write("/proc/sysrq-trigger", b"h"))


# Host-wide sysctls: kernel.core_pattern and kernel.modprobe name programs the host kernel
# runs as root. Their current value is written back, so a hole shows without harm.
def rewrite(name: str) -> None:
    path = f"/proc/sys/{name}"
    current: list[bytes] = []

    def read_current() -> None:
        with open(path, "rb") as f:
            current.append(f.read())

    report.setdefault("sysctl_read", {})[name] = outcome(read_current)
    tries[f"sysctl:{name}"] = outcome(lambda: write(path, current[0] if current else b"0\n"))


for name in ("kernel/core_pattern", "kernel/modprobe", "vm/overcommit_memory", "kernel/pid_max"):
    rewrite(name)
try:  # an empty mount point (docker's, masked by the harness) shows nothing
    tries["cgroupfs_visible"] = "ok" if os.listdir("/sys/fs/cgroup") else "empty"
except OSError as exc:
    tries["cgroupfs_visible"] = type(exc).__name__

cmdlines = {}
for pid in (d for d in os.listdir("/proc") if d.isdigit()):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmdlines[pid] = f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        continue
report["cmdlines"] = cmdlines
report["visible_pids"] = sorted(int(d) for d in os.listdir("/proc") if d.isdigit())
emit(report)
