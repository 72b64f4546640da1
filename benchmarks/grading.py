"""Benchmark: validate + score a large submission (default 1,000,000 regression rows).

Run:  uv run python benchmarks/grading.py [--rows N] [--repeats 5] [--kind regression|binary]
                                          [--ids int|float|text]

Writes answers and a shuffled submission to a temporary directory, then

* wall time: ``grade_submission`` (validate + score) in this process, after one warm-up call
  (so imports are not counted), median of ``--repeats`` runs; ``load_answers`` is timed apart;
* peak memory: a fresh child interpreter imports the grader (baseline RSS), loads the answers,
  grades once and reports its own peak RSS at each step, read from ``VmHWM`` in
  ``/proc/self/status``. ``getrusage(RUSAGE_SELF/RUSAGE_CHILDREN).ru_maxrss`` is *not* used:
  on Linux a child spawned with vfork+exec (what ``subprocess`` does) inherits the parent's
  RSS high-water mark into ``ru_maxrss``, so it would report this (large) process's peak.
  ``VmHWM`` belongs to the child's own address space, created fresh at exec.

Targets: <= 2 s and <= 500 MB peak RSS for 1,000,000 rows.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from machine import describe_machine  # noqa: E402  (benchmarks/machine.py)

from runner.grading import grade_submission, load_answers  # noqa: E402
from runner.specs import TaskSpec  # noqa: E402

TIME_TARGET_S = 2.0
MEM_TARGET_MB = 500.0


def make_task(kind: str) -> TaskSpec:
    binary = kind == "binary"
    return TaskSpec(
        id=f"bench-{kind}",
        title="grading benchmark",
        task_type="binary" if binary else "regression",
        id_column="id",
        target_column="target",
        feature_columns=("x",),
        metric={"name": "auc", "direction": "maximize"}
        if binary
        else {"name": "rmse", "direction": "minimize"},
        submission={"columns": ("id", "target")},
        split={"strategy": "stratified" if binary else "random", "test_fraction": 0.2, "seed": 0},
        source={},
        start_date=dt.date(2024, 1, 1),
    )


def write_files(directory: Path, rows: int, kind: str, ids_format: str) -> tuple[Path, Path]:
    rng = np.random.default_rng(0)
    ids = np.sort(rng.choice(5 * rows, size=rows, replace=False)) + 100_000  # sparse integer ids
    if kind == "binary":
        y = rng.integers(0, 2, size=rows).astype(float)
        pred = np.clip(0.3 * y + rng.uniform(0, 0.7, size=rows), 0, 1)
    else:
        y = rng.normal(50, 10, size=rows)
        pred = y + rng.normal(0, 3, size=rows)
    answer_ids = ids.astype(str) if ids_format != "text" else np.char.add("row-", ids.astype(str))
    pd.DataFrame({"id": answer_ids, "target": y}).to_csv(directory / "answers.csv", index=False)
    order = rng.permutation(rows)
    sub_ids = {"int": ids.astype(str), "float": ids.astype(float).astype(str), "text": answer_ids}[
        ids_format
    ]
    submission = directory / "submission.csv"
    pd.DataFrame({"id": sub_ids[order], "target": pred[order]}).to_csv(submission, index=False)
    return directory / "answers.csv", submission


def max_rss_mb(who: int = resource.RUSAGE_SELF) -> float:
    return resource.getrusage(who).ru_maxrss / 1024  # Linux: KiB


CHILD = """
import json, resource, sys, time
def rss():
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
out = {"rss_start_mb": rss()}
sys.path.insert(0, sys.argv[1])
from runner.grading import grade_submission, load_answers
from runner.specs import TaskSpec
import sklearn.metrics  # the metric's lazy import, so the baseline includes it
task = TaskSpec.model_validate_json(sys.argv[2])
out["rss_baseline_mb"] = rss()
answers = load_answers(sys.argv[3], task)
out["rss_after_answers_mb"] = rss()
t = time.perf_counter()
result = grade_submission(sys.argv[4], task, answers)
out["grade_s_cold"] = time.perf_counter() - t
out["rss_peak_mb"] = rss()
out["score"] = result.score
print(json.dumps(out))
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--kind", choices=("regression", "binary"), default="regression")
    parser.add_argument("--ids", choices=("int", "float", "text"), default="int")
    args = parser.parse_args()
    task = make_task(args.kind)

    with tempfile.TemporaryDirectory(prefix="tmlbench-grading-bench-") as tmp:
        answers_path, submission = write_files(Path(tmp), args.rows, args.kind, args.ids)
        size_mb = submission.stat().st_size / 1e6

        t = time.perf_counter()
        answers = load_answers(answers_path, task)
        load_s = time.perf_counter() - t
        grade_submission(submission, task, answers)  # warm-up: lazy imports, page cache
        times = []
        for _ in range(args.repeats):
            t = time.perf_counter()
            result = grade_submission(submission, task, answers)
            times.append(time.perf_counter() - t)
        median_s = statistics.median(times)

        proc = subprocess.run(
            [
                sys.executable,
                "-c",
                CHILD,
                str(ROOT),
                task.model_dump_json(),
                str(answers_path),
                str(submission),
            ],
            capture_output=True,
            text=True,
            check=True,
        )
        child = json.loads(proc.stdout)

    ok = median_s <= TIME_TARGET_S and child["rss_peak_mb"] <= MEM_TARGET_MB
    print(
        f"grading {args.rows:,} {args.kind} rows ({args.ids} ids, {size_mb:.1f} MB CSV): "
        f"validate+score median {median_s:.3f} s over {args.repeats} "
        f"(min {min(times):.3f}, max {max(times):.3f}; cold in fresh process "
        f"{child['grade_s_cold']:.3f} s); load_answers {load_s:.3f} s; "
        f"peak RSS {child['rss_peak_mb']:.0f} MB in a fresh process (interpreter+imports baseline "
        f"{child['rss_baseline_mb']:.0f} MB, after load_answers "
        f"{child['rss_after_answers_mb']:.0f} MB; "
        f"bare interpreter {child['rss_start_mb']:.0f} MB; this harness process "
        f"{max_rss_mb():.0f} MB); {result.metric}={result.score:.6g}; "
        f"targets <= {TIME_TARGET_S:g} s, <= {MEM_TARGET_MB:g} MB: {'PASS' if ok else 'FAIL'}"
    )
    print(f"machine: {describe_machine()}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
