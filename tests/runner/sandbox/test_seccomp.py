"""The seccomp policy (runner/sandbox/seccomp.py): the vendored profile, what we derive from it
for docker, the BPF program bwrap loads, and real programs running under that program.

The BPF program is checked by running it: a small interpreter of the classic-BPF subset
libseccomp emits (``run_filter``) evaluates it for any syscall number, architecture and
arguments without making the call, so dangerous calls and foreign ABIs can be asked about
safely. The adversarial suite (tests/adversarial/test_syscalls.py) makes the calls for real.
"""

from __future__ import annotations

import ctypes.util
import errno
import hashlib
import json
import shutil
import stat
import struct
import sys
from pathlib import Path

import pytest

from runner.errors import HarnessError
from runner.sandbox import Bind, BwrapSandbox, SandboxLimits, seccomp
from tests.support.sandbox_attempts import Attempt, require_bwrap

AUDIT_ARCH_X86_64 = 0xC000003E
AUDIT_ARCH_I386 = 0x40000003
AUDIT_ARCH_AARCH64 = 0xC00000B7
X32_BIT = 0x40000000
ALLOW = 0x7FFF0000
CLONE_NEWUSER = 0x10000000
SIGCHLD = 17


def ERRNO(e: int) -> int:  # named like the kernel's SECCOMP_RET_ERRNO
    return 0x00050000 | e


def run_filter(prog: bytes, nr: int, arch: int = AUDIT_ARCH_X86_64, args=(0,) * 6) -> int:
    """What the kernel would do with ``prog`` for this call: its SECCOMP_RET_* value."""
    args = [a & (2**64 - 1) for a in args] + [0] * (6 - len(args))
    data = struct.pack("<iIQ6Q", nr, arch, 0, *args)
    insns = [struct.unpack_from("<HBBI", prog, i) for i in range(0, len(prog), 8)]
    acc = index = 0
    mem = [0] * 16
    pc = 0
    for _ in range(len(insns) + 1):  # classic BPF only jumps forward
        code, jt, jf, k = insns[pc]
        pc += 1
        if code == 0x20:  # ld [k]
            acc = struct.unpack_from("<I", data, k)[0]
        elif code == 0x06:  # ret #k
            return k
        elif code == 0x16:  # ret a
            return acc
        elif code == 0x05:  # ja
            pc += k
        elif code & 0x07 == 0x05:  # jeq/jgt/jge/jset, #k or x
            src = index if code & 0x08 else k
            op = code & 0xF0
            taken = {0x10: acc == src, 0x20: acc > src, 0x30: acc >= src, 0x40: acc & src != 0}[op]
            pc += jt if taken else jf
        elif code == 0x54:  # and #k
            acc &= k
        elif code == 0x00:  # ld #k
            acc = k
        elif code == 0x60:  # ld M[k]
            acc = mem[k]
        elif code == 0x02:  # st M[k]
            mem[k] = acc
        elif code == 0x07:  # tax
            index = acc
        elif code == 0x87:  # txa
            acc = index
        else:
            raise AssertionError(f"BPF opcode {code:#x} at {pc - 1} is not simulated here")
    raise AssertionError("the program did not return")


def nr(name: str, arch: int = AUDIT_ARCH_X86_64) -> int:
    sc = seccomp.libseccomp()
    got = sc.resolve_syscall(arch, name)
    assert got >= 0, f"libseccomp does not know {name} on {arch:#x}"
    return got


@pytest.fixture(scope="module")
def bpf() -> bytes:
    return seccomp.bwrap_filter()


# -- the vendored profile -------------------------------------------------------------------


def test_vendored_profile_is_mobys_file_byte_for_byte():
    data = seccomp.DEFAULT_PROFILE.read_bytes()
    blob = hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()
    assert blob == seccomp.DEFAULT_PROFILE_BLOB, (
        f"{seccomp.DEFAULT_PROFILE} differs from {seccomp.DEFAULT_PROFILE_SOURCE}"
    )
    assert seccomp.DEFAULT_PROFILE_VERSION.split()[-1] in seccomp.DEFAULT_PROFILE_SOURCE
    profile = seccomp.load_default_profile()
    assert profile["defaultAction"] == "SCMP_ACT_ERRNO" and profile["defaultErrnoRet"] == 1


