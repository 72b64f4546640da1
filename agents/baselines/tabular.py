"""Tables of the workspace: loading, validation split, submission writing (numpy/pandas)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

import common
import metrics
import numpy as np
import pandas as pd


@dataclass
class Tables:
    task: common.Task
    train: pd.DataFrame  # features only (id and target removed)
    test: pd.DataFrame  # same feature columns as ``train``
    y: np.ndarray  # 0/1 for binary tasks, float for regression
    test_ids: pd.Series
    metric: str
    direction: str


def load_tables(ctx: common.RunContext) -> Tables:
    """Read train.csv/test.csv, encode the target and resolve the metric to validate with."""
    task = ctx.task
    ids_as_text = {task.id_column: str}  # written back verbatim (leading zeros, formatting)
    train = pd.read_csv(ctx.workspace / "train.csv", low_memory=False, dtype=ids_as_text)
    test = pd.read_csv(ctx.workspace / "test.csv", low_memory=False, dtype=ids_as_text)
    if task.target_column not in train.columns:
        raise SystemExit(f"train.csv has no target column {task.target_column!r}")
    train = train[train[task.target_column].notna()].reset_index(drop=True)
    target = train.pop(task.target_column)
    task_type = task.task_type
    if task_type not in ("binary", "regression"):
        task_type = "binary" if target.nunique() <= 2 else "regression"
        task = replace(task, task_type=task_type)
    y = encode_binary(target) if task_type == "binary" else pd.to_numeric(target).to_numpy(float)
    features = [c for c in train.columns if c != task.id_column and c in test.columns]
    test_ids = (
        test[task.id_column] if task.id_column in test.columns else pd.Series(range(len(test)))
    )
    metric, direction = metrics.resolve(task.metric, task_type)
    if task.direction in ("maximize", "minimize") and metric == task.metric.lower():
        direction = task.direction
    return Tables(task, train[features], test[features], y, test_ids, metric, direction)


def encode_binary(target: pd.Series) -> np.ndarray:
    """0/1 labels; the positive class is the larger label (1, True, 'yes', 'true', 'Y')."""
    labels = sorted(target.unique(), key=lambda v: (str(type(v)), v))
    positive = labels[-1]
    return (target == positive).to_numpy(np.int8)


def split_indices(y: np.ndarray, task_type: str, seed: int, valid_fraction: float = 0.2):
    """Seeded hold-out split (stratified for binary tasks): (train_index, valid_index)."""
    rng = np.random.default_rng(seed)
    if task_type == "binary":
        parts = []
        for label in np.unique(y):
            members = rng.permutation(np.flatnonzero(y == label))
            take = max(1, round(valid_fraction * members.size)) if members.size > 1 else 0
            parts.append(members[:take])
        valid = np.sort(np.concatenate(parts))
    else:
        order = rng.permutation(y.size)
        valid = np.sort(order[: max(1, round(valid_fraction * y.size))])
    mask = np.zeros(y.size, dtype=bool)
    mask[valid] = True
    return np.flatnonzero(~mask), valid


def finalize_predictions(tables: Tables, predictions: np.ndarray, fallback: float) -> np.ndarray:
    """Finite predictions of the right range: probabilities in [0, 1] for binary tasks."""
    values = np.asarray(predictions, dtype=float).reshape(-1)
    values = np.where(np.isfinite(values), values, fallback)
    if tables.task.task_type == "binary":
        values = np.clip(values, 0.0, 1.0)
    return values


def write_submission(
    ctx: common.RunContext, tables: Tables, predictions: np.ndarray, fallback: float
) -> None:
    """Atomically replace the submission with one row per test id, in test order."""
    values = finalize_predictions(tables, predictions, fallback)
    if values.size != len(tables.test_ids):
        raise ValueError(f"{values.size} predictions for {len(tables.test_ids)} test rows")
    task = tables.task
    frame = pd.DataFrame({task.id_column: tables.test_ids.to_numpy(), task.target_column: values})
    frame = frame[list(task.submission_columns)]

    def write(temp: Path) -> None:
        frame.to_csv(temp, index=False)

    common.write_atomic(ctx.submission_path, write)


def write_prior_submission(ctx: common.RunContext, tables: Tables) -> float:
    """Replace the placeholder with the training prior or mean; returns that constant."""
    prior = constant_prediction(tables)
    write_submission(ctx, tables, np.full(len(tables.test_ids), prior), prior)
    return prior


def constant_prediction(tables: Tables, y: np.ndarray | None = None) -> float:
    """The training prior (binary) or mean (regression; the median when validated by MAE)."""
    y = tables.y if y is None else y
    if not y.size:
        return 0.5 if tables.task.task_type == "binary" else 0.0
    return float(np.median(y)) if tables.metric == "mae" else float(np.mean(y))
