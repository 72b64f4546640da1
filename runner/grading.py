"""Strict grading of an agent's submission against the private answers.

The grader runs outside the sandbox and treats the submission file as untrusted data: it
never follows a symlink, never opens a FIFO or device, reads at most a size cap of bytes,
and turns every problem with the file into :class:`InvalidSubmission` with a stable reason
code (see :data:`REASON_CODES`) and a message a person understands. Problems with the
*answers* or the task spec are the harness's fault and raise ``HarnessError``/``SpecError``
instead, so they are never blamed on the agent.

Checks, in order (the first failure is reported):

``missing_file`` → ``not_regular_file`` → ``too_large`` → ``unreadable_csv`` →
``missing_id_column`` → ``wrong_columns`` → ``wrong_row_count`` → ``missing_ids`` →
``duplicate_ids`` → ``id_mismatch`` → ``non_numeric_predictions`` → ``missing_predictions``
→ ``non_finite_predictions`` → ``out_of_range_predictions``, then, when scoring,
``non_finite_score``; anything unexpected becomes ``invalid``.

Predictions may be any finite float64 (as on Kaggle): 1e308, -0.0 and subnormals pass
validation, and text beyond the float range (``1e999``) is ``non_finite_predictions``. The
metric is float64 arithmetic, so finite predictions far from the target's scale can still
make it overflow (RMSE of one 1e160 is inf). Whose fault that is gets decided against a
reference: the metric on the worst predictions *inside the answers' range* (each row
predicted with whichever of the answers' min and max is farther from its answer). If that
is finite, no in-range submission can overflow, so a non-finite score comes from the
predictions: ``non_finite_score``, naming the largest one. If it is not, the answers (or
the metric chosen for them) are at fault: ``HarnessError``.

Lines longer than :data:`MAX_LINE_BYTES` are ``unreadable_csv`` with the line named (a CSV
row of an id and a number is never that long); the limit is checked before parsing, so
every line within it parses.

Tolerated on purpose: a UTF-8 byte-order mark, CRLF line ends, blank lines, quoted fields,
any column order, surrounding whitespace in header names, ids and predictions (it is
stripped), and (when every test id is a canonical integer) ids written as integral
numbers such as ``12.0``, ``+12`` or ``012``.

The file is parsed with pyarrow's CSV reader with every column read as text, so nothing is
silently coerced; predictions are then converted with a strict text-to-float cast.

Fingerprints (see ``runner.fingerprint``): the sha256 of the bytes the grader read rides on
:class:`GradeResult` and on every :class:`InvalidSubmission` raised after the read, and a
scored submission also gets the sha256 of its canonical form. :func:`hash_submission_file`
hashes a file that is not graded through the same guarded open.
"""

from __future__ import annotations

import codecs
import contextlib
import errno
import hashlib
import os
import re
import stat
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from runner.errors import HarnessError
from runner.fingerprint import normalized_sha256
from runner.metrics import Metric, check_task_metric
from runner.specs import TaskSpec

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

MIN_MAX_BYTES = 64 * 1024 * 1024
BYTES_PER_ROW = 200
MAX_COLUMNS = 1000
# Longest line (without its line end) the grader reads; also Arrow's block size, so every line
# within the limit parses (Arrow only refuses rows that straddle more than two blocks).
MAX_LINE_BYTES = 1 << 20
_SCAN_CHUNK = 1 << 22  # bytes per numpy pass when looking for the long line, or bad UTF-8
# Arrow buffers come from the system allocator: freed memory goes back to the OS (and to
# numpy) at once instead of staying in a private pool, which keeps the grader's peak RSS low.
_POOL = pa.system_memory_pool()

_CANONICAL_INT = r"^-?(0|[1-9][0-9]*)$"
_INT_TEXT = r"^[+-]?[0-9]+$"
_FLOAT_TEXT = r"^[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?$"
_NON_FINITE_TEXT = r"^[+-]?(nan|inf|infinity)$"
_EDGE_SPACE = r"^\s|\s$"
_NOT_NEWLINE = re.compile(rb"[^\r\n]")
_NEWLINE = re.compile(rb"[\r\n]")
# Tokens people (and pandas' to_csv) write for "no value": treated as missing predictions.
_NA_TOKENS = ("", "NA", "N/A", "n/a", "<NA>", "#N/A", "null", "NULL", "None", "none")
_EXACT_INT_LIMIT = 2**53
_HASH_BLOCK = 1 << 20  # bytes per read when a file is only hashed, not graded


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