def test_a_missing_or_broken_base_profile_is_a_clear_error(tmp_path: Path):
    with pytest.raises(HarnessError, match=r"missing\.json is missing; restore it"):
        seccomp.load_default_profile(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(HarnessError, match=r"cannot read the seccomp base profile .*bad\.json"):
        seccomp.load_default_profile(bad)
    bad.write_text('{"defaultAction": "SCMP_ACT_ERRNO"}')
    with pytest.raises(HarnessError, match=r"bad\.json is not a Docker seccomp profile"):
        seccomp.load_default_profile(bad)


def test_every_denial_has_a_reason_and_is_a_real_syscall():
    assert len(set(seccomp.EXTRA_DENIED)) == len(seccomp.EXTRA_DENIED)
    for name in seccomp.EXTRA_DENIED:
        assert len(seccomp.DENIAL_REASONS[name]) > 40
        nr(name)  # known to libseccomp, so the bwrap filter really covers it


# -- the docker profile -----------------------------------------------------------------------


def allowed_names(profile: dict) -> set[str]:
    return {
        n
        for r in profile["syscalls"]
        if r["action"] == "SCMP_ACT_ALLOW"
        for n in r.get("names", [r.get("name")])
    }


def test_docker_profile_denies_our_list_and_keeps_everything_else():
    base = seccomp.load_default_profile()
    derived = seccomp.docker_profile()
    denied = set(seccomp.EXTRA_DENIED)
    assert not allowed_names(derived) & denied
    # The base really allowed some of them (without capabilities, on this kernel): the
    # derivation is not a no-op.
    assert {"ptrace", "process_vm_readv", "process_vm_writev"} <= allowed_names(base)
    assert allowed_names(derived) == allowed_names(base) - denied
    for name in ("read", "write", "clone", "execve", "mmap", "futex", "openat"):
        assert name in allowed_names(derived)
    ours = derived["syscalls"][-1]
    assert ours["names"] == list(seccomp.EXTRA_DENIED)
    assert (ours["action"], ours["errnoRet"]) == ("SCMP_ACT_ERRNO", errno.EPERM)
    # Rule for rule the base, conditions and all, minus our names (and rules left empty).
    kept = [r for r in base["syscalls"] if set(r["names"]) - denied]
    dropped = [r["names"] for r in base["syscalls"] if r not in kept]
    assert dropped == [
        ["process_vm_readv", "process_vm_writev", "ptrace"],  # allowed from kernel 4.8 on
        ["bpf"],  # with CAP_BPF
        ["perf_event_open"],  # with CAP_PERFMON
    ]
    for before, after in zip(kept, derived["syscalls"][:-1], strict=True):
        assert after["names"] == [n for n in before["names"] if n not in denied]
        assert {k: v for k, v in before.items() if k != "names"} == {
            k: v for k, v in after.items() if k != "names"
        }
    assert {k: v for k, v in derived.items() if k != "syscalls"} == {
        k: v for k, v in base.items() if k != "syscalls"
    }
    assert base == seccomp.load_default_profile(), "deriving must not change the base"


def test_docker_profile_file_is_readable_private_and_recreated(monkeypatch):
    path = seccomp.docker_profile_path()
    assert stat.S_IMODE(path.stat().st_mode) == 0o644
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert json.loads(path.read_text()) == seccomp.docker_profile()
    assert seccomp.docker_profile_path() == path  # written once
    shutil.rmtree(path.parent)
    again = seccomp.docker_profile_path()
    assert again.is_file() and json.loads(again.read_text()) == seccomp.docker_profile()


def test_effective_rules_read_includes_and_excludes_like_docker():
    profile = {
        "syscalls": [
            {"names": ["a"], "action": "SCMP_ACT_ALLOW"},
            {"names": ["b"], "action": "SCMP_ACT_ALLOW", "includes": {"caps": ["CAP_SYS_ADMIN"]}},
            {"names": ["c"], "action": "SCMP_ACT_ALLOW", "excludes": {"caps": ["CAP_SYS_ADMIN"]}},
            {"names": ["d"], "action": "SCMP_ACT_ALLOW", "includes": {"arches": ["arm64"]}},
            {"names": ["e"], "action": "SCMP_ACT_ALLOW", "includes": {"minKernel": "6.19"}},
            {"names": ["f"], "action": "SCMP_ACT_ALLOW", "excludes": {"minKernel": "4.8"}},
            {"name": "g", "action": "SCMP_ACT_ALLOW", "includes": {"minKernel": "4.8"}},
        ]
    }
    got = seccomp.effective_rules(profile, arch="amd64", caps=frozenset(), kernel=(6, 18))
    assert [r.names for r in got] == [("a",), ("c",), ("g",)]
    admin = seccomp.effective_rules(
        profile, arch="arm64", caps=frozenset({"CAP_SYS_ADMIN"}), kernel=(6, 19)
    )
    assert [r.names for r in admin] == [("a",), ("b",), ("d",), ("e",), ("g",)]
    assert seccomp.kernel_version("6.18.44-fc-v1045") == (6, 18)


# -- the bwrap filter -------------------------------------------------------------------------


def test_bpf_is_built_once_and_looks_like_a_program():
    bpf = seccomp.bwrap_filter()
    assert len(bpf) >= 8 * 100 and len(bpf) % 8 == 0
    assert seccomp.bwrap_filter() is bpf  # cached: the same object every attempt
    assert len(bpf) // 8 < 4096  # the kernel's BPF_MAXINSNS


def test_bpf_denies_our_list_with_eperm_on_x86_64(bpf: bytes):
    for name in seccomp.EXTRA_DENIED:
        assert run_filter(bpf, nr(name)) == ERRNO(errno.EPERM), name


def test_bpf_enforces_dockers_rules_and_conditions(bpf: bytes):
    for name in ("read", "write", "openat", "mmap", "futex", "execve", "exit_group", "wait4"):
        assert run_filter(bpf, nr(name)) == ALLOW, name
    for name in ("mount", "umount2", "pivot_root", "unshare", "setns", "kexec_load", "reboot"):
        assert run_filter(bpf, nr(name)) == ERRNO(errno.EPERM), name
    clone = nr("clone")
    assert run_filter(bpf, clone, args=(SIGCHLD,)) == ALLOW  # fork
    assert run_filter(bpf, clone, args=(0x3D0F00,)) == ALLOW  # pthread_create's flags
    assert run_filter(bpf, clone, args=(CLONE_NEWUSER | SIGCHLD,)) == ERRNO(errno.EPERM)
    assert run_filter(bpf, nr("clone3")) == ERRNO(errno.ENOSYS)  # glibc falls back to clone
    personality = nr("personality")
    for ok in (0, 8, 0x20000, 0x20008, 0xFFFFFFFF):
        assert run_filter(bpf, personality, args=(ok,)) == ALLOW, hex(ok)
    for odd in (0x0400000, 0x0040000, 0x100000000):  # READ_IMPLIES_EXEC, ADDR_NO_RANDOMIZE
        assert run_filter(bpf, personality, args=(odd,)) == ERRNO(errno.EPERM), hex(odd)
    assert run_filter(bpf, nr("socket"), args=(2,)) == ALLOW
    assert run_filter(bpf, nr("socket"), args=(40,)) == ERRNO(errno.EPERM)  # AF_VSOCK


def test_bpf_agrees_with_the_docker_profile_for_every_syscall(bpf: bytes):
    """Same policy on both backends: for every x86_64 syscall without argument conditions,
    allowed under bwrap exactly when the docker profile allows it to a container without
    capabilities."""
    rules = seccomp.effective_rules(
        seccomp.docker_profile(), arch="amd64", caps=frozenset(), kernel=seccomp.kernel_version()
    )
    conditional = {n for r in rules if r.args for n in r.names}
    unconditional = {
        n for r in rules if r.action == "SCMP_ACT_ALLOW" and not r.args for n in r.names
    }
    sc = seccomp.libseccomp()
    checked = 0
    for number in range(0, 457):
        try:
            name = sc.resolve_syscall(AUDIT_ARCH_X86_64, number).decode()
        except ValueError:  # a hole in the table
            assert run_filter(bpf, number) == ERRNO(errno.EPERM), number
            continue
        if name in conditional or name == "clone3":
            continue
        want = ALLOW if name in unconditional else ERRNO(errno.EPERM)
        assert run_filter(bpf, number) == want, name
        checked += 1
    assert checked > 300


def test_bpf_refuses_other_abis_and_answers_enosys_to_future_syscalls(bpf: bytes):
    for number in range(0, 460):  # every i386 syscall, getpid (20) and read (3) included
        assert run_filter(bpf, number, arch=AUDIT_ARCH_I386) == ERRNO(errno.ENOSYS), number
    for name in ("read", "getpid", "keyctl"):  # x32: the x86_64 arch with bit 30 set
        assert run_filter(bpf, nr(name) | X32_BIT) == ERRNO(errno.ENOSYS), name
    assert run_filter(bpf, nr("read"), arch=AUDIT_ARCH_AARCH64) == ERRNO(errno.ENOSYS)
    sc = seccomp.libseccomp()
    numbers = [
        sc.resolve_syscall(AUDIT_ARCH_X86_64, n) for n in allowed_names(seccomp.docker_profile())
    ]
    highest = max(numbers)
    assert highest == nr("futex_requeue")  # the newest syscall this libseccomp and profile share
    for number in range(highest + 1, seccomp.ENOSYS_CEILING):
        assert run_filter(bpf, number) == ERRNO(errno.ENOSYS), number
    assert run_filter(bpf, seccomp.ENOSYS_CEILING + 100) == ERRNO(errno.EPERM)


def test_missing_libseccomp_is_a_harness_error_naming_the_package(monkeypatch, tmp_path: Path):
    real = ctypes.util.find_library
    monkeypatch.setattr(
        ctypes.util, "find_library", lambda name: None if name == "seccomp" else real(name)
    )
    monkeypatch.delitem(sys.modules, "pyseccomp", raising=False)
    seccomp._bwrap_bpf.cache_clear()
    with pytest.raises(HarnessError, match=r"needs libseccomp .*apt-get install libseccomp2"):
        seccomp.bwrap_filter()
    # The bwrap backend reports it the same way, before any attempt: no filter, no backend.
    from runner.sandbox import bwrap_problem, get_sandbox

    assert "libseccomp2" in (bwrap_problem() or "")
    with pytest.raises(HarnessError, match="libseccomp2"):
        get_sandbox("bwrap")
    sb = BwrapSandbox()  # built anyway (e.g. by a caller that skipped the check): run refuses
    att = Attempt(tmp_path, sb)
    with pytest.raises(HarnessError, match="libseccomp2"):
        sb.run(att.request(["/usr/bin/true"], SandboxLimits(wall_seconds=10)))
    monkeypatch.setitem(sys.modules, "pyseccomp", None)  # the binding itself not installed
    with pytest.raises(HarnessError, match=r"needs the pyseccomp package .*uv sync"):
        seccomp.bwrap_filter()


# -- real programs under the filter -------------------------------------------------------------


def uv_binary() -> Path | None:
    """uv's real executable: pyenv's `uv` on PATH is a shell shim that needs pyenv around it."""
    found = shutil.which("uv")
    for candidate in (Path(sys.prefix) / "bin/uv", Path(sys.base_prefix) / "bin/uv", found):
        if candidate and Path(candidate).is_file():
            path = Path(candidate).resolve()
            if path.read_bytes()[:4] == b"\x7fELF":
                return path
    return None


def test_python_node_and_uv_work_under_the_filter(tmp_path: Path):
    """Runtimes probe io_uring, clone3 and friends at start-up: EPERM/ENOSYS must not break them."""
    require_bwrap()
    from runner.sandbox import get_sandbox

    sb = get_sandbox("bwrap")
    uv, node = uv_binary(), shutil.which("node")
    assert uv and node, f"this test needs uv ({uv}) and node ({node}) installed"
    uv_dir = uv.parent
    att = Attempt(tmp_path, sb)
    (att.workspace / "data.txt").write_text("hello from the workspace\n")
    py = (
        "import json, os, subprocess, sys, threading, asyncio\n"
        "status = dict(l.split(':\\t') for l in open('/proc/self/status').read().splitlines() if ':\\t' in l)\n"
        "t = threading.Thread(target=lambda: None); t.start(); t.join()\n"
        "sub = subprocess.run([sys.executable, '-c', 'print(6 * 7)'], capture_output=True, text=True).stdout.strip()\n"
        "async def main():\n"
        "    p = await asyncio.create_subprocess_exec('/usr/bin/true'); return await p.wait()\n"
        "print(json.dumps({'seccomp': status['Seccomp'], 'filters': status.get('Seccomp_filters'), 'sub': sub, 'async': asyncio.run(main())}))\n"
    )
    js = (
        "const fs = require('fs'); const cp = require('child_process');"
        "fs.promises.readFile('data.txt', 'utf8').then(t => {"
        " const kid = cp.spawnSync(process.execPath, ['-e', 'console.log(1+1)']);"
        " console.log(JSON.stringify({read: t.trim(), child: kid.stdout.toString().trim()}));"
        "});"
    )
    script = (
        f'set -e\n{att.paths.python} -c "$PY"\n{node} --version\n{node} -e "$JS"\n'
        "/opt/uv-bin/uv --version\n"
    )
    req = att.request(
        ["/bin/sh", "-c", script],
        SandboxLimits(wall_seconds=60),
        env={"PY": py, "JS": js},
        binds=(Bind(uv_dir, "/opt/uv-bin"),),
    )
    res = sb.run(req)
    out = (att.logs / "stdout.log").read_text().splitlines()
    err = (att.logs / "stderr.log").read_text()
    assert res.exit_code == 0, (out, err)
    info = json.loads(out[0])
    assert info["seccomp"] == "2" and info["filters"] == "1", "the filter is not loaded"
    assert (info["sub"], info["async"]) == ("42", 0)
    assert out[1].startswith("v")  # node --version
    assert json.loads(out[2]) == {"read": "hello from the workspace", "child": "2"}
    assert out[3].startswith("uv ")
