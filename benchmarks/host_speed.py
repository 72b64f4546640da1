"""How fast this host is now, in the work the test suite does most: a gauge to read a suite's
time against.

    uv run python benchmarks/host_speed.py [--runs 5]

The reference machine's speed varies by the hour: on its slow hours the same work takes ~27 %
more CPU, and `make test` 1,100–1,300 s of pytest instead of ~900 s (tests/README.md, "Where
the time goes"). A suite's time says nothing about a change unless the hour is known; this says
it in under a minute, where a full run of the suite takes twenty.

Two fixed workloads, each in a fresh process, timed by the CPU the process used (user + system,
from the parent's rusage of its children: the interpreter's start-up counts, time spent waiting
for the CPU does not):

* ``definitions``: ``import orchestration.definitions``, what each Dagster process of the suite
  does first (Dagster, dagster-dbt and dbt, pandas, the definitions from the dbt manifest:
  needs `make manifest`);
* ``loop``: a pure-Python loop (the interpreter alone, no file or import).

Prints the median and the range of each, and the machine.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys

from machine import describe_machine  # benchmarks/machine.py

from runner.config import REPO_ROOT

WORKLOADS = {
    "definitions": "import orchestration.definitions",
    "loop": "sum(i * i for i in range(20_000_000))",
}


def cpu_of(code: str) -> float:
    """CPU seconds (user + system) a fresh ``python -c code`` used, start-up included."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    # -W ignore: Dagster's beta warnings, once per process, are not what is measured
    subprocess.run([sys.executable, "-W", "ignore", "-c", code], cwd=REPO_ROOT, check=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="runs of each workload (default 5)")
    runs = parser.parse_args().runs
    print(describe_machine())
    for name, code in WORKLOADS.items():
        times = [cpu_of(code) for _ in range(runs)]
        print(
            f"{name:12} median {statistics.median(times):.2f} s of CPU "
            f"({min(times):.2f}–{max(times):.2f} s, {runs} runs)"
        )


if __name__ == "__main__":
    main()
