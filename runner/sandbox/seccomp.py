"""Which system calls a sandboxed agent may make: Docker's default profile plus our denials.

Namespaces and dropped capabilities decide what an agent can *reach*; a seccomp filter
decides which kernel entry points it can *use*. Agents run arbitrary code, so both isolating
backends enforce one policy:

* **The base** is Docker's default profile, vendored unchanged from moby v28.2.2
  (``image/seccomp-default.json``; see ``DEFAULT_PROFILE_*`` for its origin). It is an
  allow-list: anything not listed fails with EPERM, which covers mount/umount2,
  pivot_root, kexec_*, the module calls, reboot, swapon/swapoff, acct, the clock setters,
  unshare/setns and namespace flags to clone, open_by_handle_at, lookup_dcookie,
  quotactl, iopl/ioperm, syslog, uselib, vm86 and odd personality() flags. clone3 gets
  ENOSYS (its flags live in memory a filter cannot read), so glibc falls back to clone,
  whose flags it can.
* **Our denials** (:data:`EXTRA_DENIED`, the one home of that list, each with its reason)
  are taken out of every rule of that profile, whatever the capabilities or kernel. Denied
  calls fail with EPERM, never a kill: EPERM is what each of them already returns when the
  kernel's own switch is off (kernel.io_uring_disabled, vm.unprivileged_userfaultfd,
  kernel.perf_event_paranoid, kernel.unprivileged_bpf_disabled, Yama for ptrace), so the
  programs that probe them (Python, node/libuv, uv) take their fallback and keep working.

Enforced by:

* **docker**: ``--security-opt seccomp=<file>`` with :func:`docker_profile`, the vendored
  profile with our denials removed from every rule plus an explicit EPERM rule for them.
  Passing a whole profile also makes the policy independent of the engine's built-in
  default (Debian's engine 20.10 still allows io_uring and ptrace).
* **bwrap**: :func:`bwrap_filter` interprets the same profile the way Docker's daemon does
  (no capabilities: the sandbox drops them all; this kernel; this architecture),
  compiles it with libseccomp (through the ``pyseccomp`` ctypes binding, which follows the
  official Python API) and exports BPF that bubblewrap loads with ``--seccomp FD``. Two
  choices differ from a Docker container, both safer, neither visible to a 64-bit program:

  - only the native ABI is allowed: a syscall through the 32-bit entry points (``int 0x80``
    on x86_64) or x32 fails with ENOSYS without running. Nothing in a 64-bit sandbox needs
    them, and compat entry points are how filters that forget them get bypassed;
  - as runc does, syscall numbers above the highest one the profile names (all newer than
    this libseccomp knows) fail with ENOSYS rather than EPERM, so a program probing a
    newer syscall falls back as it would on an older kernel.
"""

from __future__ import annotations

import atexit
import contextlib
import copy
import errno
import functools
import importlib
import json
import os
import re
import shutil
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from runner.errors import HarnessError

DEFAULT_PROFILE = Path(__file__).parent / "image" / "seccomp-default.json"
# Where the vendored file comes from (Apache-2.0, like moby itself); the git blob id lets a
# test prove the file is still byte for byte what that tag ships.
DEFAULT_PROFILE_SOURCE = "https://github.com/moby/moby/blob/v28.2.2/profiles/seccomp/default.json"
DEFAULT_PROFILE_VERSION = "moby v28.2.2"
DEFAULT_PROFILE_LICENSE = "Apache-2.0 (moby/moby LICENSE)"
DEFAULT_PROFILE_BLOB = "dafe5cf6a6a3e7f4766037ed0366631b06968160"

LIBSECCOMP_HINT = (
    "install libseccomp (Debian/Ubuntu: `apt-get install libseccomp2`) and the project's "
    "Python dependencies (`uv sync`, which brings the pyseccomp binding)"
)

