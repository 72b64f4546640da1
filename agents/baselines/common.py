"""Run context shared by the built-in baselines: arguments, clock, task manifest, submission files.

Standard library only, on purpose: a baseline writes a placeholder submission through this
module *before* it pays for importing numpy/pandas/scikit-learn, so an attempt that is cut
short still leaves a valid file behind.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

SCORE_PREFIX = "local_validation_score:"
DEFAULT_BUDGET_SECONDS = 240.0


@dataclass(frozen=True)
class Task:
    """What the workspace's manifest.json says about the task (or a best guess without it)."""

    task_id: str
    task_type: str  # "binary" | "regression" | "unknown" (resolved later from the target)
    id_column: str
    target_column: str
    metric: str
    direction: str  # "maximize" | "minimize"
    submission_file: str
    submission_columns: tuple[str, ...]


class Clock:
    """Wall time since the process started, measured against the attempt's budget."""

    def __init__(self, budget_seconds: float) -> None:
        self.budget = float(budget_seconds)
        self._start = time.monotonic() - _seconds_since_process_start()

    def elapsed(self) -> float:
        return time.monotonic() - self._start

    def remaining(self) -> float:
        return self.budget - self.elapsed()

    def deadline(self, end_by: float = 0.8) -> float:
        """Elapsed seconds by which planned work must be done: ``end_by`` of the budget, and
        never closer than 3 s to its end (exit, last write, a slow machine)."""
        return min(end_by * self.budget, self.budget - 3.0)

    def can_start(
        self, estimated_seconds: float, *, start_by: float = 0.6, end_by: float = 0.8
    ) -> bool:
        """True if work estimated to take ``estimated_seconds`` may start now.

        New work starts only before ``start_by`` of the budget and only if it is expected to
        be done by ``deadline(end_by)``; the rest is the margin for predicting, writing the
        submission and the estimate being wrong.
        """
        now = self.elapsed()
        return now < start_by * self.budget and now + estimated_seconds < self.deadline(end_by)


@dataclass(frozen=True)
class RunContext:
    workspace: Path
    budget: float
    seed: int
    clock: Clock
    task: Task

    @property
    def submission_path(self) -> Path:
        return self.workspace / self.task.submission_file


def _seconds_since_process_start() -> float:
    """How long the interpreter has been running (Linux /proc; 0 where unavailable)."""
    try:
        stat = Path("/proc/self/stat").read_text()
        start_ticks = float(stat.rsplit(")", 1)[1].split()[19])
        uptime = float(Path("/proc/uptime").read_text().split()[0])
        age = uptime - start_ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return 0.0
    return min(max(age, 0.0), 60.0)


def cpu_allowance() -> int:
    """CPUs this process may really use: its affinity mask, capped by a cgroup v2 CPU quota."""
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    try:
        quota, period = Path("/sys/fs/cgroup/cpu.max").read_text().split()[:2]
        if quota != "max":
            cpus = min(cpus, max(1, int(int(quota) / int(period))))
    except (OSError, ValueError):
        pass
    return max(1, cpus)


def limit_threads(n_rows: int, *, small_table: int = 20_000) -> int:
    """Set the OpenMP thread count before scikit-learn is imported; returns it.

    More threads than allowed CPUs (or any parallelism on a small table, where the
    per-iteration synchronisation costs more than it saves) makes boosting many times slower
    on a busy or quota-limited machine.
    """
    if n_rows < small_table:
        os.environ["OMP_NUM_THREADS"] = "1"
    else:
        os.environ.setdefault("OMP_NUM_THREADS", str(cpu_allowance()))
    # idle threads sleep instead of spinning: spinning starves the busy ones on a shared machine
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    return int(os.environ["OMP_NUM_THREADS"])


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    env_budget = os.environ.get("TMLBENCH_BUDGET_SECONDS")
    env_seed = os.environ.get("TMLBENCH_SEED")
    parser = argparse.ArgumentParser(description="tmlbench built-in baseline")
    parser.add_argument("--workspace", type=Path, default=Path.cwd())
    parser.add_argument(
        "--budget", type=float, default=float(env_budget) if env_budget else DEFAULT_BUDGET_SECONDS
    )
    parser.add_argument("--seed", type=int, default=int(env_seed) if env_seed else 0)
    return parser.parse_args(argv)


def log(message: str) -> None:
    """Progress goes to stderr; stdout is kept for the score line."""
    print(message, file=sys.stderr, flush=True)


def print_score(value: float) -> None:
    print(f"{SCORE_PREFIX} {value:.6f}", flush=True)


