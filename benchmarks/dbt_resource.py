"""What the Dagster dbt resource costs before dbt starts: dagster-dbt's own resource against ours.

    uv run python benchmarks/dbt_resource.py [--runs 3]

Each sample is one dbt command (``dbt --version``, the cheapest) through a fresh resource's
``cli()``, in a fresh process, as a run worker makes it: its wall time and the CPU of the process
and its children. dagster-dbt's ``DbtCliResource`` first runs ``dbt --version`` itself and loads
dbt's project and macros to make an adapter; ``orchestration.resources.WarehouseDbt`` does
neither. The difference is what every Dagster run that builds the marts saves. Target: none;
the command's own cost is the floor.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from machine import describe_machine  # benchmarks/machine.py

REPO = Path(__file__).resolve().parent.parent

# One sample, in a process of its own (imports as a run worker has them, no adapter cached).
SAMPLE = """
import json, resource, sys, time
from pathlib import Path
from dagster_dbt import DbtCliResource
from orchestration.resources import dbt_project, dbt_resource

def cpu():
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime

ours = dbt_resource()
if sys.argv[1] == "tmlbench":
    dbt = ours
else:  # dagster-dbt's own, configured as ours is
    dbt = DbtCliResource(project_dir=ours.project_dir, profiles_dir=ours.profiles_dir,
                         dbt_executable=ours.dbt_executable)
manifest = dbt_project().manifest_path
started, used = time.perf_counter(), cpu()
assert dbt.cli(["--version"], manifest=manifest, target_path=Path(sys.argv[2])).is_successful()
print(json.dumps({"wall": time.perf_counter() - started, "cpu": cpu() - used}))
"""


def sample(kind: str, home: str) -> dict[str, float]:
    env = {**os.environ, "DAGSTER_HOME": home}
    target = tempfile.mkdtemp(dir=home)  # not a folder in dbt_project/target, cli()'s default
    out = subprocess.run(
        [sys.executable, "-c", SAMPLE, kind, target],
        cwd=REPO, env=env, capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    result: dict[str, float] = json.loads(out.strip().splitlines()[-1])
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    if not (REPO / "dbt_project" / "target" / "manifest.json").is_file():
        raise SystemExit("no dbt manifest: make manifest")
    print(describe_machine())
    with tempfile.TemporaryDirectory(prefix="tmlbench-bench-dbt-") as home:
        samples: dict[str, list[dict[str, float]]] = {"dagster-dbt": [], "tmlbench": []}
        for _ in range(args.runs):  # interleaved: a host's drift hits both alike
            for kind, taken in samples.items():
                taken.append(sample(kind, home))
    for kind, taken in samples.items():
        wall = statistics.median(s["wall"] for s in taken)
        cpu = statistics.median(s["cpu"] for s in taken)
        print(f"{kind}: `dbt --version` through cli(): median {wall:.2f} s wall, {cpu:.2f} s CPU "
              f"({args.runs} runs)")  # fmt: skip
    print(f"load average {', '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
