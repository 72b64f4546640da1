"""How long `dbt build` of the marts takes for N synthetic attempts in raw.runs.

Generates the runs directly in DuckDB (`insert ... select from range()`): 20 agents × 4 tasks
(2 maximize, 2 minimize) × 3 budgets, attempts spread evenly, ~80% successes, then times
warehouse.marts.build_marts (models, data tests, unit tests; 1,000 bootstrap replicates).

    uv run python benchmarks/dbt_build.py              # N = 100,000
    uv run python benchmarks/dbt_build.py -n 10000 -n 1000000
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import duckdb

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from machine import describe_machine

from warehouse.marts import build_marts, ensure_raw_schema

AGENTS, TASKS, BUDGETS = 20, 4, (60, 300, 900)

GENERATE = """
insert into raw.runs (
    run_space, run_id, schema_version, created_at, suite_id, agent_id, agent_kind, harness, harness_version,
    task_id, metric_name, metric_direction, budget_seconds, instruction_profile,
    attempt_index, seed, sandbox_backend, sandbox_isolated, sandbox_unsafe, status,
    score, score_hib, task_spec_sha256, tmlbench_version, source, record_sha256, loaded_at
)
with draws as (
    select
        i,
        i % $agents as agent,
        (i // $agents) % $tasks as task,
        (i // ($agents * $tasks)) % 3 as budget_index,
        hash(i) % 1000 / 1000.0 as u,
        hash(i + 7919) % 1000 / 1000.0 as v
    from range($n) as r(i)
),
shaped as (
    select
        *,
        task % 2 = 0 as maximize,
        case
            when u < 0.80 then 'success'
            when u < 0.85 then 'timeout'
            when u < 0.90 then 'invalid_submission'
            when u < 0.94 then 'no_submission'
            when u < 0.98 then 'runtime_error'
            when u < 0.99 then 'provider_error'
            else 'harness_error'
        end as status,
        0.5 + agent / 50.0 + budget_index / 20.0 + v / 10.0 as quality
    from draws
)
select
    'bench',
    'run-' || i,
    1,
    timestamptz '2026-01-01 00:00:00+00' + to_seconds(i // ($agents * $tasks * 3)),
    'bench',
    'agent-' || lpad(agent::varchar, 2, '0'),
    'baseline', 'synthetic', '1',
    'task-' || task,
    case when maximize then 'auc' else 'rmse' end,
    case when maximize then 'maximize' else 'minimize' end,
    [60, 300, 900][budget_index + 1],
    'standard', i // ($agents * $tasks * 3), i, 'process', false, false,
    status,
    case when status = 'success' then (case when maximize then quality else 2 - quality end) end,
    case when status = 'success' then (case when maximize then quality else quality - 2 end) end,
    'x', '0', 'tmlbench', 'x', now()
from shaped
"""


def generate(path: Path, n: int) -> float:
    ensure_raw_schema(path)
    started = time.perf_counter()
    with duckdb.connect(str(path)) as con:
        con.execute(GENERATE, {"n": n, "agents": AGENTS, "tasks": TASKS})
        # the suite that counts them (its folder and every setting they have), as the loader
        # writes suite files: its harness-error ceiling is joined by setting_success_rates
        con.execute(
            "insert into raw.suites by name select 'bench' as suite_id, 'bench' as title, "
            "5 as attempts, 10 as attempt_ceiling, 3 as harness_error_ceiling, "
            "'bench' as runs_subdir, 'x' as spec_sha256, now() as loaded_at"
        )
        con.execute(
            "insert into raw.suite_settings select distinct 'bench', agent_id, task_id, "
            "budget_seconds from raw.runs"
        )
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", "--runs", type=int, action="append", help="attempts (repeatable)")
    args = parser.parse_args()
    sizes = args.runs or [100_000]
    print(describe_machine())
    with tempfile.TemporaryDirectory(prefix="tmlbench-dbt-bench-") as tmp:
        for n in sizes:
            path = Path(tmp) / f"bench-{n}.duckdb"
            gen_seconds = generate(path, n)
            result = build_marts(path, artifacts_dir=Path(tmp) / "dbt")
            print(
                f"N={n:>9,}  generate {gen_seconds:6.2f} s  dbt build {result.seconds:6.2f} s  "
                f"({result.count('success')} models, {result.count('pass')} tests passed)"
            )
            slowest = sorted(result.nodes, key=lambda node: node.seconds, reverse=True)[:3]
            print(
                "    slowest: "
                + ", ".join(f"{n.unique_id.split('.')[-1]} {n.seconds:.2f} s" for n in slowest)
            )


if __name__ == "__main__":
    main()