@dataclass(frozen=True)
class GradeResult:
    """Score of a valid submission: raw metric value and its higher-is-better form.

    ``submission_sha256``: sha256 of the file's bytes as read; ``normalized_sha256``: sha256
    of its content in the canonical form of ``runner.fingerprint``.
    """

    score: float
    score_hib: float
    n_rows: int
    metric: str
    submission_sha256: str | None = None
    normalized_sha256: str | None = None


def default_max_bytes(n_rows: int) -> int:
    """Size cap for a submission of ``n_rows`` rows: max(64 MiB, 200 bytes per row)."""
    return max(MIN_MAX_BYTES, BYTES_PER_ROW * int(n_rows))


# ---------------------------------------------------------------------------------------------
# answers (trusted; problems are harness errors)


@dataclass(frozen=True)
class _Answers:
    n: int
    ids: pa.Array  # text, in answers order
    int_index: pd.Index | None  # int64 ids when every id is a canonical integer
    target: np.ndarray  # float64


def load_answers(path: str | os.PathLike[str], task: TaskSpec) -> pd.DataFrame:
    """Read the private answers CSV: the id column as text, the target column as float64."""
    path = Path(path)
    id_col, target_col = task.id_column, task.target_column
    try:
        table = pacsv.read_csv(
            path,
            convert_options=pacsv.ConvertOptions(
                column_types={id_col: pa.string(), target_col: pa.float64()},
                include_columns=[id_col, target_col],
                strings_can_be_null=False,
            ),
            memory_pool=_POOL,
        )
    except FileNotFoundError as exc:
        raise HarnessError(f"answers for task {task.id!r} not found at {path}") from exc
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise HarnessError(
            f"answers file {path} for task {task.id!r} cannot be read as a CSV with columns "
            f"{id_col!r} and {target_col!r}: {exc}"
        ) from exc
    df = table.to_pandas(types_mapper={pa.string(): pd.StringDtype("pyarrow")}.get)
    _prepare_answers(df, task)  # fail early (and as a harness error) on broken answers
    _release_arrow_memory()
    return df


def _prepare_answers(answers: pd.DataFrame, task: TaskSpec) -> _Answers:
    id_col, target_col = task.id_column, task.target_column
    missing = [c for c in (id_col, target_col) if c not in answers.columns]
    if missing:
        raise HarnessError(
            f"answers for task {task.id!r} lack column(s) {missing}; "
            f"they have {list(answers.columns)}"
        )
    n = len(answers)
    if n == 0:
        raise HarnessError(f"answers for task {task.id!r} have no rows")

    raw_ids = answers[id_col]
    if not (
        isinstance(raw_ids.dtype, pd.StringDtype)
        or (
            isinstance(raw_ids.dtype, pd.ArrowDtype)
            and pa.types.is_string(raw_ids.dtype.pyarrow_dtype)
        )
    ):
        raw_ids = raw_ids.astype(str)
    ids = pa.array(raw_ids, type=pa.string(), from_pandas=True)
    if isinstance(ids, pa.ChunkedArray):
        ids = ids.combine_chunks()
    if ids.null_count or pc.any(pc.equal(ids, "")).as_py():
        raise HarnessError(f"answers for task {task.id!r} have missing ids")

    int_index: pd.Index | None = None
    if pc.all(pc.match_substring_regex(ids, _CANONICAL_INT)).as_py():
        try:
            int_index = pd.Index(pc.cast(ids, pa.int64()).to_numpy(), dtype=np.int64)
        except pa.ArrowInvalid:  # beyond int64: compare as text
            int_index = None
    if int_index is not None:
        unique = int_index.is_unique
    else:  # pandas' check needs far less memory than pc.count_distinct on 1M strings
        unique = pd.Index(pd.array(ids, dtype=pd.ArrowDtype(pa.string()))).is_unique
    if not unique:
        raise HarnessError(f"answers for task {task.id!r} have duplicate ids")

    try:
        target = pd.to_numeric(answers[target_col], errors="raise").to_numpy(
            dtype=np.float64, na_value=np.nan
        )
    except (ValueError, TypeError) as exc:
        raise HarnessError(
            f"answers for task {task.id!r}: target column is not numeric: {exc}"
        ) from exc
    if not np.isfinite(target).all():
        raise HarnessError(
            f"answers for task {task.id!r}: target column has missing or infinite values"
        )
    return _Answers(n=n, ids=ids, int_index=int_index, target=target)


# ---------------------------------------------------------------------------------------------
# public API


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
    ans = _prepare_answers(answers, task)
    preds, _ = _validate_guarded(Path(path), task, metric, ans, max_bytes)
    return pd.Series(preds, index=answers.index, name=task.target_column)


