"""How much of the constant→Bayes-optimal gap the best baseline closes, per full-size twin.

    uv run python benchmarks/baseline_quality.py [--budget 1200] [--tasks a,b] [--rows N]

Each twin is prepared at its full size (or --rows), then every baseline runs one real attempt in
the bwrap sandbox, two at a time on pinned CPUs. Gap share = (baseline − constant) /
(Bayes-optimal − constant) on the private holdout, in higher-is-better terms. Target: ≥ 90 %
for the best baseline at the 1200 s budget.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from machine import describe_machine  # benchmarks/machine.py

from runner.attempts.attempt import AttemptContext, AttemptPlan, run_attempt
from runner.config import Paths
from runner.sandbox import get_sandbox
from runner.specs.registry import agent_code_dir, list_tasks, load_agent, task_spec_sha256
from runner.suites.scheduling import CpuPool, host_cpus
from runner.tasks.metrics import get_metric
from runner.tasks.preparation import prepare_twin

AGENTS = ("baseline-linear", "baseline-gbm")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget", type=int, default=1200)
    parser.add_argument("--tasks", help="comma-separated task ids (default: all)")
    parser.add_argument("--rows", type=int, help="twin rows (default: each task's full size)")
    args = parser.parse_args()
    paths = Paths.from_env()
    tasks = [
        t
        for t in list_tasks(paths.tasks_dir).specs
        if not args.tasks or t.id in args.tasks.split(",")
    ]
    print(f"machine: {describe_machine()}")
    print(f"budget: {args.budget} s per attempt, 1 CPU each, bwrap sandbox\n")
    with tempfile.TemporaryDirectory(prefix="tmlbench-quality-") as tmp:
        root = Path(tmp)
        prepared = {}
        for task in tasks:
            started = time.perf_counter()
            prepared[task.id] = prepare_twin(task, paths.tasks_dir, root / "data", rows=args.rows)
            print(f"prepared {task.id} in {time.perf_counter() - started:.1f} s")
        pool, sandbox = CpuPool(host_cpus()), get_sandbox("bwrap")

        def one(task, agent_id):
            agent = load_agent(paths.agents_dir, agent_id)
            with pool.take(agent.limits.cpus) as cpuset:
                ctx = AttemptContext(
                    prepared=prepared[task.id],
                    runs_dir=root / "runs",
                    sandbox=sandbox,
                    agent_code_dir=agent_code_dir(paths.agents_dir, agent),
                    task_spec_sha256=task_spec_sha256(paths.tasks_dir, task.id),
                    cpuset=cpuset,
                )
                return task, run_attempt(AttemptPlan(agent, task, args.budget, 0), ctx)

        jobs = [(task, agent) for task in tasks for agent in AGENTS]
        with ThreadPoolExecutor(max_workers=len(host_cpus())) as executor:
            results = list(executor.map(lambda job: one(*job), jobs))

        print(
            f"\n{'task':46} {'agent':16} {'status':8} {'score':>9} {'constant':>9} {'bayes':>9} "
            f"{'gap share':>9} {'wall s':>7}"
        )
        for task, record in results:
            meta = prepared[task.id].meta()  # twins: both reference scores are there
            metric = get_metric(task.metric.name)
            const, bayes = (
                metric.higher_is_better(score)
                for score in (meta.constant_score, meta.bayes_optimal_score)
            )
            share = (
                (record.score_hib - const) / (bayes - const)
                if record.status == "success"
                else float("nan")
            )
            score = f"{record.score:9.4f}" if record.score is not None else f"{'-':>9}"
            print(
                f"{task.id:46} {record.agent_id:16} {record.status:8} {score} {meta.constant_score:9.4f} "
                f"{meta.bayes_optimal_score:9.4f} {share:9.1%} {record.wall_seconds or 0:7.1f}"
            )


if __name__ == "__main__":
    main()
