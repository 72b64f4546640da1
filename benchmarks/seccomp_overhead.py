"""What the seccomp filter costs: building it once, and each bwrap attempt with vs. without it.

    uv run python benchmarks/seccomp_overhead.py [--runs 30]

* build: a fresh interpreter imports the binding (ctypes finds and loads libseccomp) and
  compiles the policy (runner/sandbox/seccomp.py) to BPF; the harness does this once per
  process. Warm rebuilds are timed too (what the cache saves each attempt).
* per attempt, host side: the memfd that carries the program to bwrap.
* per attempt, sandbox side: the real bwrap command line of the bwrap backend (its
  ``argv()``), run with and without ``--seccomp FD``, interleaved so drift hits both alike:
  start-up of ``/bin/true`` and ``python -c pass``, and two programs that live on syscalls
  (one million getppid() calls; importing pandas and scikit-learn, thousands of
  stat/open/mmap calls), which show what evaluating the filter costs per call.

Target: the filter adds at most 5 ms (median) to an attempt's start-up.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from machine import describe_machine  # benchmarks/machine.py

from runner.sandbox import BwrapSandbox, SandboxLimits, SandboxRequest, seccomp
from runner.sandbox.supervise import memfd

COLD_BUILD = (
    "import time; t = time.perf_counter(); from runner.sandbox import seccomp; "
    "t1 = time.perf_counter(); seccomp.libseccomp(); t2 = time.perf_counter(); "
    "seccomp.bwrap_filter(); t3 = time.perf_counter(); "
    "print((t1 - t) * 1e3, (t2 - t1) * 1e3, (t3 - t2) * 1e3)"
)
# The syscall-heavy programs print their own CPU time (user + system) when done: wall time
# on a shared machine moves with everyone else's load, a process's CPU time much less.
SELF_CPU = "\nimport resource; r = resource.getrusage(resource.RUSAGE_SELF); print(r.ru_utime + r.ru_stime)"
PROGRAMS = {
    "true": ["/bin/true"],
    "python -c pass": ["{python}", "-c", "pass"],
    "1M getppid()": ["{python}", "-c", "import os\nfor _ in range(10**6): os.getppid()" + SELF_CPU],
    "import pandas, sklearn": ["{python}", "-c", "import pandas, sklearn.ensemble" + SELF_CPU],
}


def ms(values: list[float]) -> str:
    med = statistics.median(values) * 1e3
    p90 = statistics.quantiles(values, n=10)[-1] * 1e3 if len(values) >= 2 else med
    return f"{med:8.1f} [{p90:7.1f}]"


def bwrap_argv(sb: BwrapSandbox, root: Path, command: list[str]) -> list[str]:
    """The backend's own bwrap command line, minus the status pipe only the supervisor has."""
    ws, agent = root / "ws", root / "agent"
    ws.mkdir(exist_ok=True)
    agent.mkdir(exist_ok=True)
    req = SandboxRequest(
        command=command,
        workspace=ws,
        agent_dir=agent,
        env={"PATH": "/usr/bin:/bin"},
        limits=SandboxLimits(wall_seconds=60),
        stdout_path=root / "out.log",
        stderr_path=root / "err.log",
    )
    argv = sb.argv(req)
    at = argv.index("--json-status-fd")
    return argv[:at] + argv[at + 2 :]


def run_once(argv: list[str], with_filter: bool, bpf: bytes) -> tuple[float, float | None]:
    """(wall seconds, the CPU seconds the program reported, if it reports them)."""
    fds: tuple[int, ...] = ()
    if with_filter:
        fd = memfd("tmlbench-seccomp", bpf)
        split = argv.index("--")
        argv = [*argv[:split], "--seccomp", str(fd), *argv[split:]]
        fds = (fd,)
    try:
        t = time.perf_counter()
        done = subprocess.run(
            argv, env={"PATH": "/usr/bin:/bin"}, pass_fds=fds, check=True, capture_output=True
        )
        wall = time.perf_counter() - t
        out = done.stdout.split()
        return wall, float(out[-1]) if out else None
    finally:
        for fd in fds:
            os.close(fd)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--runs", type=int, default=30)
    args = ap.parse_args()
    print(f"machine: {describe_machine()}")
    print(f"runs per cell: {args.runs}; times are medians (p90 in brackets), ms\n")

    repo = Path(__file__).resolve().parents[1]
    cold = []
    for _ in range(max(3, args.runs // 5)):
        got = subprocess.run(
            [sys.executable, "-c", COLD_BUILD], cwd=repo, capture_output=True, text=True, check=True
        )
        cold.append([float(x) for x in got.stdout.split()])
    imp, load, build = (statistics.median(c[i] for c in cold) for i in range(3))
    print("building the filter (once per harness process, fresh interpreter):")
    print(f"    import runner.sandbox (the harness pays it anyway) {imp:7.1f}")
    print(f"    load libseccomp (pyseccomp)   {load:7.1f}")
    print(f"    compile + export BPF          {build:7.1f}")
    bpf = seccomp.bwrap_filter()
    warm = []
    for _ in range(args.runs):
        t = time.perf_counter()
        seccomp.export_bpf(seccomp.build_filter(seccomp.docker_profile()))
        warm.append(time.perf_counter() - t)
    print(f"    warm rebuild (what the cache saves per attempt) {ms(warm)}")
    print(f"    program: {len(bpf) // 8} BPF instructions ({len(bpf)} bytes)\n")

    host = []
    for _ in range(args.runs * 10):
        t = time.perf_counter()
        os.close(memfd("tmlbench-seccomp", bpf))
        host.append(time.perf_counter() - t)
    print(
        f"per attempt, host side: memfd with the program {statistics.median(host) * 1e6:.0f} µs\n"
    )

    sb = BwrapSandbox()
    print("per attempt, bwrap (the backend's command line):")
    print(f"    {'':24s} {'wall without':>17s} {'wall with':>17s} {'added':>7s}   own CPU added")
    with tempfile.TemporaryDirectory(prefix="tmlbench-bench-") as tmp:
        root = Path(tmp)
        for label, template in PROGRAMS.items():
            command = [sb.python if part == "{python}" else part for part in template]
            argv = bwrap_argv(sb, root, command)
            runs = args.runs if "pandas" not in label and "getppid" not in label else 10
            wall: dict[bool, list[float]] = {False: [], True: []}
            cpu: dict[bool, list[float | None]] = {False: [], True: []}
            run_once(argv, True, bpf)  # warm the page cache for both
            for _ in range(runs):
                for with_filter in (False, True):
                    w, c = run_once(argv, with_filter, bpf)
                    wall[with_filter].append(w)
                    cpu[with_filter].append(c)
            added = (statistics.median(wall[True]) - statistics.median(wall[False])) * 1e3
            line = f"    {label:24s} {ms(wall[False])} {ms(wall[True])} {added:+7.1f}"
            if cpu[False][0] is not None:
                base, filtered = (statistics.median(cpu[f]) * 1e3 for f in (False, True))
                line += f"   {filtered - base:+7.1f} (of {base:.0f})"
            print(line)
    print("\ntarget: the filter adds <= 5 ms (median) to an attempt's start-up")


if __name__ == "__main__":
    main()
