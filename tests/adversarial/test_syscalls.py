"""System calls the sandboxes deny: every way an agent tries them is refused, nothing else breaks.

The agent (agents/syscalls.py) tries each call of ``EXTRA_DENIED`` through glibc's
``syscall()``, glibc's or libkeyutils' own wrapper, the bare ``syscall`` instruction, the x32
bit and the i386 entry point (``int 0x80``), then the calls Docker's own profile denies.
Without the filter most of those tries succeed under bwrap (io_uring, keyrings,
userfaultfd, ptrace including an attach to the sandbox's pid 1, perf_event_open, ...).
"""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from runner.attempts.attempt import run_attempt
from runner.sandbox import seccomp
from runner.specs.registry import agent_code_dir, load_agent
from tests.support.adversarial_arena import Arena

pytestmark = [pytest.mark.sandbox, pytest.mark.timeout(180)]

REFUSED = {"EPERM", "ENOSYS"}
# What the agent calls by number, besides EXTRA_DENIED: Docker's own denials and the benign.
X86_64_NAMES = [
    "getpid",
    "pidfd_open",
    "personality",
    "mount",
    "umount2",
    "pivot_root",
    "kexec_load",
    "kexec_file_load",
    "init_module",
    "finit_module",
    "delete_module",
    "reboot",
    "swapon",
    "swapoff",
    "acct",
    "settimeofday",
    "clock_settime",
    "unshare",
    "setns",
    "clone",
    "clone3",
    "open_by_handle_at",
    "lookup_dcookie",
    "quotactl",
    "iopl",
    "ioperm",
    "syslog",
    "uselib",
]
I386_NAMES = ("getpid", "vm86")


def syscall_numbers() -> str:
    """The agent's plan: what to try and every number it needs, from libseccomp's tables."""
    sc = seccomp.libseccomp()

    def table(arch: int, names) -> dict[str, int]:
        numbers = {n: sc.resolve_syscall(arch, n) for n in names}
        assert all(v >= 0 for v in numbers.values()), numbers
        return numbers

    denied = list(seccomp.EXTRA_DENIED)
    return json.dumps(
        {
            "denied": denied,
            "x86_64": table(sc.Arch.X86_64, [*denied, *X86_64_NAMES]),
            "i386": table(sc.Arch.X86, [*denied, *I386_NAMES]),
        }
    )


def host_keys() -> str:
    return Path("/proc/keys").read_text()


def test_denied_syscalls_are_refused_every_way_and_a_benign_attempt_still_succeeds(arena: Arena):
    benign = load_agent(arena.paths.agents_dir, "baseline-constant")
    benign_ctx = arena.context(agent_code_dir=agent_code_dir(arena.paths.agents_dir, benign))
    with ThreadPoolExecutor(2) as pool:
        attack = pool.submit(arena.run, "syscalls.py", "--numbers", syscall_numbers(), budget=60)
        good = pool.submit(run_attempt, arena.plan(benign, 60), benign_ctx).result()
        out = attack.result()
    report = out.report()

    # The attempt is the agent's: it ran, submitted and scored, whatever it tried on the way.
    assert out.record.status == "success", (out.record.error_message, out.log("stderr.log"))
    assert out.record.score == pytest.approx(0.5)
    assert good.status == "success", (good.error_message, good.validation_message)

    assert report["machine"] == "x86_64"
    assert list(report["denied"]) == list(seccomp.EXTRA_DENIED)
    for name, ways in report["denied"].items():
        # The x86_64 ways all get the documented EPERM; the x32 bit and the i386 entry
        # point are refused too (ENOSYS where the filter refuses the whole ABI).
        assert ways["libc"] == ways["raw"] == "EPERM", (name, ways)
        assert ways["i386"] in REFUSED and ways["x32"] in REFUSED, (name, ways)
        for way, got in ways.items():
            assert got in REFUSED or (way == "wrapper" and got == "absent"), (name, way, got)
    assert report["denied"]["ptrace"]["attach"] == "EPERM"
    assert report["denied"]["ptrace"]["seize_pid1"] == "EPERM"
    assert report["denied"]["keyctl"]["wrapper"] in REFUSED | {"absent"}

    docker_denied = report["docker_denied"]
    refused = {k: v for k, v in docker_denied.items() if v in REFUSED}
    assert refused == docker_denied, f"got through: {set(docker_denied) - set(refused)}"
    assert docker_denied["clone3_newuser"] == "ENOSYS"  # so glibc falls back to clone
    assert docker_denied["personality_read_implies_exec"] == "EPERM"  # the kernel allows it
    assert report["routes"]["/dev/userfaultfd"] != "ok"

    # Probing programs keep working: ordinary calls succeed, unknown ones say ENOSYS.
    assert report["benign"] == dict.fromkeys(report["benign"], "ok")
    assert len(report["benign"]) >= 10
    assert report["abi"]["x86_64_future_511"] == "ENOSYS"
    # The i386 ABI: bwrap refuses all of it; docker applies the same names to it.
    assert report["abi"]["i386_getpid"] in ("ok", "ENOSYS")

    # The key the agent tried to add to its session keyring landed nowhere on the host.
    assert arena.marker not in host_keys()
    arena.assert_host_unchanged()
