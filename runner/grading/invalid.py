"""How a submission is refused: a stable reason code and a message a person can act on."""

from __future__ import annotations

from runner.specs import TaskSpec
from runner.tasks.metrics import Metric

REASON_CODES: tuple[str, ...] = (
    "missing_file",
    "not_regular_file",
    "too_large",
    "unreadable_csv",
    "missing_id_column",
    "wrong_columns",
    "wrong_row_count",
    "missing_ids",
    "duplicate_ids",
    "id_mismatch",
    "non_numeric_predictions",
    "missing_predictions",
    "non_finite_predictions",
    "out_of_range_predictions",
    "non_finite_score",
    "invalid",
)


class InvalidSubmission(Exception):
    """The submission cannot be graded; ``code`` is a stable reason, ``message`` explains it.

    ``submission_sha256`` is the sha256 of the bytes the grader read, when it got as far as
    reading them (None for a missing, non-regular or too large file).
    """

    def __init__(self, code: str, message: str, *, submission_sha256: str | None = None) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.submission_sha256 = submission_sha256

    def to_dict(self) -> dict[str, str]:
        return {"code": self.code, "message": self.message}


class Refusals:
    """The :class:`InvalidSubmission` for each problem, followed by what a valid submission is.

    ``sha256`` is the hash of the submission's bytes once the grader has read them, so every
    refusal after the read carries it.
    """

    def __init__(self, task: TaskSpec, metric: Metric, n_rows: int) -> None:
        self.task = task
        self.metric = metric
        self.n_rows = n_rows
        self.sha256: str | None = None

    def fail(self, code: str, problem: str) -> InvalidSubmission:
        cols = ",".join(self.task.submission.columns)
        value = (
            "a probability between 0 and 1"
            if self.metric.needs_probabilities
            else "a finite number"
        )
        expected = (
            f"A valid submission is a UTF-8 CSV file with the header '{cols}' and exactly "
            f"{self.n_rows:,} data rows, one per test id (each id once, any order), with "
            f"{value} in '{self.task.target_column}'."
        )
        return InvalidSubmission(code, f"{problem} {expected}", submission_sha256=self.sha256)

    def missing_id(self, names: list[str]) -> InvalidSubmission:
        id_col = self.task.id_column
        hint = [n for n in names if n.lower() == id_col.lower()]
        extra = f" (found {show(hint[0])}; column names are case-sensitive)" if hint else ""
        return self.fail(
            "missing_id_column",
            f"The id column {id_col!r} is missing from the header{extra}; the header is "
            f"{show(','.join(names))}.",
        )


def plural(count: int, noun: str) -> str:
    return f"{count:,} {noun}{'' if count == 1 else 's'}"


def clip(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def show(value: object) -> str:
    return repr(clip(str(value))) if isinstance(value, str) else repr(value)


def examples(values: list[object], total: int) -> str:
    shown = ", ".join(show(v) for v in values)
    return shown + (", …" if total > len(values) else "")
