"""Time from budget end to the last process of a misbehaving agent gone, per backend.

    uv run python benchmarks/deadline.py [--runs 10] [--wall 1.0] [--grace 1.0]

The agent (tests/sandbox_agents/misbehave.py) ignores SIGTERM and double-forks a setsid()
grandchild that ignores SIGTERM too. Target: worst case <= 2 s (with the default 1 s grace).
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
import uuid
from pathlib import Path

from runner.sandbox import SandboxLimits, SandboxRequest, get_sandbox

AGENTS = Path(__file__).resolve().parents[1] / "tests" / "sandbox_agents"


def with_marker(marker: bytes) -> list[int]:
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/environ", "rb") as f:
                    if marker in f.read():
                        found.append(int(name))
            except OSError:
                pass
    return found


def one(name: str, root: Path, wall: float, grace: float) -> tuple[float, float, bool]:
    sb = get_sandbox(name)
    ws = root / uuid.uuid4().hex
    ws.mkdir()
    marker = f"tmlbench-bench-{uuid.uuid4().hex}"
    paths = sb.paths(ws, AGENTS)
    req = SandboxRequest(
        command=[paths.python, f"{paths.agent_dir}/misbehave.py"],
        workspace=ws,
        agent_dir=AGENTS,
        env={"PATH": "/usr/bin:/bin", "MARKER": marker},
        limits=SandboxLimits(wall_seconds=wall, grace_seconds=grace),
        stdout_path=ws.parent / "out.log",
        stderr_path=ws.parent / "err.log",
    )
    start = time.monotonic()
    res = sb.run(req)
    returned = time.monotonic()
    while with_marker(marker.encode()):
        if time.monotonic() - returned > 10:
            raise SystemExit(f"{name}: processes survived 10 s after the deadline")
        time.sleep(0.002)
    gone = time.monotonic()
    spawned = len((ws / "pids.txt").read_text().splitlines()) == 3
    assert res.timed_out
    return returned - (start + wall), gone - (start + wall), spawned


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--wall", type=float, default=1.0)
    ap.add_argument("--grace", type=float, default=1.0)
    args = ap.parse_args()
    from machine import describe_machine  # same folder

    print(f"machine: {describe_machine()}")
    print(f"runs: {args.runs}, budget {args.wall} s, grace {args.grace} s\n")
    with tempfile.TemporaryDirectory(prefix="tmlbench-deadline-") as tmp:
        for name in ("bwrap", "process"):
            rows = [one(name, Path(tmp), args.wall, args.grace) for _ in range(args.runs)]
            ret = [r[0] for r in rows]
            gone = [r[1] for r in rows]
            print(
                f"{name:8s} budget end -> run() returned: median {statistics.median(ret):.3f} s; "
                f"-> last process gone: median {statistics.median(gone):.3f} s, "
                f"worst {max(gone):.3f} s (kill after grace: worst "
                f"{max(gone) - args.grace:.3f} s); agent fully spawned in "
                f"{sum(r[2] for r in rows)}/{len(rows)} runs"
            )
    print("\ntarget: worst case <= 2 s")


if __name__ == "__main__":
    main()
