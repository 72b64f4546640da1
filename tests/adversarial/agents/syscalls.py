"""Tries every system call the sandboxes deny, several ways each; reports what each try got.

argv: workspace, --numbers JSON ({"denied": [names to try], "x86_64": {name: nr},
"i386": {name: nr}}: what the harness denies and the syscall numbers per ABI, which the
test looks up in libseccomp), --marker M.

Each try reports "ok" or the errno's name ("EPERM", "ENOSYS", ...). The ways, for every
call the harness denies on top of Docker's profile (report["denied"]):

- ``libc``: glibc's ``syscall()`` with the x86_64 number;
- ``wrapper``: glibc's (or libkeyutils') own function, where there is one;
- ``raw``: the ``syscall`` instruction from a code page of our own, no libc at all;
- ``i386``: ``int 0x80`` from that code page, the 32-bit entry point a filter must not forget
  (in a child process: a kernel without IA32 emulation answers with SIGSEGV);
- ``x32``: the ``syscall`` instruction with the x32 bit (0x40000000) set.

Every try uses arguments that would succeed, or fail with some other errno, if the call got
through (e.g. io_uring_setup with a real params struct, add_key into the session keyring
the sandbox inherited), so only a refusal reads as EPERM/ENOSYS. report["docker_denied"]
tries what Docker's own profile denies (mostly refused by the kernel too: no
capabilities); report["benign"] is what every program does and must keep working; then the
agent submits the sample submission, so its attempt is a success.
"""

import argparse
import ctypes
import errno
import json
import mmap
import os
import platform
import socket
import struct
import subprocess
import sys
import threading

from _report import emit, submit_sample

p = argparse.ArgumentParser()
p.add_argument("workspace")
p.add_argument("--numbers", required=True)
p.add_argument("--marker", default="tmlbench-adversarial")
a = p.parse_args()
NR = json.loads(a.numbers)
X32_BIT = 0x40000000
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
report: dict = {"machine": platform.machine(), "denied": {}, "docker_denied": {}, "benign": {}}


def name_of(err: int) -> str:
    return errno.errorcode.get(err, str(err))


def checked(result: int) -> int:
    """A libc-style result: -1 means look at errno."""
    if result == -1:
        raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
    return result


def kernel_style(result: int) -> int:
    """A raw syscall result: -4095..-1 is -errno."""
    if -4096 < result < 0:
        raise OSError(-result, os.strerror(-result))
    return result


def attempt(action) -> str:
    """'ok' if ``action()`` returned, else the errno's name (or the exception's class)."""
    try:
        action()
    except OSError as exc:
        return name_of(exc.errno) if exc.errno else type(exc).__name__
    except Exception as exc:
        return type(exc).__name__
    return "ok"


