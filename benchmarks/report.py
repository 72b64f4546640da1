"""Time of ``write_report`` (what ``tmlbench report`` runs) for the demo suite's snapshot and for
a warehouse of N synthetic attempts.

The demo: the hand-made snapshot of the dashboard's tests (tools/dashboard_snapshot.py:
three agents, three tasks, two budgets). The big one: N attempts from the generator of
benchmarks/dbt_build.py (20 agents × tasks × budgets, suite "bench"), marts built by dbt; the
report reads them read-only. Timed: from opening the connection to the manifest written (reads,
every figure rendered to SVG and PNG, the tables, report.html), twice (the second run has the
renderer's JavaScript runtime warm, as a long-lived process would). Target: <= 10 s at 100k.

    uv run python benchmarks/report.py              # demo and N = 100,000
    uv run python benchmarks/report.py -n 1000000
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import duckdb
from dbt_build import generate
from machine import describe_machine

from tools.dashboard_snapshot import build_snapshot
from warehouse.marts import build_marts
from warehouse.report import write_report

TARGET = 10.0  # seconds at 100k attempts


def timed_reports(database: Path, suite: str, out: Path) -> list[float]:
    times = []
    for i in range(2):
        started = time.perf_counter()
        with duckdb.connect(str(database), read_only=True) as con:
            manifest = write_report(con, suite, out / f"run{i}")
        times.append(time.perf_counter() - started)
    print(f"  {len(manifest.files)} files, empty figures: {list(manifest.empty_figures)}")
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", "--runs", type=int, action="append", help="attempts (repeatable)")
    args = parser.parse_args()
    sizes = args.runs or [100_000]
    print(describe_machine())
    with tempfile.TemporaryDirectory(prefix="tmlbench-report-bench-") as tmp:
        root = Path(tmp)
        snapshot = build_snapshot(root / "demo")
        first, second = timed_reports(snapshot, "demo", root / "demo-out")
        print(f"demo suite: first {first:.2f} s, again {second:.2f} s")
        for n in sizes:
            warehouse = root / f"bench-{n}.duckdb"
            generate(warehouse, n)
            build_marts(warehouse, artifacts_dir=root / f"dbt-{n}")
            first, second = timed_reports(warehouse, "bench", root / f"out-{n}")
            verdict = "ok" if first <= TARGET or n > 100_000 else f"over the {TARGET:.0f} s target"
            print(f"{n:,} attempts: first {first:.2f} s, again {second:.2f} s ({verdict})")


if __name__ == "__main__":
    main()
