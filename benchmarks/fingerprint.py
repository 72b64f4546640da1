"""Benchmark: the submission fingerprints on large submissions (default 100,000 and 1,000,000 rows).

Run:  uv run python benchmarks/fingerprint.py [--rows 100000 1000000] [--repeats 5]
                                             [--ids int|text]

Writes answers and a shuffled submission (pandas' to_csv, as agents write them) to a temporary
directory, validates it once to get the grader's aligned predictions, then times, as the
median of ``--repeats`` runs after one warm-up each:

* ``byte hash``: sha256 of the file's bytes in memory (what ``grade_submission`` adds to its
  read);
* ``normalized``: ``runner.grading.fingerprint.normalized_sha256`` (sort by id, canonical lines,
  sha256), what ``grade_submission`` adds after scoring;
* ``repr form``: the same canonical lines with each value written by Python's ``repr``
  instead of its bits: the alternative runner.grading.fingerprint's docstring explains it did not take;
* ``file hash``: ``hash_submission_file`` (guarded open, 1 MiB reads), for attempts that are
  not graded;
* ``grade``: ``grade_submission`` as a whole (validation, scoring and both fingerprints), for
  scale.

Target: both fingerprints together <= 0.5 s for 1,000,000 rows with integer ids.
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from machine import describe_machine  # noqa: E402  (benchmarks/machine.py)

from runner import grading  # noqa: E402
from runner.grading import (  # noqa: E402
    default_max_bytes,
    grade_submission,
    hash_submission_file,
    load_answers,
    validate_submission,
)
from runner.grading.fingerprint import normalized_sha256  # noqa: E402
from runner.specs import TaskSpec  # noqa: E402

TARGET_S_PER_MILLION = 0.5


def make_task() -> TaskSpec:
    return TaskSpec(
        id="bench-fingerprint",
        title="fingerprint benchmark",
        task_type="regression",
        id_column="id",
        target_column="target",
        feature_columns=("x",),
        metric={"name": "rmse", "direction": "minimize"},
        submission={"columns": ("id", "target")},
        split={"strategy": "random", "test_fraction": 0.2, "seed": 0},
        source={},
        start_date=dt.date(2024, 1, 1),
    )


def write_files(directory: Path, rows: int, ids_format: str) -> tuple[Path, Path]:
    rng = np.random.default_rng(0)
    ids = rng.permutation(np.sort(rng.choice(5 * rows, size=rows, replace=False)) + 100_000)
    y = rng.normal(50, 10, size=rows)
    pred = y + rng.normal(0, 3, size=rows)
    text_ids = ids.astype(str) if ids_format == "int" else np.char.add("row-", ids.astype(str))
    pd.DataFrame({"id": text_ids, "target": y}).to_csv(directory / "answers.csv", index=False)
    order = rng.permutation(rows)
    submission = directory / "submission.csv"
    pd.DataFrame({"id": text_ids[order], "target": pred[order]}).to_csv(submission, index=False)
    return directory / "answers.csv", submission


def repr_form_sha256(
    id_column: str, target_column: str, ids, int_ids, predictions: np.ndarray
) -> str:
    """The canonical lines with ``repr`` values: Python formats each value (not taken)."""
    if int_ids is not None:
        order = np.argsort(int_ids)
        keys = int_ids[order].tolist()
    else:
        order = np.asarray(ids.to_pylist(), dtype=object).argsort()
        keys = np.asarray(ids.to_pylist(), dtype=object)[order].tolist()
    values = (predictions[order] + 0.0).tolist()
    digest = hashlib.sha256(f"{id_column},{target_column}\n".encode())
    step = 1 << 16
    for lo in range(0, len(values), step):
        lines = [
            f"{k},{v!r}\n"
            for k, v in zip(keys[lo : lo + step], values[lo : lo + step], strict=True)
        ]
        digest.update("".join(lines).encode())
    return digest.hexdigest()


def median_time(fn: Callable[[], object], repeats: int) -> float:
    fn()  # warm-up: lazy imports, page cache
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def bench(rows: int, ids_format: str, repeats: int) -> dict[str, float]:
    task = make_task()
    with tempfile.TemporaryDirectory(prefix="tmlbench-fingerprint-bench-") as tmp:
        answers_path, submission = write_files(Path(tmp), rows, ids_format)
        answers = load_answers(answers_path, task)
        prepared = grading._prepare_answers(answers, task)  # the grader's own id tables
        ids = prepared.ids
        int_ids = None if prepared.int_index is None else prepared.int_index.to_numpy()
        preds = validate_submission(submission, task, answers).to_numpy()
        data = submission.read_bytes()
        cap = default_max_bytes(rows)
        result = grade_submission(submission, task, answers)
        assert result.normalized_sha256 == normalized_sha256("id", "target", ids, int_ids, preds)
        assert result.submission_sha256 == hash_submission_file(submission, max_bytes=cap)
        return {
            "mb": len(data) / 1e6,
            "byte hash": median_time(lambda: hashlib.sha256(data).hexdigest(), repeats),
            "normalized": median_time(
                lambda: normalized_sha256("id", "target", ids, int_ids, preds), repeats
            ),
            "repr form": median_time(
                lambda: repr_form_sha256("id", "target", ids, int_ids, preds), repeats
            ),
            "file hash": median_time(
                lambda: hash_submission_file(submission, max_bytes=cap), repeats
            ),
            "grade": median_time(lambda: grade_submission(submission, task, answers), repeats),
        }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--ids", choices=("int", "text"), default="int")
    args = parser.parse_args()

    ok = True
    for rows in args.rows:
        t = bench(rows, args.ids, args.repeats)
        both = t["byte hash"] + t["normalized"]
        per = {k: 1e3 * v * 100_000 / rows for k, v in t.items() if k != "mb"}
        print(
            f"{rows:,} rows ({args.ids} ids, {t['mb']:.1f} MB CSV), median of {args.repeats}: "
            + "; ".join(
                f"{k} {1e3 * t[k]:.1f} ms ({per[k]:.1f} ms/100k rows)"
                for k in ("byte hash", "normalized", "repr form", "file hash", "grade")
            )
            + f"; both fingerprints {1e3 * both:.1f} ms = {100 * both / t['grade']:.0f}% of "
            f"grade; repr form {t['repr form'] / t['normalized']:.1f}x the normalized hash"
        )
        if args.ids == "int":
            ok &= both * 1_000_000 / rows <= TARGET_S_PER_MILLION
    if args.ids == "int":
        print(
            f"target: both fingerprints <= {TARGET_S_PER_MILLION:g} s per 1,000,000 rows: "
            f"{'PASS' if ok else 'FAIL'}"
        )
    print(f"machine: {describe_machine()}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