# The calls denied on top of Docker's profile, each group with why an agent is better off
# without it. Everything that lists or tries them iterates this (order included).
_DENIALS: dict[tuple[str, ...], str] = {
    ("io_uring_setup", "io_uring_enter", "io_uring_register"): (
        "io_uring is a second way into most of the kernel with a long record of privilege "
        "escalations; Docker (since 25.0), Android and ChromeOS turned it off"
    ),
    ("add_key", "keyctl", "request_key"): (
        "kernel keyrings are not namespaced: keys are charged to the kernel-wide uid (under a "
        "root harness bwrap's sandbox uid is host uid 0: root's quota of a million keys and "
        "25 MB of kernel memory), and bubblewrap passes on the harness's session keyring"
    ),
    ("userfaultfd",): (
        "lets a program stall the kernel inside a page fault at will, the standard way to "
        "win kernel races; no data-science program needs it"
    ),
    ("ptrace", "process_vm_readv", "process_vm_writev", "pidfd_getfd"): (
        "reading or writing another process's memory or taking its descriptors (without "
        "the filter an agent attaches to the sandbox's pid 1: bubblewrap's init, or "
        "docker-init); process_vm_* and pidfd_getfd are ptrace by other means, and "
        "debuggers and profilers are not what an agent is run for"
    ),
    ("perf_event_open", "bpf"): (
        "large kernel attack surfaces Docker allows only with CAP_PERFMON/CAP_BPF; listed so "
        "no base profile and no host sysctl can reopen them"
    ),
}
EXTRA_DENIED: tuple[str, ...] = tuple(name for names in _DENIALS for name in names)
DENIAL_REASONS: dict[str, str] = {name: why for names, why in _DENIALS.items() for name in names}
DENIED_ERRNO = errno.EPERM

# The bwrap filter answers ENOSYS for numbers above the profile's highest, up to this one
# (x86_64's own syscalls are numbered below 512; 512-547 are x32's legacy entries).
ENOSYS_CEILING = 512

# libseccomp's native architecture (its SCMP_ARCH_* / AUDIT_ARCH_* token) -> the name a
# Docker profile's includes/excludes use for it (moby profiles/seccomp: goToNative).
_DOCKER_ARCH_NAMES = {
    0xC000003E: "amd64",
    0xC00000B7: "arm64",
    0x40000003: "x86",
    0x40000028: "arm",
    0xC00000F3: "riscv64",
    0xC0000015: "ppc64le",
    0x80000016: "s390x",
}
_CMP_OPS = {
    "SCMP_CMP_NE": "NE",
    "SCMP_CMP_LT": "LT",
    "SCMP_CMP_LE": "LE",
    "SCMP_CMP_EQ": "EQ",
    "SCMP_CMP_GE": "GE",
    "SCMP_CMP_GT": "GT",
    "SCMP_CMP_MASKED_EQ": "MASKED_EQ",
}


# -- the vendored profile and its derivation ------------------------------------------------


def load_default_profile(path: Path = DEFAULT_PROFILE) -> dict[str, Any]:
    """The vendored Docker default profile; HarnessError naming the file if it is unusable."""
    try:
        profile = json.loads(path.read_text())
    except FileNotFoundError as exc:
        raise HarnessError(
            f"the seccomp base profile {path} is missing; restore it from the repository "
            f"({DEFAULT_PROFILE_SOURCE})"
        ) from exc
    except (OSError, ValueError) as exc:
        raise HarnessError(f"cannot read the seccomp base profile {path}: {exc}") from exc
    if not isinstance(profile, dict) or not isinstance(profile.get("syscalls"), list):
        raise HarnessError(f"{path} is not a Docker seccomp profile (no 'syscalls' list)")
    return profile


def _rule_names(rule: dict[str, Any]) -> list[str]:
    """A rule's syscall names: Docker accepts ``names`` or the older single ``name``."""
    return list(rule.get("names") or ([rule["name"]] if rule.get("name") else []))


def derive_profile(base: dict[str, Any]) -> dict[str, Any]:
    """``base`` with :data:`EXTRA_DENIED` out of every rule and an explicit EPERM rule for them."""
    denied = set(EXTRA_DENIED)
    profile = copy.deepcopy(base)
    rules = []
    for rule in profile["syscalls"]:
        names = [n for n in _rule_names(rule) if n not in denied]
        if names:
            rule.pop("name", None)
            rule["names"] = names
            rules.append(rule)
    rules.append(
        {
            "names": list(EXTRA_DENIED),
            "action": "SCMP_ACT_ERRNO",
            "errnoRet": DENIED_ERRNO,
            "comment": "tmlbench: denied to agents (runner/sandbox/seccomp.py EXTRA_DENIED)",
        }
    )
    profile["syscalls"] = rules
    return profile


