"""Extra wall time of an empty agent under each sandbox backend vs. a bare subprocess.

    uv run python benchmarks/sandbox_overhead.py [--runs 30]

Target: bwrap adds at most 100 ms (median) to an empty agent.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from machine import describe_machine  # benchmarks/machine.py

from runner.sandbox import SandboxLimits, SandboxRequest, cgroups, get_sandbox


def time_bare(argv: list[str], cwd: Path, runs: int) -> list[float]:
    out = []
    for _ in range(runs):
        t = time.perf_counter()
        subprocess.run(
            argv,
            cwd=cwd,
            env={"PATH": "/usr/bin:/bin"},
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        out.append(time.perf_counter() - t)
    return out


def time_backend(name: str, agent: str, root: Path, runs: int) -> list[float]:
    sb = get_sandbox(name)
    ws, agent_dir = root / f"ws-{name}", root / "agent"
    ws.mkdir(exist_ok=True)
    agent_dir.mkdir(exist_ok=True)
    paths = sb.paths(ws, agent_dir)
    argv = ["/bin/true"] if agent == "true" else [paths.python, "-c", "pass"]
    req = SandboxRequest(
        command=argv,
        workspace=ws,
        agent_dir=agent_dir,
        env={"PATH": "/usr/bin:/bin"},
        limits=SandboxLimits(wall_seconds=30),
        stdout_path=root / "out.log",
        stderr_path=root / "err.log",
    )
    out = []
    for _ in range(runs):
        t = time.perf_counter()
        res = sb.run(req)
        out.append(time.perf_counter() - t)
        assert res.exit_code == 0, (res, (root / "err.log").read_text())
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--runs", type=int, default=30)
    args = ap.parse_args()
    ok, why = cgroups.available()
    print(f"machine: {describe_machine()}; cgroups v1: {'yes' if ok else 'no (' + why + ')'}")
    print(f"runs per cell: {args.runs}; times are medians (p90 in brackets), ms\n")
    with tempfile.TemporaryDirectory(prefix="tmlbench-bench-") as tmp:
        root = Path(tmp)
        for agent, bare_argv in (
            ("true", ["/bin/true"]),
            ("python -c pass", [sys.executable, "-c", "pass"]),
        ):
            key = "true" if agent == "true" else "python"
            bare = time_bare(bare_argv, root, args.runs)
            med_bare = statistics.median(bare)
            print(f"agent `{agent}`: bare subprocess {med_bare * 1e3:7.1f}")
            for name in ("process", "bwrap"):
                t = time_backend(name, key, root, args.runs)
                med = statistics.median(t)
                p90 = statistics.quantiles(t, n=10)[-1]
                print(
                    f"    {name:8s} {med * 1e3:7.1f} [{p90 * 1e3:6.1f}]   "
                    f"overhead {(med - med_bare) * 1e3:+7.1f}"
                )
            print()
    print("target: bwrap overhead <= 100 ms (median)")


if __name__ == "__main__":
    main()