def grade_submission(
    path: str | os.PathLike[str],
    task: TaskSpec,
    answers: pd.DataFrame,
    *,
    max_bytes: int | None = None,
) -> GradeResult:
    """Validate the submission, then score it with the task's metric against the answers.

    The result carries the submission's fingerprints (``runner.fingerprint``); an
    :class:`InvalidSubmission` carries the byte hash when the file was read.
    """
    metric = check_task_metric(task)
    ans = _prepare_answers(answers, task)
    preds, sha = _validate_guarded(Path(path), task, metric, ans, max_bytes)
    target, n_rows, ids = ans.target, ans.n, ans.ids
    int_ids = None if ans.int_index is None else ans.int_index.to_numpy()
    del ans  # drop the id lookup table before the metric allocates its own temporaries
    try:
        score = _score(task, metric, target, preds, answers)
    except InvalidSubmission as exc:
        exc.submission_sha256 = sha
        raise
    # Only now: a refused score needs no canonical form (see runner.fingerprint).
    normalized = normalized_sha256(task.id_column, task.target_column, ids, int_ids, preds)
    return GradeResult(
        score=score,
        score_hib=metric.higher_is_better(score),
        n_rows=n_rows,
        metric=metric.name,
        submission_sha256=sha,
        normalized_sha256=normalized,
    )


def hash_submission_file(path: str | os.PathLike[str], *, max_bytes: int) -> str | None:
    """sha256 (hex) of a submission's bytes, read through the grader's guarded open.

    For attempts that are not graded (timeout, a broken cap, a provider error): the same
    checks as grading, so a symlink is never followed, a FIFO or device never opened, and
    no more than ``max_bytes`` + 1 bytes are read. None when there is no regular file of at
    most ``max_bytes`` bytes to hash (or reading it fails).
    """
    path = Path(path)

    def refuse(code: str, message: str) -> InvalidSubmission:
        return InvalidSubmission(code, message)

    def too_large(size: int) -> InvalidSubmission:
        return InvalidSubmission("too_large", f"{size:,} bytes, more than {max_bytes:,}")

    try:
        fd = _open_submission(path, max_bytes, refuse, too_large)
    except (InvalidSubmission, OSError):  # OSError: its fstat failed
        return None
    digest = hashlib.sha256()
    total = 0
    try:
        for chunk in _read_capped(fd, max_bytes, _HASH_BLOCK):
            digest.update(chunk)
            total += len(chunk)
    except OSError:  # e.g. EIO: no bytes we can vouch for
        return None
    finally:
        os.close(fd)
    return digest.hexdigest() if total <= max_bytes else None


# ---------------------------------------------------------------------------------------------
# scoring


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
            f"({type(failure).__name__}: {_clip(str(failure), 200)}), although it works for "
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
        f"(id {_show(str(test_id))}) overflow its float64 arithmetic (whose largest number is "
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


# ---------------------------------------------------------------------------------------------
# validation


def _validate_guarded(
    path: Path, task: TaskSpec, metric: Metric, ans: _Answers, max_bytes: int | None
) -> tuple[np.ndarray, str | None]:
    """Predictions aligned to the answers, and the sha256 of the bytes they were read from."""
    validator = _Validator(path, task, metric, ans, max_bytes)
    try:
        return validator.run(), validator.sha256
    except InvalidSubmission:
        raise
    except MemoryError:
        raise validator.fail(
            "invalid", "The submission could not be validated: reading it needs too much memory."
        ) from None
    except Exception as exc:  # an agent-controlled file must never crash the harness
        raise validator.fail(
            "invalid",
            f"The submission could not be validated "
            f"({type(exc).__name__}: {_clip(str(exc), 200)}).",
        ) from exc
    finally:
        _release_arrow_memory()


def _release_arrow_memory() -> None:
    """Hand memory freed by Arrow's allocator back to the OS (keeps the peak RSS of scoring low)."""
    with contextlib.suppress(Exception):  # best effort only
        pa.default_memory_pool().release_unused()


def _n(count: int, noun: str) -> str:
    return f"{count:,} {noun}{'' if count == 1 else 's'}"