@functools.cache
def docker_profile() -> dict[str, Any]:
    """The profile the docker backend runs every container with (built once per process)."""
    return derive_profile(load_default_profile())


_profile_lock = threading.Lock()
_profile_file: Path | None = None


def docker_profile_path() -> Path:
    """:func:`docker_profile` as a 0644 file in a private directory, written once per process.

    The docker CLI reads it on the harness's side and sends its content to the engine, so
    the file only has to outlive the ``docker create``; it is recreated if something (a /tmp
    cleaner) removed it.
    """
    global _profile_file
    with _profile_lock:
        if _profile_file is None or not _profile_file.is_file():
            folder = Path(tempfile.mkdtemp(prefix="tmlbench-seccomp-"))
            path = folder / "docker-seccomp.json"
            path.write_text(json.dumps(docker_profile(), indent=1) + "\n")
            path.chmod(0o644)
            atexit.register(shutil.rmtree, folder, True)
            _profile_file = path
        return _profile_file


# -- the profile as the Docker daemon reads it (moby profiles/seccomp setupSeccomp) ----------


@dataclass(frozen=True)
class Rule:
    """One rule of a profile that applies here: its names, action and argument conditions."""

    names: tuple[str, ...]
    action: str
    errno_ret: int | None
    args: tuple[dict[str, Any], ...]


def _kernel_at_least(minimum: str, kernel: tuple[int, int]) -> bool:
    major, _, minor = minimum.partition(".")
    return kernel >= (int(major), int(minor or 0))


def kernel_version(release: str | None = None) -> tuple[int, int]:
    """(major, minor) of ``release`` (default: this kernel), e.g. '6.18.44-fc' -> (6, 18)."""
    found = re.match(r"(\d+)\.(\d+)", release or os.uname().release)
    if not found:
        raise HarnessError(f"cannot read the kernel version from {release!r}")
    return int(found.group(1)), int(found.group(2))


def effective_rules(
    profile: dict[str, Any], *, arch: str, caps: frozenset[str], kernel: tuple[int, int]
) -> list[Rule]:
    """The rules Docker's daemon keeps for a container with ``caps`` on ``arch``/``kernel``.

    Same reading as moby's ``setupSeccomp``: a rule is dropped when an ``excludes`` matches
    (the arch, any of the caps, a kernel at least that new) or an ``includes`` does not (the
    arch, all of the caps, a kernel at least that new).
    """
    kept = []
    for rule in profile["syscalls"]:
        ex, inc = rule.get("excludes") or {}, rule.get("includes") or {}
        if arch in (ex.get("arches") or []) or caps & set(ex.get("caps") or []):
            continue
        if ex.get("minKernel") and _kernel_at_least(ex["minKernel"], kernel):
            continue
        if inc.get("arches") and arch not in inc["arches"]:
            continue
        if not set(inc.get("caps") or []) <= caps:
            continue
        if inc.get("minKernel") and not _kernel_at_least(inc["minKernel"], kernel):
            continue
        kept.append(
            Rule(
                names=tuple(_rule_names(rule)),
                action=rule.get("action", ""),
                errno_ret=rule.get("errnoRet"),
                args=tuple(rule.get("args") or ()),
            )
        )
    return kept


# -- the bwrap filter: libseccomp -------------------------------------------------------------


def libseccomp() -> ModuleType:
    """The pyseccomp binding with libseccomp loaded; HarnessError saying what to install."""
    try:
        # Imported by name: the binding ships no types, and callers use it as a module.
        pyseccomp = importlib.import_module("pyseccomp")
    except ModuleNotFoundError as exc:
        raise HarnessError(
            f"the bwrap sandbox's seccomp filter needs the pyseccomp package ({exc}); "
            f"{LIBSECCOMP_HINT}"
        ) from exc
    except (RuntimeError, OSError, AttributeError) as exc:
        # pyseccomp raises RuntimeError when ctypes finds no libseccomp, OSError when it
        # cannot load it, AttributeError when the library lacks a function it binds.
        raise HarnessError(
            f"the bwrap sandbox's seccomp filter needs libseccomp ({exc}); {LIBSECCOMP_HINT}"
        ) from exc
    return pyseccomp