def in_child(action) -> str:
    """``attempt(action)`` in a forked child: a crash or a stuck trace cannot take us along."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.write(w, attempt(action).encode())
        finally:
            os._exit(0)
    os.close(w)
    with os.fdopen(r, "rb") as f:
        got = f.read().decode()
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):
        return f"signal:{os.WTERMSIG(status)}"
    return got or "no answer"


def libc_syscall(nr: int, *args: int) -> int:
    return checked(libc.syscall(ctypes.c_long(nr), *(ctypes.c_long(x) for x in args)))


# -- code pages: the syscall instruction and int 0x80 without libc ---------------------------
CODE = mmap.mmap(-1, mmap.PAGESIZE, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
CODE_ADDR = ctypes.addressof(ctypes.c_char.from_buffer(CODE))
X86 = platform.machine() == "x86_64"


def run_code(code: bytes, restype):
    CODE.seek(0)
    CODE.write(code)
    return ctypes.CFUNCTYPE(restype)(CODE_ADDR)()


def raw64(nr: int, *args: int) -> int:
    """mov rax/rdi/rsi/rdx/r10/r8/r9, imm64; syscall; ret."""
    regs = (b"\x48\xbf", b"\x48\xbe", b"\x48\xba", b"\x49\xba", b"\x49\xb8", b"\x49\xb9")
    code = b"\x48\xb8" + struct.pack("<q", nr)
    for reg, value in zip(regs, args, strict=False):
        code += reg + struct.pack("<Q", value & (2**64 - 1))
    return kernel_style(run_code(code + b"\x0f\x05\xc3", ctypes.c_long))


def int80(nr: int, *args: int) -> int:
    """push rbx, rbp; mov eax/ebx/ecx/edx/esi/edi/ebp, imm32; int 0x80; pop; ret."""
    regs = (b"\xbb", b"\xb9", b"\xba", b"\xbe", b"\xbf", b"\xbd")
    code = b"\x53\x55\xb8" + struct.pack("<I", nr & 0xFFFFFFFF)
    for reg, value in zip(regs, args, strict=False):
        code += reg + struct.pack("<I", value & 0xFFFFFFFF)
    return kernel_style(run_code(code + b"\xcd\x80\x5d\x5b\xc3", ctypes.c_int))


KEEP: list = []  # buffers whose addresses were handed out
KEY_SPEC_SESSION_KEYRING = -3  # the session keyring the sandbox was started with


def buf(data: bytes | int) -> int:
    """The address of a buffer (``data``, or that many zero bytes) that stays alive."""
    b = ctypes.create_string_buffer(data)
    KEEP.append(b)
    return ctypes.addressof(b)


# -- what each denied call is tried with ----------------------------------------------------
ring_params = buf(120)  # struct io_uring_params
probe = buf(16 + 256 * 8)  # struct io_uring_probe
iov_src = buf(b"tmlbench")
iov_dst = buf(8)
local_iov = buf(struct.pack("<QQ", iov_dst, 8))
remote_iov = buf(struct.pack("<QQ", iov_src, 8))
perf_attr = bytearray(128)
struct.pack_into("<IIQ", perf_attr, 0, 1, 128, 0)  # PERF_TYPE_SOFTWARE, size, CPU_CLOCK
struct.pack_into("<Q", perf_attr, 40, 1 | 1 << 5 | 1 << 6)  # disabled, exclude kernel/hv
perf_attr_p = buf(bytes(perf_attr))
bpf_attr = buf(struct.pack("<IIII", 2, 4, 4, 1) + bytes(112))  # BPF_MAP_TYPE_ARRAY, 4, 4, 1
key_desc = f"adversarial-pwned-{a.marker}".encode()
ring_fd = [-1]


def pidfd_self() -> int:
    return libc_syscall(NR["x86_64"]["pidfd_open"], os.getpid(), 0)


def sleeper() -> int:
    pid = os.fork()
    if pid == 0:
        try:
            os.kill(os.getpid(), 19)  # SIGSTOP: wait to be traced or killed
        finally:
            os._exit(0)
    return pid


def attach_own_child(call) -> None:
    pid = sleeper()
    try:
        call(16, pid, 0, 0)  # PTRACE_ATTACH
    finally:
        os.kill(pid, 9)
        os.waitpid(pid, 0)


# name -> args for the x86_64 ways (libc, raw, x32), args for i386 (32-bit values only:
# NULL pointers make a call that got through fail with EFAULT, never with EPERM).
DENIED = {
    "io_uring_setup": ((4, ring_params), (1, 0)),
    "io_uring_enter": (lambda: (ring_fd[0], 0, 0, 0, 0, 0), (2**32 - 1, 0, 0, 0, 0, 0)),
    "io_uring_register": (lambda: (ring_fd[0], 8, probe, 256), (2**32 - 1, 8, 0, 0)),
    "add_key": (
        (buf(b"user"), buf(key_desc), buf(b"x"), 1, KEY_SPEC_SESSION_KEYRING),
        (0, 0, 0, 0, KEY_SPEC_SESSION_KEYRING),
    ),
    "keyctl": (
        (0, KEY_SPEC_SESSION_KEYRING, 0),
        (0, KEY_SPEC_SESSION_KEYRING, 0),
    ),  # KEYCTL_GET_KEYRING_ID
    "request_key": ((buf(b"user"), buf(b"tmlbench-none"), 0, 0), (0, 0, 0, 0)),
    "userfaultfd": ((0o2004001,), (1,)),  # O_CLOEXEC | O_NONBLOCK | UFFD_USER_MODE_ONLY
    "ptrace": ((0, 0, 0, 0), (0, 0, 0, 0)),  # PTRACE_TRACEME (in a child: it is harmless)
    "pidfd_getfd": (lambda: (pidfd_self(), 1, 0), (2**32 - 1, 1, 0)),
    "perf_event_open": ((perf_attr_p, 0, 2**64 - 1, 2**64 - 1, 8), (0, 0, -1, -1, 8)),
    "bpf": ((0, bpf_attr, 128), (0, 0, 128)),  # BPF_MAP_CREATE
    "process_vm_readv": (lambda: (os.getpid(), local_iov, 1, remote_iov, 1, 0), (0, 0, 0, 0, 0, 0)),
    "process_vm_writev": (
        lambda: (os.getpid(), remote_iov, 1, local_iov, 1, 0),
        (0, 0, 0, 0, 0, 0),
    ),
}
FORKS = {"ptrace"}  # TRACEME makes our parent the tracer: only ever in a child


def wrappers(name: str):
    """glibc's (or libkeyutils') own function for ``name``, where there is one."""
    if name == "ptrace":
        return lambda: attach_own_child(lambda *x: checked(libc.ptrace(*map(ctypes.c_long, x))))
    if name in ("process_vm_readv", "process_vm_writev"):
        fn = getattr(libc, name)
        fn.restype = ctypes.c_ssize_t
        args = DENIED[name][0]()
        return lambda: checked(fn(*(ctypes.c_ulong(x) for x in args)))
    if name == "pidfd_getfd" and hasattr(libc, "pidfd_getfd"):
        return lambda: checked(libc.pidfd_getfd(pidfd_self(), 1, 0))
    if name in ("keyctl", "add_key"):
        try:
            keyutils = ctypes.CDLL("libkeyutils.so.1", use_errno=True)
        except OSError:
            return None
        if name == "keyctl":
            return lambda: checked(keyutils.keyctl_get_keyring_ID(KEY_SPEC_SESSION_KEYRING, 0))
        return lambda: checked(
            keyutils.add_key(b"user", key_desc, b"x", 1, KEY_SPEC_SESSION_KEYRING)
        )
    return None


def try_denied(name: str) -> dict:
    x86_args, i386_args = DENIED[name]
    args = x86_args() if callable(x86_args) else x86_args
    nr = NR["x86_64"][name]
    got: dict = {}
    ways = {
        "libc": lambda: libc_syscall(nr, *args),
        "raw": lambda: raw64(nr, *args),
        "x32": lambda: raw64(nr | X32_BIT, *args),
    }
    for way, action in ways.items():
        got[way] = in_child(action) if name in FORKS else attempt(action)
    if name == "ptrace":  # the real use: attach to a process of our own
        got["attach"] = attempt(lambda: attach_own_child(lambda *x: libc_syscall(nr, *x)))
        got["seize_pid1"] = in_child(lambda: libc_syscall(nr, 0x4206, 1, 0, 0))  # PTRACE_SEIZE
    wrapper = wrappers(name)
    got["wrapper"] = attempt(wrapper) if wrapper else "absent"
    if name in NR["i386"]:
        got["i386"] = in_child(lambda: int80(NR["i386"][name], *i386_args))
    if name == "io_uring_setup" and got["libc"] == "ok":  # a hole: keep the fd for the others
        ring_fd[0] = libc_syscall(nr, 4, ring_params)
    return got


# -- Docker's own denials (the kernel refuses most of them too: no capabilities) ------------
def clone_ns(nr: int, flags: int) -> None:
    pid = libc_syscall(nr, flags | 17, 0, 0, 0, 0)  # | SIGCHLD; a fork if it works
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)


def clone3_ns(nr: int) -> None:
    args = buf(struct.pack("<QQQQQ", 0x10000000, 0, 0, 0, 17) + bytes(48))  # NEWUSER, SIGCHLD
    pid = libc_syscall(nr, args, 88)
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)


def docker_denied() -> dict:
    n = NR["x86_64"]
    c = libc_syscall
    tmp, none = buf(b"/tmp"), buf(b"/nonexistent/tmlbench")
    tries = {
        "mount": lambda: c(n["mount"], buf(b"none"), tmp, buf(b"tmpfs"), 0, 0),
        "umount2": lambda: c(n["umount2"], tmp, 2),
        "pivot_root": lambda: c(n["pivot_root"], buf(b"."), buf(b".")),
        "kexec_load": lambda: c(n["kexec_load"], 0, 0, 0, 0),
        "kexec_file_load": lambda: c(n["kexec_file_load"], -1, -1, 0, 0, 0),
        "init_module": lambda: c(n["init_module"], 0, 0, buf(b"")),
        "finit_module": lambda: c(n["finit_module"], -1, buf(b""), 0),
        "delete_module": lambda: c(n["delete_module"], buf(b"tmlbench_none"), 0o4000),
        "reboot": lambda: c(n["reboot"], 0xFEE1DEAD, 672274793, 0x12345678, 0),  # bad cmd
        "swapon": lambda: c(n["swapon"], none, 0),
        "swapoff": lambda: c(n["swapoff"], none),
        "acct": lambda: c(n["acct"], none),
        "settimeofday": lambda: c(n["settimeofday"], 0, 0),
        "clock_settime": lambda: c(n["clock_settime"], 0, 0),
        "unshare_user": lambda: c(n["unshare"], 0x10000000),
        "unshare_mount": lambda: c(n["unshare"], 0x00020000),
        "setns_net": lambda: c(n["setns"], os.open("/proc/self/ns/net", os.O_RDONLY), 0),
        "clone_newuser": lambda: clone_ns(n["clone"], 0x10000000),
        "clone3_newuser": lambda: clone3_ns(n["clone3"]),
        "open_by_handle_at": lambda: c(n["open_by_handle_at"], -100, buf(8 + 128), 0),
        "lookup_dcookie": lambda: c(n["lookup_dcookie"], 0, 0, 0),
        "quotactl": lambda: c(n["quotactl"], 0x800007, buf(b"/dev/null"), 0, 0),  # Q_GETQUOTA
        "iopl": lambda: c(n["iopl"], 3),
        "ioperm": lambda: c(n["ioperm"], 0x80, 1, 1),
        "syslog_size": lambda: c(n["syslog"], 10, 0, 0),  # SYSLOG_ACTION_SIZE_BUFFER
        "uselib": lambda: c(n["uselib"], none),
        "personality_read_implies_exec": lambda: c(n["personality"], 0x0400000),
        "socket_vsock": lambda: socket.socket(40, socket.SOCK_STREAM).close(),
    }
    got = {name: in_child(action) for name, action in tries.items()}
    got["vm86_i386"] = in_child(lambda: int80(NR["i386"]["vm86"], 0, 0))
    return got


# -- what every program does ----------------------------------------------------------------
def threads() -> None:
    box: list[int] = []
    ts = [threading.Thread(target=lambda: box.append(os.getpid())) for _ in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert len(box) == 4


def files() -> None:
    with open("scratch.txt", "w") as f:
        f.write("hello")
    os.replace("scratch.txt", "scratch2.txt")
    with open("scratch2.txt") as f:
        assert f.read() == "hello"
    os.unlink("scratch2.txt")


def memfd_and_mmap() -> None:
    fd = os.memfd_create("tmlbench")
    os.ftruncate(fd, 4096)
    with mmap.mmap(fd, 4096) as m:
        m[:5] = b"hello"
    os.close(fd)


def socketpair() -> None:
    x, y = socket.socketpair()
    x.sendall(b"ping")
    assert y.recv(4) == b"ping"
    x.close()
    y.close()


def fork_and_wait() -> None:
    pid = os.fork()
    if pid == 0:
        os._exit(7)
    assert os.WEXITSTATUS(os.waitpid(pid, 0)[1]) == 7


def benign() -> dict:
    n = NR["x86_64"]
    return {
        "getpid_libc": attempt(lambda: libc_syscall(n["getpid"])),
        "getpid_raw": attempt(lambda: raw64(n["getpid"])),
        "threads": attempt(threads),
        "subprocess": attempt(lambda: subprocess.run([sys.executable, "-c", "pass"], check=True)),
        "subprocess_true": attempt(lambda: subprocess.run(["/usr/bin/true"], check=True)),
        "fork": attempt(fork_and_wait),
        "files": attempt(files),
        "memfd_mmap": attempt(memfd_and_mmap),
        "socketpair": attempt(socketpair),
        "urandom": attempt(lambda: os.urandom(16)),
        "affinity": attempt(lambda: os.sched_getaffinity(0)),
        "personality_query": attempt(lambda: c_personality(0xFFFFFFFF)),
        "pidfd_open": attempt(lambda: os.close(pidfd_self())),
    }


def c_personality(value: int) -> int:
    return libc_syscall(NR["x86_64"]["personality"], value)


if not X86:
    report["error"] = "this agent speaks the x86_64 ABI only"
else:
    for name in NR["denied"]:
        report["denied"][name] = try_denied(name) if name in DENIED else {"untried": "untried"}
    report["docker_denied"] = docker_denied()
    report["abi"] = {
        "i386_getpid": in_child(lambda: int80(NR["i386"]["getpid"])),
        "x32_getpid": attempt(lambda: raw64(NR["x86_64"]["getpid"] | X32_BIT)),
        # A number above every syscall this kernel and libseccomp know: ENOSYS, not EPERM.
        "x86_64_future_511": attempt(lambda: libc_syscall(511)),
    }
    report["routes"] = {
        "/dev/userfaultfd": attempt(lambda: os.close(os.open("/dev/userfaultfd", os.O_RDWR)))
    }
    report["benign"] = benign()
submit_sample()
emit(report)