def _clip(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _show(value: object) -> str:
    return repr(_clip(str(value))) if isinstance(value, str) else repr(value)


def _examples(values: list[object], total: int) -> str:
    shown = ", ".join(_show(v) for v in values)
    return shown + (", …" if total > len(values) else "")


class _Validator:
    def __init__(
        self, path: Path, task: TaskSpec, metric: Metric, ans: _Answers, max_bytes: int | None
    ) -> None:
        self.path = path
        self.task = task
        self.metric = metric
        self.ans = ans
        self.max_bytes = default_max_bytes(ans.n) if max_bytes is None else int(max_bytes)
        self.sha256: str | None = None  # of the bytes read, once they are

    # -- messages ------------------------------------------------------------------------------

    def fail(self, code: str, problem: str) -> InvalidSubmission:
        cols = ",".join(self.task.submission.columns)
        value = (
            "a probability between 0 and 1"
            if self.metric.needs_probabilities
            else "a finite number"
        )
        expected = (
            f"A valid submission is a UTF-8 CSV file with the header '{cols}' and exactly "
            f"{self.ans.n:,} data rows, one per test id (each id once, any order), with "
            f"{value} in '{self.task.target_column}'."
        )
        return InvalidSubmission(code, f"{problem} {expected}", submission_sha256=self.sha256)

    # -- steps ---------------------------------------------------------------------------------

    def run(self) -> np.ndarray:
        data = self.read_bytes()
        table = self.parse(data)
        del data
        id_pos, target_pos = self.check_columns(table)
        n_rows = table.num_rows - 1
        if n_rows != self.ans.n:
            self.raise_row_count(n_rows)
        ids = _text(table.column(id_pos)).slice(1)
        raw_preds = _text(table.column(target_pos)).slice(1)
        del table
        rows = self.match_ids(ids)
        del ids
        preds = self.predictions(raw_preds)
        del raw_preds
        aligned = np.empty(self.ans.n, dtype=np.float64)
        aligned[rows] = preds
        return aligned

    def read_bytes(self) -> bytes:
        fd = _open_submission(self.path, self.max_bytes, self.fail, self.too_large)
        try:
            chunks = list(_read_capped(fd, self.max_bytes))
        finally:
            os.close(fd)
        data = chunks[0] if len(chunks) == 1 else b"".join(chunks)
        if len(data) > self.max_bytes:
            raise self.too_large(len(data))
        # The hash of exactly these bytes: what is validated is what is fingerprinted.
        self.sha256 = hashlib.sha256(data).hexdigest()
        return data

    def too_large(self, size: int) -> InvalidSubmission:
        return self.fail(
            "too_large",
            f"The submission is {size:,} bytes, more than the limit of {self.max_bytes:,} bytes "
            f"for {self.ans.n:,} rows.",
        )

    def parse(self, data: bytes) -> pa.Table:
        name = self.path.name
        if not data or data.isspace():
            raise self.fail("unreadable_csv", f"The submission {name} is empty.")
        nul = data.find(b"\x00")
        if nul >= 0:
            raise self.fail(
                "unreadable_csv",
                f"The submission {name} contains NUL bytes (the first on line "
                f"{_line_number(data, nul):,}, byte offset {nul:,}): it is binary data, not a "
                "CSV text file.",
            )
        if not data.isascii():
            bad = _first_bad_utf8(data)
            if bad is not None:
                raise self.fail(
                    "unreadable_csv",
                    f"The submission {name} is not UTF-8 text: invalid byte 0x{data[bad]:02x} "
                    f"on line {_line_number(data, bad):,}, at byte offset {bad:,}. Write it "
                    "as UTF-8 (pandas' to_csv does by default).",
                )
        start = len(codecs.BOM_UTF8) if data.startswith(codecs.BOM_UTF8) else 0
        long_line = _first_long_line(data, start, MAX_LINE_BYTES)
        if long_line is not None:
            raise self.long_line(data, *long_line)
        view = memoryview(data)[start:]
        first = _NOT_NEWLINE.search(data, start)
        if first is None:
            raise self.fail("unreadable_csv", f"The submission {name} has no header row.")
        eol = _NEWLINE.search(data, first.start())  # \n, \r\n or a bare \r ends the header
        header_line = data[first.start() : None if eol is None else eol.start()]
        n_fields = header_line.count(b",") + 1
        if n_fields > MAX_COLUMNS:
            names = [
                f.strip().strip('"') for f in header_line.decode("utf-8", "replace").split(",")
            ]
            if self.task.id_column not in names:
                raise self.missing_id(names)
            raise self.fail(
                "wrong_columns",
                f"The header has {n_fields:,} columns; expected exactly "
                f"{len(self.task.submission.columns)}.",
            )
        try:
            table = _read_csv(view, n_fields, use_threads=True)
        except pa.ArrowException as exc:
            raise self.parse_error(view, n_fields, exc) from None
        if table.num_rows == 0:
            raise self.fail("unreadable_csv", f"The submission {name} has no header row.")
        return table

    def long_line(self, data: bytes, offset: int, length: int) -> InvalidSubmission:
        start = data[offset : offset + 40].decode("utf-8", "replace")
        return self.fail(
            "unreadable_csv",
            f"Line {_line_number(data, offset):,} of the submission {self.path.name} is "
            f"{length:,} bytes long (it starts {_show(start + '…')}); the grader reads lines of "
            f"at most {MAX_LINE_BYTES:,} bytes ({MAX_LINE_BYTES >> 20} MiB). Each line is one "
            "row: an id as written in test.csv and one prediction.",
        )

    def parse_error(
        self, view: memoryview, n_fields: int, exc: pa.ArrowException
    ) -> InvalidSubmission:
        """Arrow's complaint as a message naming the file, the row and what to do."""
        name = self.path.name
        message = str(exc).removeprefix("CSV parse error: ")
        if "columns, got" in message:  # a ragged row: read again, one thread, to find it
            rows: list = []

            def first_bad_row(row):  # pyarrow.csv.InvalidRow
                rows.append(row)
                return "error"

            with contextlib.suppress(pa.ArrowException):
                _read_csv(view, n_fields, use_threads=False, invalid_row_handler=first_bad_row)
            if rows:
                row = rows[0]
                where = f"Data row {row.number - 1:,}" if row.number else "A data row"
                return self.fail(
                    "unreadable_csv",
                    f"{where} of the submission {name} has {row.actual_columns} fields but the "
                    f"header has {row.expected_columns}: {_show(row.text)}. Every row needs "
                    "exactly one value per header column (quote a value that contains a comma).",
                )
        if "straddl" in message:  # cannot happen below MAX_LINE_BYTES; said plainly if it does
            message = f"a line is longer than {MAX_LINE_BYTES:,} bytes"
        return self.fail(
            "unreadable_csv",
            f"The submission {name} cannot be parsed as CSV: {_clip(message, 160)}.",
        )

    def missing_id(self, names: list[str]) -> InvalidSubmission:
        id_col = self.task.id_column
        hint = [n for n in names if n.lower() == id_col.lower()]
        extra = f" (found {_show(hint[0])}; column names are case-sensitive)" if hint else ""
        return self.fail(
            "missing_id_column",
            f"The id column {id_col!r} is missing from the header{extra}; the header is "
            f"{_show(','.join(names))}.",
        )

    def check_columns(self, table: pa.Table) -> tuple[int, int]:
        names = [str(_text(col)[0].as_py()).strip() for col in table.columns]
        expected = list(self.task.submission.columns)
        if self.task.id_column not in names:
            raise self.missing_id(names)
        duplicated = sorted({n for n in names if names.count(n) > 1})
        missing = [c for c in expected if c not in names]
        extra = [n for n in names if n not in expected]
        if missing or extra or duplicated:
            parts = []
            if missing:
                parts.append(f"missing {', '.join(_show(c) for c in missing)}")
            if extra:
                parts.append(f"unexpected {', '.join(_show(c) for c in extra[:10])}")
            if duplicated:
                parts.append(f"repeated {', '.join(_show(c) for c in duplicated)}")
            raise self.fail(
                "wrong_columns",
                f"The submission's columns are wrong: {'; '.join(parts)} (header was "
                f"{_show(','.join(names))}).",
            )
        return names.index(self.task.id_column), names.index(self.task.target_column)

    def raise_row_count(self, n_rows: int) -> None:
        what = "fewer" if n_rows < self.ans.n else "more"
        raise self.fail(
            "wrong_row_count",
            f"The submission has {n_rows:,} data rows, {what} than the {self.ans.n:,} test rows.",
        )

    def match_ids(self, ids: pa.ChunkedArray) -> np.ndarray:
        """Row of the answers for each submitted row (all checks on ids happen here)."""
        id_col = self.task.id_column
        if pc.any(pc.match_substring_regex(ids, _EDGE_SPACE)).as_py():
            ids = pc.utf8_trim_whitespace(ids)
        blank = _np_bool(pc.equal(ids, ""))
        if blank.any():
            first = int(np.flatnonzero(blank)[0])
            raise self.fail(
                "missing_ids",
                f"Empty {id_col!r} in {_n(int(blank.sum()), 'row')} "
                f"(first at data row {first + 1:,}).",
            )

        if self.ans.int_index is not None:
            keys, valid = _integer_keys(ids)
            rows = np.full(len(keys), -1, dtype=np.int64)
            if valid.all():
                rows = self.ans.int_index.get_indexer(keys).astype(np.int64, copy=False)
            else:
                rows[valid] = self.ans.int_index.get_indexer(keys[valid])
        else:
            keys, valid = None, None
            rows = _np_int(pc.fill_null(pc.index_in(ids, value_set=self.ans.ids), -1))

        known = rows >= 0
        counts = np.bincount(rows[known], minlength=self.ans.n)
        if counts.max(initial=0) > 1:
            dup_row = int(np.argmax(counts))
            at = np.flatnonzero(rows == dup_row)
            self.raise_duplicate(ids, at, int((counts > 1).sum()))
        if not known.all():
            unknown_at = np.flatnonzero(~known)
            # duplicates among unknown ids are still duplicates (checked before id_mismatch)
            if keys is not None and valid is not None:
                canon = np.where(valid[unknown_at], keys[unknown_at].astype(str), "")
                text = _np_str(ids.take(pa.array(unknown_at)))
                unknown_keys = pd.Series(np.where(valid[unknown_at], canon, text))
            else:
                unknown_keys = pd.Series(_np_str(ids.take(pa.array(unknown_at))))
            dups = unknown_keys.duplicated(keep=False).to_numpy()
            if dups.any():
                first_key = unknown_keys[dups].iloc[0]
                at = unknown_at[(unknown_keys == first_key).to_numpy()]
                n_dup = int(unknown_keys[dups].nunique())
                self.raise_duplicate(ids, at, n_dup)
            absent_at = np.flatnonzero(counts == 0)
            unknown_ex = _np_str(ids.take(pa.array(unknown_at[:3]))).tolist()
            absent_ex = self.ans.ids.take(pa.array(absent_at[:3])).to_pylist()
            raise self.fail(
                "id_mismatch",
                f"The submitted {id_col!r} values do not match the test ids: "
                f"{_n(len(unknown_at), 'submitted id')} not among the test ids "
                f"(e.g. {_examples(unknown_ex, len(unknown_at))}) and "
                f"{_n(len(absent_at), 'test id')} missing from the submission "
                f"(e.g. {_examples(absent_ex, len(absent_at))}).",
            )
        return rows

    def raise_duplicate(self, ids: pa.ChunkedArray, at: np.ndarray, n_dup: int) -> None:
        value = ids[int(at[0])].as_py()
        where = ", ".join(f"{int(r) + 1:,}" for r in at[:3])
        raise self.fail(
            "duplicate_ids",
            f"Repeated {self.task.id_column!r} values ({_n(n_dup, 'distinct id')} repeated); "
            f"e.g. {_show(value)} appears {len(at)} times "
            f"(data rows {where}{', …' if len(at) > 3 else ''}).",
        )

    def predictions(self, raw: pa.ChunkedArray) -> np.ndarray:
        col = self.task.target_column
        try:
            values = pc.cast(raw, pa.float64())
        except pa.ArrowInvalid:
            values = self.classify_bad_predictions(raw)
        preds = _np_float(values)

        finite = np.isfinite(preds)
        if not finite.all():
            bad = np.flatnonzero(~finite)
            example = raw[int(bad[0])].as_py().strip()
            raise self.fail(
                "non_finite_predictions",
                f"NaN or infinite values in {col!r} in {_n(len(bad), 'row')}; "
                f"e.g. {_show(example)} at data row {int(bad[0]) + 1:,}.",
            )
        if self.metric.needs_probabilities:
            out = (preds < 0.0) | (preds > 1.0)
            if out.any():
                bad = np.flatnonzero(out)
                raise self.fail(
                    "out_of_range_predictions",
                    f"Values outside [0, 1] in {col!r} in {_n(len(bad), 'row')}, but metric "
                    f"{self.metric.name!r} needs probabilities; "
                    f"e.g. {float(preds[bad[0]])!r} at data row {int(bad[0]) + 1:,} "
                    f"(range seen: {float(preds.min())!r} to {float(preds.max())!r}).",
                )
        return preds

    def classify_bad_predictions(self, raw: pa.ChunkedArray) -> pa.ChunkedArray:
        """Slow path, only when the strict cast failed: find which rule is broken and where."""
        col = self.task.target_column
        text = pc.utf8_trim_whitespace(raw)
        numeric = _np_bool(pc.match_substring_regex(text, _FLOAT_TEXT))
        numeric |= _np_bool(pc.match_substring_regex(text, _NON_FINITE_TEXT, ignore_case=True))
        missing = _np_bool(pc.is_in(text, value_set=pa.array(_NA_TOKENS)))
        bad = ~numeric & ~missing
        if bad.any():
            at = np.flatnonzero(bad)
            example = text[int(at[0])].as_py()
            raise self.fail(
                "non_numeric_predictions",
                f"Values that are not numbers in {col!r} in {_n(len(at), 'row')}; "
                f"e.g. {_show(example)} at data row {int(at[0]) + 1:,}.",
            )
        if missing.any():
            at = np.flatnonzero(missing)
            raise self.fail(
                "missing_predictions",
                f"No value in {col!r} in {_n(len(at), 'row')} "
                f"(first at data row {int(at[0]) + 1:,}).",
            )
        try:
            return pc.cast(text, pa.float64())
        except pa.ArrowInvalid as exc:
            raise self.fail(
                "non_numeric_predictions",
                f"Some values in {col!r} are not numbers: {_clip(str(exc), 120)}.",
            ) from None


# ---------------------------------------------------------------------------------------------
# helpers


def _open_submission(
    path: Path,
    max_bytes: int,
    fail: Callable[[str, str], InvalidSubmission],
    too_large: Callable[[int], InvalidSubmission],
) -> int:
    """Open the submission for reading, or raise ``fail(code, message)``/``too_large(size)``.

    Returns the open file descriptor; the caller closes it.

    Only a regular file of at most ``max_bytes`` bytes (by its size) is opened: a symlink is
    refused by ``lstat`` and again by ``O_NOFOLLOW`` (it may be swapped in between), a FIFO
    or device is never opened (and ``O_NONBLOCK`` would not let one block), and the opened
    file must be the one inspected.
    """
    try:
        st = os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        raise fail("missing_file", f"No submission file was found at {path}.") from None
    except OSError as exc:
        raise fail(
            "unreadable_csv", f"The submission at {path} cannot be inspected: {exc.strerror}."
        ) from None
    mode = st.st_mode
    if stat.S_ISLNK(mode):
        raise fail(
            "not_regular_file",
            f"The submission {path.name} is a symbolic link; only a regular file is accepted "
            "(write the CSV itself, not a link to it).",
        )
    if not stat.S_ISREG(mode):
        raise fail(
            "not_regular_file",
            f"The submission {path.name} is a {_file_kind(mode)}, not a regular file.",
        )
    if st.st_size > max_bytes:
        raise too_large(st.st_size)  # refused without reading a byte

    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    flags |= getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_BINARY", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.EMLINK):
            raise fail(
                "not_regular_file",
                f"The submission {path.name} became a symbolic link while being read.",
            ) from None
        raise fail(
            "unreadable_csv", f"The submission {path.name} cannot be opened: {exc.strerror}."
        ) from None
    try:
        fst = os.fstat(fd)
    except OSError:
        os.close(fd)
        raise
    if not stat.S_ISREG(fst.st_mode) or (fst.st_dev, fst.st_ino) != (st.st_dev, st.st_ino):
        os.close(fd)
        raise fail("not_regular_file", f"The submission {path.name} was replaced while being read.")
    return fd


def _read_capped(fd: int, max_bytes: int, block: int | None = None) -> Iterator[bytes]:
    """The file's bytes in chunks (of ``block`` bytes, else as few as the kernel gives), up to
    its end or until more than ``max_bytes`` were read: the file may grow after its ``fstat``."""
    total = 0
    while total <= max_bytes:
        want = max_bytes + 1 - total
        chunk = os.read(fd, want if block is None else min(block, want))
        if not chunk:
            return
        total += len(chunk)
        yield chunk


def _file_kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "directory"
    if stat.S_ISFIFO(mode):
        return "FIFO (named pipe)"
    if stat.S_ISSOCK(mode):
        return "socket"
    if stat.S_ISCHR(mode):
        return "character device"
    if stat.S_ISBLK(mode):
        return "block device"
    return "special file"


def _read_csv(view: memoryview, n_fields: int, *, use_threads: bool, **parse) -> pa.Table:
    """Every column as text, nothing coerced; blocks as large as the longest line allowed."""
    return pacsv.read_csv(
        pa.py_buffer(view),
        read_options=pacsv.ReadOptions(
            autogenerate_column_names=True, use_threads=use_threads, block_size=MAX_LINE_BYTES
        ),
        parse_options=pacsv.ParseOptions(newlines_in_values=False, **parse),
        convert_options=pacsv.ConvertOptions(
            column_types={f"f{i}": pa.string() for i in range(n_fields)},
            strings_can_be_null=False,
            quoted_strings_can_be_null=False,
        ),
        memory_pool=_POOL,
    )


def _line_number(data: bytes, pos: int) -> int:
    """1-based line of byte ``pos``; \\n, \\r\\n and a bare \\r each end a line."""
    crlf = data.count(b"\r\n", 0, pos)
    return 1 + data.count(b"\n", 0, pos) + data.count(b"\r", 0, pos) - crlf


def _first_bad_utf8(data: bytes) -> int | None:
    """Offset of the first byte that is not valid UTF-8, decoding a chunk at a time.

    Decoding all at once would hold the whole text as a str, up to 4 bytes a character.
    """
    decoder = codecs.getincrementaldecoder("utf-8")()
    view = memoryview(data)
    for lo in range(0, len(data), _SCAN_CHUNK):
        held = len(decoder.getstate()[0])  # an incomplete sequence from the previous chunk
        try:
            decoder.decode(view[lo : lo + _SCAN_CHUNK], final=lo + _SCAN_CHUNK >= len(data))
        except UnicodeDecodeError as exc:
            return lo - held + exc.start
    return None


def _first_long_line(data: bytes, start: int, limit: int) -> tuple[int, int] | None:
    """(offset, length) of the first line longer than ``limit`` bytes, line ends excluded.

    Fast path: a line longer than ``limit`` covers a whole aligned block of ``limit // 2``
    bytes, so if every such block holds a line end (found by memchr within its first bytes
    for any real CSV), no line is too long. Only otherwise are the line ends located.
    """
    block = max(1, limit // 2)
    for lo in range(0, len(data) - block + 1, block):
        if data.find(b"\n", lo, lo + block) < 0 and data.find(b"\r", lo, lo + block) < 0:
            break
    else:
        return None
    view = np.frombuffer(data, dtype=np.uint8)
    line_start = start
    for lo in range(start, len(data), _SCAN_CHUNK):
        chunk = view[lo : lo + _SCAN_CHUNK]
        ends = np.flatnonzero((chunk == 0x0A) | (chunk == 0x0D)) + lo
        starts = np.concatenate(([line_start], ends[:-1] + 1)) if len(ends) else ends
        too_long = np.flatnonzero(ends - starts > limit)
        if len(too_long):
            at = int(too_long[0])
            return int(starts[at]), int(ends[at] - starts[at])
        if len(ends):
            line_start = int(ends[-1]) + 1
    if len(data) - line_start > limit:  # the last line, without a line end
        return line_start, len(data) - line_start
    return None


def _text(col: pa.ChunkedArray) -> pa.ChunkedArray:
    return col if pa.types.is_string(col.type) else pc.cast(col, pa.string())


def _np_bool(arr: pa.ChunkedArray | pa.Array) -> np.ndarray:
    return np.asarray(pc.fill_null(arr, False).to_numpy(zero_copy_only=False), dtype=bool)


def _np_int(arr: pa.ChunkedArray | pa.Array) -> np.ndarray:
    return np.asarray(arr.to_numpy(zero_copy_only=False), dtype=np.int64)


def _np_float(arr: pa.ChunkedArray | pa.Array) -> np.ndarray:
    return np.asarray(arr.to_numpy(zero_copy_only=False), dtype=np.float64)


def _np_str(arr: pa.ChunkedArray | pa.Array) -> np.ndarray:
    return np.asarray(arr.to_numpy(zero_copy_only=False), dtype=object)


def _integer_keys(ids: pa.ChunkedArray) -> tuple[np.ndarray, np.ndarray]:
    """int64 value of each id written as an integral number, and a mask of those that are."""
    n = len(ids)
    if pc.all(pc.match_substring_regex(ids, _CANONICAL_INT)).as_py():
        try:
            return _np_int(pc.cast(ids, pa.int64())), np.ones(n, dtype=bool)
        except pa.ArrowInvalid:
            pass  # out of int64 range: handled value by value below
    keys = np.zeros(n, dtype=np.int64)
    valid = np.zeros(n, dtype=bool)
    is_int = _np_bool(pc.match_substring_regex(ids, _INT_TEXT))
    if is_int.any():
        at = np.flatnonzero(is_int)
        text = pc.replace_substring_regex(ids.take(pa.array(at)), r"^\+", "")
        try:
            keys[at] = _np_int(pc.cast(text, pa.int64()))
            valid[at] = True
        except pa.ArrowInvalid:
            for i, v in zip(at, text.to_pylist(), strict=True):
                # More than 19 digits is beyond int64, and int() refuses over 4,300 digits.
                if len(v.lstrip("-").lstrip("0")) > 19:
                    continue
                k = int(v)
                if -(2**63) <= k < 2**63:
                    keys[i], valid[i] = k, True
    is_float = _np_bool(pc.match_substring_regex(ids, _FLOAT_TEXT)) & ~is_int
    if is_float.any():
        at = np.flatnonzero(is_float)
        vals = _np_float(pc.cast(ids.take(pa.array(at)), pa.float64()))
        ok = np.isfinite(vals) & (np.abs(vals) <= _EXACT_INT_LIMIT)
        ok &= np.floor(np.where(ok, vals, 0.0)) == np.where(ok, vals, 0.0)
        keys[at[ok]] = vals[ok].astype(np.int64)
        valid[at[ok]] = True
    return keys, valid
