"""Benchmark: load N run records into a fresh DuckDB warehouse (default 100,000).

Run:  uv run python benchmarks/warehouse_load.py [--records 10000|100000|1000000] [--keep DIR]

Writes N synthetic ``record.json`` files (laid out like real runs: ``<runs>/<suite>/<run_id>/``
with an empty ``workspace/`` next to each record) into a temporary directory, then times
``warehouse.loader.load_runs`` into a fresh DuckDB file twice:

* first load: every record is new (walk + read + hash + validate + one INSERT);
* second load: every record is unchanged (same work minus the INSERT, plus the id lookup).

The file-system cache is warm (the files were just written), as it is after a benchmark run.
Target: <= 10 s for 100,000 records.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from machine import describe_machine  # noqa: E402  (benchmarks/machine.py)

from runner.records import RECORD_FILE, WORKSPACE_DIR, RunRecord  # noqa: E402
from warehouse.db import apply_ddl, connect  # noqa: E402
from warehouse.loader import load_runs  # noqa: E402

TARGET_S_PER_100K = 10.0
STATUSES = ("success",) * 7 + ("timeout", "invalid_submission", "runtime_error")
T0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def template() -> dict:
    return RunRecord(
        run_id="x",
        created_at=T0,
        finished_at=T0,
        suite_id="bench",
        agent_id="agent",
        agent_kind="llm",
        harness="bench-harness",
        harness_version="1.2.3",
        provider="provider",
        model_id="model",
        task_id="task",
        metric_name="auc",
        metric_direction="maximize",
        budget_seconds=600,
        instruction_profile="standard",
        attempt_index=0,
        seed=1,
        sandbox_backend="bwrap",
        sandbox_isolated=True,
        sandbox_unsafe=False,
        cpuset="0",
        memory_limit_bytes=4 * 2**30,
        pids_limit=256,
        disk_limit_bytes=2 * 2**30,
        status="success",
        score=0.5,
        score_hib=0.5,
        wall_seconds=1.0,
        cpu_seconds=1.0,
        peak_memory_bytes=2**28,
        exit_code=0,
        tokens_in=1000,
        tokens_out=100,
        cost_usd=0.01,
        task_spec_sha256="a" * 64,
        public_manifest_sha256="b" * 64,
        instructions_sha256="c" * 64,
        tmlbench_version="0.1.0",
        git_sha="d" * 40,
        stdout_path="stdout.log",
        stderr_path="stderr.log",
        transcript_path="transcript.jsonl",
        submission_path="workspace/submission.csv",
    ).model_dump(mode="json")


def write_records(runs_dir: Path, n: int) -> None:
    base = template()
    for i in range(n):
        agent, task, budget, attempt = i % 20, (i // 20) % 10, (60, 300, 900)[(i // 200) % 3], i
        run_id = f"agent{agent:02d}__task{task}__{budget}s__standard__a{attempt:07d}"
        status = STATUSES[i % len(STATUSES)]
        created = T0 + dt.timedelta(seconds=i)
        score = (i % 1000) / 1000 if status == "success" else None
        rec = dict(
            base,
            run_id=run_id,
            agent_id=f"agent{agent:02d}",
            task_id=f"task{task}",
            budget_seconds=budget,
            attempt_index=attempt,
            seed=i,
            created_at=created.isoformat(),
            finished_at=(created + dt.timedelta(seconds=budget / 2)).isoformat(),
            status=status,
            score=score,
            score_hib=score,
            wall_seconds=budget / 2,
        )
        run_dir = runs_dir / f"suite{i % 4}" / run_id
        (run_dir / WORKSPACE_DIR).mkdir(parents=True)
        (run_dir / RECORD_FILE).write_text(json.dumps(rec, indent=2, sort_keys=True) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--keep", type=Path, help="write the runs and warehouse here and keep them")
    args = parser.parse_args()
    n = args.records

    print(f"machine: {describe_machine()}")
    with tempfile.TemporaryDirectory(prefix="tmlbench-wh-bench-") as tmp:
        root = args.keep or Path(tmp)
        runs_dir, db = root / "runs", root / "warehouse.duckdb"
        t = time.perf_counter()
        write_records(runs_dir, n)
        print(f"wrote {n:,} records in {time.perf_counter() - t:.1f} s")

        con = connect(db)
        apply_ddl(con)
        t = time.perf_counter()
        first = load_runs(con, runs_dir)
        first_s = time.perf_counter() - t
        t = time.perf_counter()
        second = load_runs(con, runs_dir)
        second_s = time.perf_counter() - t
        rows = con.execute("select count(*) from raw.runs").fetchone()[0]
        con.close()

        assert first.new == n and not first.rejected, first
        assert second.unchanged == n and second.new == 0 and not second.rejected, second
        assert rows == n
        target = TARGET_S_PER_100K * n / 100_000
        print(
            f"first load  (all new):       {first_s:6.2f} s  ({n / first_s:,.0f} records/s)  "
            f"target <= {target:.1f} s: {'ok' if first_s <= target else 'MISSED'}"
        )
        print(f"second load (all unchanged): {second_s:6.2f} s  ({n / second_s:,.0f} records/s)")
        print(f"warehouse file: {db.stat().st_size / 2**20:.1f} MiB for {rows:,} rows")


if __name__ == "__main__":
    main()
