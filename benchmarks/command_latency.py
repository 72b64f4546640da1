"""How long a ``tmlbench`` command takes from the shell prompt to its exit, and its peak memory.

    uv run python benchmarks/command_latency.py [--runs 10] [--warehouse FILE]

Each command runs ``--runs`` times as a fresh process (the installed ``tmlbench`` script, as a
person types it); shown are the median and the slowest wall time and the peak RSS:

* ``tmlbench --help``: start-up alone (every command module and plugin is loaded to list them);
* ``tmlbench sql "select 1"`` on the warehouse, next to the same query through DuckDB's Python
  API in a bare interpreter: the floor any command reading the warehouse sits on;
* ``tmlbench leaderboard --suite demo``: the suite's rows of the marts, printed.

The warehouse is the one ``make run`` builds (default: $TMLBENCH_WAREHOUSE or
warehouse/tmlbench.duckdb), with the demo suite's marts. Targets (issue 14): ``--help``
<= 0.3 s, ``sql`` <= 0.5 s, ``leaderboard`` <= 1 s.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from machine import describe_machine

from warehouse.db import warehouse_path

TMLBENCH = str(Path(sys.executable).parent / "tmlbench")
DIRECT_QUERY = (
    "import duckdb, sys; con = duckdb.connect(sys.argv[1], read_only=True); "
    "con.execute('select 1').fetchall()"
)


@dataclass(frozen=True)
class Timing:
    seconds: list[float]  # wall time per run
    cpu_seconds: list[float]  # user + system time per run: what the load of other work leaves alone
    peak_rss_mb: float

    def line(self, label: str, target: float | None) -> str:
        goal = f" (target <= {target:g} s)" if target else ""
        return (
            f"{label:<44} median {statistics.median(self.seconds):5.2f} s, "
            f"slowest {max(self.seconds):5.2f} s, CPU median "
            f"{statistics.median(self.cpu_seconds):5.2f} s, peak RSS {self.peak_rss_mb:4.0f} MB{goal}"
        )


def time_command(argv: list[str], runs: int) -> Timing:
    """Wall and CPU time of ``runs`` fresh processes, the largest peak RSS among them (os.wait4)."""
    seconds, cpu_seconds, peak_kb = [], [], 0
    for _ in range(runs):
        started = time.perf_counter()
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        _, status, usage = os.wait4(proc.pid, 0)
        seconds.append(time.perf_counter() - started)
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode:
            raise SystemExit(f"{' '.join(argv)} failed: {proc.stderr.read().decode()}")
        proc.stderr.close()
        cpu_seconds.append(usage.ru_utime + usage.ru_stime)
        peak_kb = max(peak_kb, usage.ru_maxrss)
    return Timing(seconds, cpu_seconds, peak_kb / 1024)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument(
        "--warehouse", type=Path, default=warehouse_path(), help="built by `make run`"
    )
    args = parser.parse_args()
    if not args.warehouse.is_file():
        raise SystemExit(f"no warehouse at {args.warehouse}: run `make run` or pass --warehouse")
    db = str(args.warehouse)
    print(describe_machine())
    print(f"load average before: {os.getloadavg()[0]:.2f}; {args.runs} runs each; warehouse {db}")
    cases = [
        ("python -c pass (the interpreter alone)", [sys.executable, "-c", "pass"], None),
        ("tmlbench --help", [TMLBENCH, "--help"], 0.3),
        (
            "duckdb 'select 1' from Python (the floor)",
            [sys.executable, "-c", DIRECT_QUERY, db],
            None,
        ),
        ('tmlbench sql "select 1"', [TMLBENCH, "sql", "select 1", "--warehouse", db], 0.5),
        (
            "tmlbench leaderboard --suite demo",
            [TMLBENCH, "leaderboard", "--suite", "demo", "--warehouse", db],
            1.0,
        ),
    ]
    for label, argv, target in cases:
        print(time_command(argv, args.runs).line(label, target), flush=True)
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
