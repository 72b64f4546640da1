"""Validation metrics by name, in numpy only (the constant baseline never imports scikit-learn)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

_EPS = 1e-15


def auc(y: np.ndarray, p: np.ndarray) -> float:
    """ROC AUC via the rank-sum (Mann-Whitney) statistic; tied scores count one half."""
    y = np.asarray(y).astype(bool)
    n_pos = int(y.sum())
    n_neg = y.size - n_pos
    if n_pos == 0 or n_neg == 0:
        return 0.5
    _, inverse, counts = np.unique(
        np.asarray(p, dtype=float), return_inverse=True, return_counts=True
    )
    # average 1-based rank of each distinct value
    ends = np.cumsum(counts)
    average_rank = ends - (counts - 1) / 2.0
    rank_sum = average_rank[inverse][y].sum()
    return float((rank_sum - n_pos * (n_pos + 1) / 2.0) / (n_pos * n_neg))


def rmse(y: np.ndarray, p: np.ndarray) -> float:
    return float(np.sqrt(np.mean((np.asarray(y, float) - np.asarray(p, float)) ** 2)))


def mae(y: np.ndarray, p: np.ndarray) -> float:
    return float(np.mean(np.abs(np.asarray(y, float) - np.asarray(p, float))))


def logloss(y: np.ndarray, p: np.ndarray) -> float:
    y = np.asarray(y, float)
    p = np.clip(np.asarray(p, float), _EPS, 1 - _EPS)
    return float(-np.mean(y * np.log(p) + (1 - y) * np.log(1 - p)))


def accuracy(y: np.ndarray, p: np.ndarray) -> float:
    return float(np.mean((np.asarray(p, float) >= 0.5) == np.asarray(y).astype(bool)))


def r2(y: np.ndarray, p: np.ndarray) -> float:
    y = np.asarray(y, float)
    total = float(np.sum((y - y.mean()) ** 2))
    residual = float(np.sum((y - np.asarray(p, float)) ** 2))
    return 1.0 - residual / total if total > 0 else 0.0


METRICS: dict[str, tuple[Callable[[np.ndarray, np.ndarray], float], str]] = {
    "auc": (auc, "maximize"),
    "roc_auc": (auc, "maximize"),
    "rmse": (rmse, "minimize"),
    "mae": (mae, "minimize"),
    "logloss": (logloss, "minimize"),
    "log_loss": (logloss, "minimize"),
    "accuracy": (accuracy, "maximize"),
    "r2": (r2, "maximize"),
}


def resolve(name: str, task_type: str) -> tuple[str, str]:
    """The metric to validate with and its direction; unknown names fall back by task type."""
    key = name.lower()
    if key in METRICS:
        return key, METRICS[key][1]
    fallback = "auc" if task_type == "binary" else "rmse"
    return fallback, METRICS[fallback][1]


def score(name: str, y: np.ndarray, p: np.ndarray) -> float:
    return METRICS[name][0](y, p)


def better(a: float, b: float | None, direction: str) -> bool:
    """True if score ``a`` beats ``b`` (``None`` means no score yet)."""
    if b is None:
        return True
    return a > b if direction == "maximize" else a < b