def finish(score: float) -> None:
    """Print the score line and exit at once.

    The submission is already in place; skipping the interpreter's teardown of numpy, pandas
    and scikit-learn saves a noticeable share of a short budget on a busy machine.
    """
    print_score(score)
    sys.stderr.flush()
    os._exit(0)


def load_task(workspace: Path) -> Task:
    """Read manifest.json; without a usable one, guess from sample_submission.csv's header."""
    try:
        manifest = json.loads((workspace / "manifest.json").read_text(encoding="utf-8"))
        task = manifest["task"]
        metric = task.get("metric") or {}
        submission = task.get("submission") or {}
        id_column, target_column = task["id_column"], task["target_column"]
        return Task(
            task_id=str(task.get("id", "unknown")),
            task_type=str(task.get("task_type", "unknown")),
            id_column=id_column,
            target_column=target_column,
            metric=str(metric.get("name", "")),
            direction=str(metric.get("direction", "")),
            submission_file=str(submission.get("file", "submission.csv")),
            submission_columns=tuple(submission.get("columns") or (id_column, target_column)),
        )
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        log(f"manifest.json not usable ({exc!r}); guessing the task from sample_submission.csv")
    header = _csv_header(workspace / "sample_submission.csv")
    if len(header) < 2:
        raise SystemExit("neither manifest.json nor sample_submission.csv describes the submission")
    return Task(
        "unknown", "unknown", header[0], header[1], "", "", "submission.csv", tuple(header[:2])
    )


def _csv_header(path: Path) -> list[str]:
    try:
        with path.open(newline="", encoding="utf-8") as handle:
            return next(csv.reader(handle), [])
    except OSError:
        return []


def _read_column(path: Path, column: str) -> list[str] | None:
    try:
        with path.open(newline="", encoding="utf-8") as handle:
            reader = csv.reader(handle)
            header = next(reader, [])
            if column not in header:
                return None
            position = header.index(column)
            return [row[position] for row in reader if row]
    except (OSError, IndexError):
        return None


def write_atomic(path: Path, write: Callable[[Path], None]) -> None:
    """Call ``write(temp_path)`` and move the result over ``path`` in one step.

    Readers (the harness, a kill at any moment) see either the old file or the new one,
    never a half-written submission.
    """
    handle, temp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(handle)
    try:
        write(Path(temp))
        os.replace(temp, path)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise


def write_rows_atomic(path: Path, header: Sequence[str], rows: Iterable[Sequence[object]]) -> None:
    def write(temp: Path) -> None:
        with temp.open("w", newline="", encoding="utf-8") as handle:
            writer = csv.writer(handle)
            writer.writerow(header)
            writer.writerows(rows)

    write_atomic(path, write)


def write_placeholder_submission(ctx: RunContext) -> bool:
    """Write a constant submission from the test ids alone (no numpy/pandas needed).

    Binary tasks get 0.5; regression tasks get the sample submission's placeholder if it is a
    finite number, else 0. A better constant replaces this as soon as train.csv is read.
    """
    task = ctx.task
    ids = _read_column(ctx.workspace / "sample_submission.csv", task.id_column)
    placeholder = 0.0
    if ids is not None:
        values = _read_column(ctx.workspace / "sample_submission.csv", task.target_column) or []
        try:
            first = float(values[0])
            placeholder = first if first == first and abs(first) != float("inf") else 0.0
        except (IndexError, ValueError):
            pass
    else:
        ids = _read_column(ctx.workspace / "test.csv", task.id_column)
    if ids is None:
        log("placeholder submission skipped: no test ids found")
        return False
    value = 0.5 if task.task_type != "regression" else placeholder
    columns = task.submission_columns
    rows = ([i if column == task.id_column else value for column in columns] for i in ids)
    write_rows_atomic(ctx.submission_path, columns, rows)
    return True


def start() -> RunContext:
    """Parse the command line, read the manifest and leave a placeholder submission in place."""
    args = parse_args()
    clock = Clock(args.budget)
    for variable in ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):  # read when numpy loads
        os.environ.setdefault(variable, str(cpu_allowance()))
    workspace = args.workspace.resolve()
    os.chdir(workspace)
    task = load_task(workspace)
    ctx = RunContext(
        workspace=workspace, budget=args.budget, seed=args.seed, clock=clock, task=task
    )
    try:
        write_placeholder_submission(ctx)
    except OSError as exc:
        log(f"placeholder submission failed: {exc!r}")
    log(f"[{clock.elapsed():.1f}s] task {task.task_id} ({task.task_type}, {task.metric})")
    log(f"budget {ctx.budget:.0f}s, seed {ctx.seed}")
    return ctx
