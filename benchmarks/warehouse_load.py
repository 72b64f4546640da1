"""Benchmark: load N run records into a fresh DuckDB warehouse (default 100,000), then again.

Run:  uv run python benchmarks/warehouse_load.py [--records 10000|100000|1000000] [--keep DIR]

Writes N synthetic ``record.json`` files (laid out like real runs: ``<runs>/<suite>/<run_id>/``
with an empty ``workspace/`` next to each record) into a temporary directory, then times
``warehouse.loader.load_runs`` into a fresh DuckDB file:

* first load: every record is new (scan + read + hash + bulk parse + one INSERT + the index);
* reload, nothing new: every file is known to the index (scan + stat comparison only);
* one new setting: 5 new records of a setting not seen before, found by a full scan and, as a
  Dagster materialization of that setting loads them, by a scan of its run folders only.

The file-system cache is warm (the files were just written), as it is after a benchmark run.
Each line shows the load average of the machine when it was measured (the numbers are only
comparable on a quiet machine). Targets: first load <= 5 s per 100,000 records, reload <= 1 s
and one new setting <= 1 s at 100,000.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from machine import describe_machine  # noqa: E402  (benchmarks/machine.py)

from runner.attempts.records import RECORD_FILE, WORKSPACE_DIR, RunRecord  # noqa: E402
from warehouse.db import apply_ddl, connect  # noqa: E402
from warehouse.loader import LoadReport, load_runs  # noqa: E402

TARGET_FIRST_S_PER_100K = 5.0
TARGET_RELOAD_S = 1.0  # at 100,000 records
TARGET_NEW_SETTING_S = 1.0  # at 100,000 records
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


def write_records(runs_dir: Path, n: int, start: int = 0, setting: str | None = None) -> None:
    """``n`` records; ``setting``: all of one new setting (agent, task, budget), in suite0."""
    base = template()
    for i in range(start, start + n):
        agent, task, budget, attempt = i % 20, (i // 20) % 10, (60, 300, 900)[(i // 200) % 3], i
        agent_id, suite = f"agent{agent:02d}", f"suite{i % 4}"
        if setting:
            agent_id, task, budget, attempt, suite = setting, 0, 60, i - start, "suite0"
        run_id = f"{agent_id}__task{task}__{budget}s__standard__a{attempt:07d}"
        status = STATUSES[i % len(STATUSES)]
        created = T0 + dt.timedelta(seconds=i)
        score = (i % 1000) / 1000 if status == "success" else None
        rec = dict(
            base,
            run_id=run_id,
            agent_id=agent_id,
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
        run_dir = runs_dir / suite / run_id
        (run_dir / WORKSPACE_DIR).mkdir(parents=True)
        (run_dir / RECORD_FILE).write_text(json.dumps(rec, indent=2, sort_keys=True) + "\n")


def timed(what: Callable[[], LoadReport]) -> tuple[LoadReport, float, float, float]:
    """The report, the seconds it took, the CPU seconds this process spent on it (all its
    threads: on a shared machine the wall time waits for other people's work, this does not)
    and the 1-minute load average just before."""
    load = os.getloadavg()[0]
    t, cpu = time.perf_counter(), time.process_time()
    report = what()
    return report, time.perf_counter() - t, time.process_time() - cpu, load


def verdict(seconds: float, target: float) -> str:
    return f"target <= {target:.1f} s: {'ok' if seconds <= target else 'MISSED'}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--keep", type=Path, help="write the runs and warehouse here and keep them")
    args = parser.parse_args()
    n = args.records
    scale = n / 100_000

    print(f"machine: {describe_machine()}")
    with tempfile.TemporaryDirectory(prefix="tmlbench-wh-bench-") as tmp:
        root = args.keep or Path(tmp)
        runs_dir, db = root / "runs", root / "warehouse.duckdb"
        t = time.perf_counter()
        write_records(runs_dir, n)
        print(f"wrote {n:,} records in {time.perf_counter() - t:.1f} s")

        con = connect(db)
        apply_ddl(con)
        first, first_s, first_cpu, first_load = timed(lambda: load_runs(con, runs_dir))
        again, again_s, again_cpu, again_load = timed(lambda: load_runs(con, runs_dir))
        write_records(runs_dir, 5, start=n, setting="newagent")
        new, new_s, new_cpu, new_load = timed(lambda: load_runs(con, runs_dir))
        write_records(runs_dir, 5, start=n + 5, setting="otheragent")
        one, one_s, one_cpu, one_load = timed(
            lambda: load_runs(con, runs_dir, prefixes=["suite0/otheragent__task0__60s__"])
        )
        rows = con.execute("select count(*) from raw.runs").fetchone()
        con.close()

        assert first.new == n and not first.rejected, first
        assert again.unchanged == n and again.new == 0 and again.parsed == 0, again
        assert new.new == 5 and new.unchanged == n and new.parsed == 5, new
        assert one.new == 5 and one.parsed == 5, one
        assert rows == (n + 10,)
        print(
            f"first load (all new):        {first_s:7.2f} s  (cpu {first_cpu:.2f} s, "
            f"{n / first_s:,.0f} records/s, load {first_load:.1f})  "
            f"{verdict(first_s, TARGET_FIRST_S_PER_100K * scale)}"
        )
        print(
            f"reload, nothing new:         {again_s:7.2f} s  (cpu {again_cpu:.2f} s, "
            f"load {again_load:.1f})  "
            + (verdict(again_s, TARGET_RELOAD_S) if n == 100_000 else "")
        )
        print(
            f"one new setting, full scan:  {new_s:7.2f} s  (cpu {new_cpu:.2f} s, 5 new, "
            f"load {new_load:.1f})  "
            + (verdict(new_s, TARGET_NEW_SETTING_S) if n == 100_000 else "")
        )
        print(
            f"one new setting, its folders:{one_s:7.2f} s  (cpu {one_cpu:.2f} s, 5 new, "
            f"load {one_load:.1f})  "
            + (verdict(one_s, TARGET_NEW_SETTING_S) if n == 100_000 else "")
        )
        print(f"warehouse file: {db.stat().st_size / 2**20:.1f} MiB for {rows[0]:,} rows")


if __name__ == "__main__":
    main()
