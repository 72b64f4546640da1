"""Duplicate-submission marts at scale: a deterministic agent whose every success on a task is the
same answer (one group of thousands of attempts per task), another agent sharing a tenth of its
answers with it, everyone else distinct.

Generates N synthetic attempts as benchmarks/dbt_build.py does (20 agents × 4 tasks × 3 budgets),
gives every success a fingerprint, runs the full `dbt build` and reports the duplicate models'
own seconds, then times the run explorer's twins lookup (app.queries.submission_twins) on the
published snapshot for an attempt in the largest group and for one without twins.

    uv run python benchmarks/duplicate_submissions.py              # N = 100,000
    uv run python benchmarks/duplicate_submissions.py -n 1000000
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import duckdb

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from dbt_build import generate
from machine import describe_machine

from app import queries
from warehouse.marts import build_marts
from warehouse.snapshot import publish_snapshot

MODELS = ("submission_twins", "duplicate_submissions", "setting_duplicates")

FINGERPRINTS = """
update raw.runs set submission_normalized_sha256 = case
    when status <> 'success' then null
    when agent_id = 'agent-00' then md5(task_id)  -- deterministic: one answer per task
    when agent_id = 'agent-01' and hash(run_id) % 10 = 0 then md5(task_id)  -- shares with it
    else md5(run_id)
end
"""


def timed_twins(snapshot: Path, run_id: str, repeat: int = 5) -> float:
    """Median seconds of the run explorer's twins lookup (a fresh connection each time)."""
    seconds = []
    for _ in range(repeat):
        started = time.perf_counter()
        queries.submission_twins(snapshot, run_id)
        seconds.append(time.perf_counter() - started)
    return statistics.median(seconds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", "--runs", type=int, action="append", help="attempts (repeatable)")
    args = parser.parse_args()
    print(describe_machine())
    with tempfile.TemporaryDirectory(prefix="tmlbench-dup-bench-") as tmp:
        for n in args.runs or [100_000]:
            path = Path(tmp) / f"bench-{n}.duckdb"
            generate(path, n)
            with duckdb.connect(str(path)) as con:
                con.execute(FINGERPRINTS)
            result = build_marts(path, artifacts_dir=Path(tmp) / "dbt")
            own = {
                node.unique_id.split(".")[-1]: node.seconds
                for node in result.nodes
                if node.unique_id.startswith("model.") and node.unique_id.split(".")[-1] in MODELS
            }
            snapshot = Path(tmp) / f"bench-{n}.snapshot.duckdb"
            publish_snapshot(path, snapshot)
            with duckdb.connect(str(snapshot), read_only=True) as con:
                twins_rows, groups, largest = con.execute(
                    "select (select count(*) from marts.submission_twins), count(*), "
                    "max(n_attempts) from marts.duplicate_submissions"
                ).fetchone()
                in_largest = con.execute(
                    "select run_id from marts.submission_twins where agent_id = 'agent-00' "
                    "order by created_at desc limit 1"
                ).fetchone()[0]
                alone = con.execute(
                    "select run_id from raw.runs where agent_id = 'agent-05' and "
                    "status = 'success' limit 1"
                ).fetchone()[0]
            big = timed_twins(snapshot, in_largest)
            none = timed_twins(snapshot, alone)
            print(
                f"N={n:>9,}  dbt build {result.seconds:6.2f} s  "
                + "  ".join(f"{m} {own.get(m, float('nan')):.2f} s" for m in MODELS)
            )
            print(
                f"    {twins_rows:,} attempts with a twin in {groups:,} groups (largest "
                f"{largest:,}); twins lookup: largest group {big * 1000:.0f} ms "
                f"({queries.TWIN_ROWS} rows), no twins {none * 1000:.0f} ms"
            )


if __name__ == "__main__":
    main()
