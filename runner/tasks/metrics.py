"""Registry of scoring metrics, looked up by the name a task spec gives (``metric.name``).

Every metric is computed with scikit-learn (imported lazily, on first score, so importing
this module stays cheap). ``higher_is_better`` turns a raw score into the benchmark's
common orientation: maximize metrics stay as they are, minimize metrics are negated.

Scores are float64 arithmetic, as the competitions compute them: finite predictions far
from the target's scale can overflow (``rmse`` squares errors, so one prediction of 1e160
gives inf). :meth:`Metric.score` returns that non-finite value quietly (no numpy warning);
the grader decides whose fault it is (``runner.grading``). ``Metric.overflow`` says, for
people, how a metric can overflow ("" if its predictions are bounded and it cannot).

>>> m = get_metric("rmse")
>>> m.direction, m.higher_is_better(0.5)
('minimize', -0.5)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from runner.errors import SpecError
from runner.tasks.vocabulary import Direction, TaskType

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

    from runner.specs import TaskSpec


@dataclass(frozen=True)
class Metric:
    """One metric: how to compute it and which way is better.

    ``needs_probabilities``: predictions must lie in [0, 1] (the grader rejects others).
    ``task_types``: the task types the metric makes sense for.
    ``overflow``: how large predictions make its float64 arithmetic overflow, completing
    "it ..." in a message (e.g. "squares the errors and sums them"); "" if it cannot.
    """

    name: str
    direction: Direction
    needs_probabilities: bool
    task_types: frozenset[TaskType]
    description: str
    fn: Callable[[np.ndarray, np.ndarray], float] = field(repr=False, compare=False)
    overflow: str = ""

    def score(self, y_true: ArrayLike, y_pred: ArrayLike) -> float:
        """Raw metric value of ``y_pred`` against ``y_true`` (same length, same order)."""
        yt = np.asarray(y_true, dtype=np.float64)
        yp = np.asarray(y_pred, dtype=np.float64)
        if yt.shape != yp.shape or yt.ndim != 1:
            raise ValueError(
                f"metric {self.name!r}: y_true and y_pred must be 1-D and the same length, "
                f"got shapes {yt.shape} and {yp.shape}"
            )
        # Overflow to inf (or inf - inf = nan) is an outcome the caller judges, not a warning.
        with np.errstate(over="ignore", invalid="ignore", divide="ignore", under="ignore"):
            return float(self.fn(yt, yp))

    def higher_is_better(self, score: float) -> float:
        """``score`` oriented so that larger is better (minimize metrics are negated)."""
        return float(score) if self.direction == "maximize" else -float(score)

    @property
    def maximize(self) -> bool:
        return self.direction == "maximize"


def _auc(y_true: np.ndarray, y_pred: np.ndarray) -> float:
    from sklearn.metrics import roc_auc_score

    return float(roc_auc_score(y_true, y_pred))


def _logloss(y_true: np.ndarray, y_pred: np.ndarray) -> float:
    from sklearn.metrics import log_loss

    # Clip so that a confident wrong 0/1 prediction costs a large but finite loss.
    eps = np.finfo(np.float64).eps
    return float(log_loss(y_true, np.clip(y_pred, eps, 1 - eps), labels=[0, 1]))


def _accuracy(y_true: np.ndarray, y_pred: np.ndarray) -> float:
    from sklearn.metrics import accuracy_score

    # Predictions may be labels (0/1) or probabilities of class 1: threshold at 0.5.
    return float(accuracy_score(y_true.astype(np.int64), (y_pred >= 0.5).astype(np.int64)))


def _rmse(y_true: np.ndarray, y_pred: np.ndarray) -> float:
    from sklearn.metrics import root_mean_squared_error

    return float(root_mean_squared_error(y_true, y_pred))


def _mae(y_true: np.ndarray, y_pred: np.ndarray) -> float:
    from sklearn.metrics import mean_absolute_error

    return float(mean_absolute_error(y_true, y_pred))


def _r2(y_true: np.ndarray, y_pred: np.ndarray) -> float:
    from sklearn.metrics import r2_score

    return float(r2_score(y_true, y_pred))


_BINARY: frozenset[TaskType] = frozenset({"binary"})
_REGRESSION: frozenset[TaskType] = frozenset({"regression"})

METRICS: dict[str, Metric] = {
    m.name: m
    for m in (
        Metric(
            "auc",
            "maximize",
            True,
            _BINARY,
            "area under the ROC curve (sklearn roc_auc_score)",
            _auc,
        ),
        Metric(
            "logloss",
            "minimize",
            True,
            _BINARY,
            "binary cross-entropy (sklearn log_loss)",
            _logloss,
        ),
        Metric(
            "accuracy",
            "maximize",
            False,
            _BINARY,
            "share of correct labels; predictions >= 0.5 count as class 1 (sklearn accuracy_score)",
            _accuracy,
        ),
        Metric(
            "rmse",
            "minimize",
            False,
            _REGRESSION,
            "root mean squared error",
            _rmse,
            overflow="squares the errors and sums them",
        ),
        Metric(
            "mae",
            "minimize",
            False,
            _REGRESSION,
            "mean absolute error",
            _mae,
            overflow="sums the absolute errors",
        ),
        Metric(
            "r2",
            "maximize",
            False,
            _REGRESSION,
            "coefficient of determination (sklearn r2_score)",
            _r2,
            overflow="squares the errors and sums them",
        ),
    )
}


def trivial_score(metric: Metric, train_target: ArrayLike, holdout_target: ArrayLike) -> float:
    """The trivial prediction's score: the training mean predicted for every holdout row.

    For a binary task the mean of the 0/1 labels is the class prior, a probability, so every
    metric scores it as it scores a submission: AUC ranks a constant as a coin flip (exactly
    0.5), log loss is the prior's cross-entropy, accuracy thresholds it at 0.5 (the training
    majority class). For regression it is the training mean's RMSE, MAE or R². Computed at
    preparation (``runner.tasks.preparation``) from data no agent sees or changes: the floor the primary
    points are anchored at (dbt_project/README.md, "Normalization").
    """
    holdout = np.asarray(holdout_target, dtype=np.float64)
    constant = float(np.mean(np.asarray(train_target, dtype=np.float64)))
    return metric.score(holdout, np.full(holdout.shape, constant))


def known_metrics() -> list[str]:
    return sorted(METRICS)


def get_metric(name: str) -> Metric:
    """The registered metric called ``name``; SpecError naming the known ones otherwise."""
    try:
        return METRICS[name]
    except (KeyError, TypeError):
        raise SpecError(
            f"unknown metric {name!r}; known metrics: {', '.join(known_metrics())}"
        ) from None


def check_task_metric(task: TaskSpec) -> Metric:
    """The task's metric, once its name, direction and task type agree with the registry."""
    try:
        metric = get_metric(task.metric.name)
    except SpecError as exc:
        raise SpecError(f"task {task.id!r}: {exc}") from None
    if task.metric.direction != metric.direction:
        raise SpecError(
            f"task {task.id!r}: metric {metric.name!r} is declared with direction "
            f"{task.metric.direction!r}, but {metric.name!r} must be {metric.direction!r}"
        )
    if task.task_type not in metric.task_types:
        raise SpecError(
            f"task {task.id!r}: metric {metric.name!r} is for "
            f"{'/'.join(sorted(metric.task_types))} tasks, not task_type {task.task_type!r}"
        )
    return metric