def _action(sc: ModuleType, name: str, errno_ret: int | None, where: str) -> int:
    if name == "SCMP_ACT_ALLOW":
        return int(sc.ALLOW)
    if name == "SCMP_ACT_ERRNO":
        return int(sc.ERRNO(errno.EPERM if errno_ret is None else int(errno_ret)))
    raise HarnessError(f"{where}: seccomp action {name!r} is not supported for the bwrap filter")


def _arg(sc: ModuleType, cond: dict[str, Any], where: str) -> Any:
    op = _CMP_OPS.get(cond.get("op", ""))
    if op is None:
        raise HarnessError(f"{where}: unknown argument comparison {cond.get('op')!r}")
    value, value_two = int(cond.get("value", 0)), int(cond.get("valueTwo", 0))
    if op == "MASKED_EQ":  # Docker: value is the mask, valueTwo what the masked bits must be
        return sc.Arg(int(cond["index"]), sc.MASKED_EQ, value, value_two)
    return sc.Arg(int(cond["index"]), getattr(sc, op), value)


def build_filter(
    profile: dict[str, Any], *, kernel: tuple[int, int] | None = None, where: str = "profile"
) -> Any:
    """A libseccomp filter (``pyseccomp.SyscallFilter``) enforcing ``profile`` on this ABI."""
    sc = libseccomp()
    native = sc.system_arch()
    arch = _DOCKER_ARCH_NAMES.get(native)
    if arch is None:
        raise HarnessError(
            f"no seccomp policy for this architecture (libseccomp token {native:#x})"
        )
    if profile.get("defaultAction") != "SCMP_ACT_ERRNO":
        raise HarnessError(f"{where}: the bwrap filter needs an allow-list (defaultAction ERRNO)")
    default = _action(sc, "SCMP_ACT_ERRNO", profile.get("defaultErrnoRet"), where)
    filt = sc.SyscallFilter(default)
    # The 32-bit and x32 ABIs (any architecture but the native one) never reach a rule.
    filt.set_attr(sc.Attr.ACT_BADARCH, sc.ERRNO(errno.ENOSYS))
    # A binary tree of syscall numbers instead of a linear scan (libseccomp >= 2.5).
    with contextlib.suppress(OSError):
        filt.set_attr(sc.Attr.CTL_OPTIMIZE, 2)
    rules = effective_rules(profile, arch=arch, caps=frozenset(), kernel=kernel or kernel_version())
    highest = -1
    for i, rule in enumerate(rules):
        here = f"{where}: rule {i} ({', '.join(rule.names[:3])})"
        action = _action(sc, rule.action, rule.errno_ret, here)
        args = [_arg(sc, cond, here) for cond in rule.args]
        for name in rule.names:
            nr = sc.resolve_syscall(sc.Arch.NATIVE, name)
            if nr < 0:  # not a syscall of this ABI, or newer than this libseccomp (runc skips too)
                continue
            highest = max(highest, nr)
            if action == default:  # libseccomp refuses rules that repeat the default action
                continue
            try:
                filt.add_rule(action, nr, *args)
            except OSError as exc:
                raise HarnessError(
                    f"{here}: libseccomp refused the rule for {name}: {exc}"
                ) from exc
    for nr in range(highest + 1, ENOSYS_CEILING):
        filt.add_rule(sc.ERRNO(errno.ENOSYS), nr)
    return filt


def export_bpf(filt: Any) -> bytes:
    """The compiled BPF program of a libseccomp filter (what ``bwrap --seccomp FD`` reads)."""
    fd = os.memfd_create("tmlbench-seccomp-export", os.MFD_CLOEXEC)
    try:

        class _File:  # pyseccomp's export_bpf wants an object with fileno()
            def fileno(self) -> int:
                return fd

        filt.export_bpf(_File())
        size = os.lseek(fd, 0, os.SEEK_END)
        return os.pread(fd, size, 0)
    finally:
        os.close(fd)


_bpf_lock = threading.Lock()


@functools.cache
def _bwrap_bpf() -> bytes:
    # The very profile the docker backend hands its engine: one policy, two enforcers.
    bpf = export_bpf(build_filter(docker_profile(), where=str(DEFAULT_PROFILE)))
    if not bpf or len(bpf) % 8:
        raise HarnessError(f"libseccomp exported an unusable filter ({len(bpf)} bytes)")
    return bpf


def bwrap_filter() -> bytes:
    """The BPF program every bwrap attempt loads; built once per process (the same each time)."""
    with _bpf_lock:
        return _bwrap_bpf()
