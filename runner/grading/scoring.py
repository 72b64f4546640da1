"""Grading: validate the submission, then score it, deciding whose fault a non-finite score is."""

from __future__ import annotations

import os
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from runner.errors import HarnessError
from runner.grading.answers import prepare_answers
from runner.grading.fingerprint import normalized_sha256
from runner.grading.invalid import InvalidSubmission, clip, show
from runner.grading.validation import validate_guarded
from runner.specs import TaskSpec
from runner.tasks.metrics import Metric, check_task_metric


@dataclass(frozen=True)
class GradeResult:
    """Score of a valid submission: raw metric value and its higher-is-better form.

    ``submission_sha256``: sha256 of the file's bytes as read; ``normalized_sha256``: sha256
    of its content in the canonical form of ``runner.grading.fingerprint``.
    """

    score: float
    score_hib: float
    n_rows: int
    metric: str
    submission_sha256: str | None = None
    normalized_sha256: str | None = None


def validate_submission(
    path: str | os.PathLike[str],
    task: TaskSpec,
    answers: pd.DataFrame,
    *,
    max_bytes: int | None = None,
) -> pd.Series:
    """Check the submission strictly; return its predictions aligned to the answers' rows.

    The returned Series has the answers' index and the target column's name. Raises
    :class:`InvalidSubmission` for any problem with the file, ``HarnessError``/``SpecError``
    for problems with the answers or the task.
    """
    metric = check_task_metric(task)
    ans = prepare_answers(answers, task)
    preds, _ = validate_guarded(Path(path), task, metric, ans, max_bytes)
    return pd.Series(preds, index=answers.index, name=task.target_column)


def grade_submission(
    path: str | os.PathLike[str],
    task: TaskSpec,
    answers: pd.DataFrame,
    *,
    max_bytes: int | None = None,
) -> GradeResult:
    """Validate the submission, then score it with the task's metric against the answers.

    The result carries the submission's fingerprints (``runner.grading.fingerprint``); an
    :class:`InvalidSubmission` carries the byte hash when the file was read.
    """
    metric = check_task_metric(task)
    ans = prepare_answers(answers, task)
    preds, sha = validate_guarded(Path(path), task, metric, ans, max_bytes)
    target, n_rows, ids = ans.target, ans.n, ans.ids
    int_ids = None if ans.int_index is None else ans.int_index.to_numpy()
    del ans  # drop the id lookup table before the metric allocates its own temporaries
    try:
        score = _score(task, metric, target, preds, answers)
    except InvalidSubmission as exc:
        exc.submission_sha256 = sha
        raise
    # Only now: a refused score needs no canonical form (see runner.grading.fingerprint).
    normalized = normalized_sha256(task.id_column, task.target_column, ids, int_ids, preds)
    return GradeResult(
        score=score,
        score_hib=metric.higher_is_better(score),
        n_rows=n_rows,
        metric=metric.name,
        submission_sha256=sha,
        normalized_sha256=normalized,
    )


def _score(
    task: TaskSpec, metric: Metric, target: np.ndarray, preds: np.ndarray, answers: pd.DataFrame
) -> float:
    """The metric's finite score; else whose fault it is (see the module docstring)."""
    try:
        score = metric.score(target, preds)
    except Exception as exc:
        failure: Exception | None = exc
        score = float("nan")
    else:
        failure = None
        if np.isfinite(score):
            return score
    _check_reference(task, metric, target)  # HarnessError if the answers are to blame
    if failure is not None:
        raise InvalidSubmission(
            "invalid",
            f"Scoring these predictions with metric {metric.name!r} failed "
            f"({type(failure).__name__}: {clip(str(failure), 200)}), although it works for "
            f"predictions on the target's scale. Check the values in {task.target_column!r}.",
        ) from failure
    if not metric.overflow:  # a bounded metric never overflows on in-range predictions
        raise HarnessError(
            f"task {task.id!r}: metric {metric.name!r} gave a non-finite score {score} on "
            "validated predictions although it cannot overflow: a bug in the metric"
        )
    at = int(np.argmax(np.abs(preds)))
    largest = float(preds[at])
    test_id = answers[task.id_column].iloc[at]
    raise InvalidSubmission(
        "non_finite_score",
        f"Metric {metric.name!r} gives {score} on these predictions instead of a finite "
        f"score: it {metric.overflow}, and predictions as large as {largest:.6g} "
        f"(id {show(str(test_id))}) overflow its float64 arithmetic (whose largest number is "
        f"about 1.8e308). Every value in {task.target_column!r} is a finite number, but values "
        "this far from the target's scale cannot be scored: predict values on the scale of "
        f"{task.target_column!r} (see train.csv).",
    )


def _check_reference(task: TaskSpec, metric: Metric, target: np.ndarray) -> None:
    """HarnessError unless the metric is finite on the worst predictions in the answers' range.

    Each row is predicted with whichever of the answers' min and max is farther from its
    answer: every error is as large as an in-range prediction can make it, so if this score
    is finite, no in-range submission overflows, and a non-finite score is the predictions'.
    """
    lo, hi = float(target.min()), float(target.max())
    with np.errstate(over="ignore", invalid="ignore"):
        far = np.where(np.abs(target - lo) >= np.abs(target - hi), lo, hi)
    with warnings.catch_warnings(record=True) as caught:  # e.g. sklearn's "only one class"
        warnings.simplefilter("always")
        try:
            reference = metric.score(target, far)
        except Exception as exc:
            raise HarnessError(
                f"task {task.id!r}: metric {metric.name!r} cannot score predictions within the "
                f"answers' own range ({type(exc).__name__}: {exc}); the answers do not suit it"
            ) from exc
    if not np.isfinite(reference):
        why = (
            f"sklearn warns: {caught[0].message}"
            if caught
            else "the answers' scale makes it overflow"
        )
        raise HarnessError(
            f"task {task.id!r}: metric {metric.name!r} is {reference} even for predictions "
            f"within the answers' own range [{lo:.6g}, {hi:.6g}]: {why}"
        )
