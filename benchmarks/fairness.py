"""Fairness under load: how much a CPU-hungry neighbour slows an attempt pinned to its own CPU.

    uv run python benchmarks/fairness.py [--runs 3] [--iterations 75000000]

A fixed CPU-bound workload (a pure-Python loop, about 5 s) runs as a real sandboxed attempt
(``run_attempt``, bwrap backend, cgroup CPU set "0" and memory cap), alternately alone and while
a neighbour attempt pinned to CPU "1" keeps several busy processes spinning. The workload times
its own loop; the slowdown is the median over (alone, loaded) pairs of loaded ÷ alone − 1.

Target: the neighbour slows the pinned attempt by no more than 10 %.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import textwrap
import threading
import time
from pathlib import Path

from machine import describe_machine  # benchmarks/machine.py

from runner.attempts.attempt import AttemptContext, AttemptPlan, run_attempt
from runner.config import REPO_ROOT
from runner.sandbox import cgroups, get_sandbox
from runner.specs import AgentSpec
from runner.specs.registry import load_task, task_spec_sha256
from runner.tasks.preparation import prepare_twin

TASK = "bank-customer-churn-ict-u-ai"
WORKLOAD = """
import shutil, sys, time
n = int(sys.argv[1])
start = time.perf_counter()
x = 0
for i in range(n):
    x += i & 7
print(f"workload_seconds: {time.perf_counter() - start:.4f}", flush=True)
shutil.copy("sample_submission.csv", "submission.csv")
"""
NEIGHBOUR = """
import multiprocessing, shutil, sys, time

def spin(seconds):
    end = time.monotonic() + seconds
    x = 0
    while time.monotonic() < end:
        x += 1

seconds, workers = float(sys.argv[1]), int(sys.argv[2])
procs = [multiprocessing.Process(target=spin, args=(seconds,)) for _ in range(workers)]
for p in procs:
    p.start()
spin(seconds)
for p in procs:
    p.join()
shutil.copy("sample_submission.csv", "submission.csv")
"""


def agent(code: Path, agent_id: str, script: str, args: list[str]) -> AgentSpec:
    code.mkdir(parents=True, exist_ok=True)
    (code / "agent.py").write_text(textwrap.dedent(script))
    return AgentSpec(
        id=agent_id,
        kind="command",
        title=agent_id,
        harness="benchmark",
        command=("{python}", "{agent_dir}/agent.py", *args),
    )


def workload_seconds(stdout: Path) -> float:
    for line in stdout.read_text().splitlines():
        if line.startswith("workload_seconds:"):
            return float(line.split(":", 1)[1])
    raise RuntimeError(f"no workload time in {stdout}: {stdout.read_text()[:500]}")


class PinnedAttempts:
    """Sandboxed attempts of the benchmark's agents on one prepared twin, each on a CPU set."""

    def __init__(self, root: Path, iterations: int, neighbour_procs: int):
        self.root = root
        self.tasks_dir = REPO_ROOT / "tasks"
        self.task = load_task(self.tasks_dir, TASK)
        self.sandbox = get_sandbox("bwrap")
        self.prepared = prepare_twin(self.task, self.tasks_dir, root / "data", rows=300)
        self.work = agent(root / "workload", "workload", WORKLOAD, [str(iterations)])
        self.neighbour_procs = neighbour_procs
        self.index = iter(range(1000))

    def attempt(self, spec: AgentSpec, cpuset: str, budget: int):
        ctx = AttemptContext(
            prepared=self.prepared,
            runs_dir=self.root / "runs",
            sandbox=self.sandbox,
            agent_code_dir=self.root / spec.id,
            task_spec_sha256=task_spec_sha256(self.tasks_dir, TASK),
            cpuset=cpuset,
        )
        record = run_attempt(AttemptPlan(spec, self.task, budget, next(self.index)), ctx)
        if record.status != "success":
            raise RuntimeError(f"{record.run_id}: {record.status} {record.error_message}")
        return record

    def timed(self, label: str) -> float:
        """The workload's loop seconds, pinned to CPU 0."""
        record = self.attempt(self.work, "0", 120)
        seconds = workload_seconds(self.root / "runs" / record.run_id / "stdout.log")
        print(
            f"  {label:15s} {seconds:6.3f} s loop, {record.wall_seconds:6.3f} s attempt "
            f"(cpuset {record.cpuset}, memory cap {record.memory_limit_bytes >> 20} MiB)"
        )
        return seconds

    def with_neighbour(self, spin_for: float) -> float:
        """The workload's loop seconds while a neighbour spins on CPU 1 for ``spin_for`` s."""
        busy = agent(
            self.root / "neighbour",
            "neighbour",
            NEIGHBOUR,
            [f"{spin_for:.1f}", str(self.neighbour_procs)],
        )
        result: dict = {}
        side = threading.Thread(
            target=lambda: result.update(record=self.attempt(busy, "1", int(spin_for) + 60))
        )
        side.start()
        try:
            time.sleep(1.5)  # let the neighbour's processes get going
            seconds = self.timed("with neighbour")
        finally:
            side.join()
        record = result["record"]
        print(
            f"  {'':15s} neighbour: {self.neighbour_procs + 1} busy processes on cpuset "
            f"{record.cpuset}, {record.cpu_seconds:.1f} CPU s in {record.wall_seconds:.1f} s"
        )
        return seconds


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--iterations", type=int, default=75_000_000)
    ap.add_argument("--neighbour-procs", type=int, default=4)
    args = ap.parse_args()
    ok, why = cgroups.available()
    if not ok:
        sys.exit(f"needs cgroups v1 for CPU pinning: {why}")
    print(f"machine: {describe_machine()}")
    with tempfile.TemporaryDirectory(prefix="tmlbench-fairness-") as tmp:
        bench = PinnedAttempts(Path(tmp), args.iterations, args.neighbour_procs)
        bench.attempt(bench.work, "0", 120)  # warm-up: page cache, bwrap probe
        # Alone and loaded runs alternate, so load from outside the benchmark (other users of
        # the machine) drifts into both sides alike; the slowdown is the median pair ratio.
        alone, loaded = [], []
        for _ in range(args.runs):
            alone.append(bench.timed("alone"))
            loaded.append(bench.with_neighbour(alone[-1] * 1.5 + 4))
    med_alone, med_loaded = statistics.median(alone), statistics.median(loaded)
    ratios = sorted((b / a - 1) * 100 for a, b in zip(alone, loaded, strict=True))
    print(
        f"\nmedian of {args.runs}: alone {med_alone:.3f} s, with neighbour {med_loaded:.3f} s "
        f"({(med_loaded / med_alone - 1) * 100:+.1f} %); slowdown per pair: median "
        f"{statistics.median(ratios):+.1f} % (range {ratios[0]:+.1f} … {ratios[-1]:+.1f} %)"
    )
    print("target: slowdown <= 10 %")


if __name__ == "__main__":
    main()
