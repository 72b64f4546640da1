"""Validating a submission's content: its columns, its ids against the test ids, its predictions.

The checks run in the order the package's docstring lists (``runner.grading``); the first
failure is the one reported.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from runner.grading.answers import Answers, release_arrow_memory
from runner.grading.arrays import (
    FLOAT_TEXT,
    as_text,
    integer_keys,
    np_bool,
    np_float,
    np_int,
    np_str,
)
from runner.grading.guarded_open import default_max_bytes
from runner.grading.invalid import InvalidSubmission, Refusals, clip, examples, plural, show
from runner.grading.reading import SubmissionReader
from runner.specs import TaskSpec
from runner.tasks.metrics import Metric

_NON_FINITE_TEXT = r"^[+-]?(nan|inf|infinity)$"
_EDGE_SPACE = r"^\s|\s$"
# Tokens people (and pandas' to_csv) write for "no value": treated as missing predictions.
_NA_TOKENS = ("", "NA", "N/A", "n/a", "<NA>", "#N/A", "null", "NULL", "None", "none")


def validate_guarded(
    path: Path, task: TaskSpec, metric: Metric, ans: Answers, max_bytes: int | None
) -> tuple[np.ndarray, str | None]:
    """Predictions aligned to the answers, and the sha256 of the bytes they were read from."""
    validator = _Validator(path, task, metric, ans, max_bytes)
    try:
        return validator.run(), validator.refusals.sha256
    except InvalidSubmission:
        raise
    except MemoryError:
        raise validator.fail(
            "invalid", "The submission could not be validated: reading it needs too much memory."
        ) from None
    except Exception as exc:  # an agent-controlled file must never crash the harness
        raise validator.fail(
            "invalid",
            f"The submission could not be validated ({type(exc).__name__}: {clip(str(exc), 200)}).",
        ) from exc
    finally:
        release_arrow_memory()


class _Validator:
    """One submission against one task's answers: read it, then check it step by step."""

    def __init__(
        self, path: Path, task: TaskSpec, metric: Metric, ans: Answers, max_bytes: int | None
    ) -> None:
        self.task = task
        self.metric = metric
        self.ans = ans
        self.refusals = Refusals(task, metric, ans.n)
        self.fail = self.refusals.fail
        cap = default_max_bytes(ans.n) if max_bytes is None else int(max_bytes)
        self.reader = SubmissionReader(path, task, cap, self.refusals)

    def run(self) -> np.ndarray:
        data = self.reader.read_bytes()
        table = self.reader.parse(data)
        del data
        id_pos, target_pos = self.check_columns(table)
        n_rows = table.num_rows - 1
        if n_rows != self.ans.n:
            self.raise_row_count(n_rows)
        ids = as_text(table.column(id_pos)).slice(1)
        raw_preds = as_text(table.column(target_pos)).slice(1)
        del table
        rows = self.match_ids(ids)
        del ids
        preds = self.predictions(raw_preds)
        del raw_preds
        aligned = np.empty(self.ans.n, dtype=np.float64)
        aligned[rows] = preds
        return aligned

    def check_columns(self, table: pa.Table) -> tuple[int, int]:
        names = [str(as_text(col)[0].as_py()).strip() for col in table.columns]
        expected = list(self.task.submission.columns)
        if self.task.id_column not in names:
            raise self.refusals.missing_id(names)
        duplicated = sorted({n for n in names if names.count(n) > 1})
        missing = [c for c in expected if c not in names]
        extra = [n for n in names if n not in expected]
        if missing or extra or duplicated:
            parts = []
            if missing:
                parts.append(f"missing {', '.join(show(c) for c in missing)}")
            if extra:
                parts.append(f"unexpected {', '.join(show(c) for c in extra[:10])}")
            if duplicated:
                parts.append(f"repeated {', '.join(show(c) for c in duplicated)}")
            raise self.fail(
                "wrong_columns",
                f"The submission's columns are wrong: {'; '.join(parts)} (header was "
                f"{show(','.join(names))}).",
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
        blank = np_bool(pc.equal(ids, ""))
        if blank.any():
            first = int(np.flatnonzero(blank)[0])
            raise self.fail(
                "missing_ids",
                f"Empty {id_col!r} in {plural(int(blank.sum()), 'row')} "
                f"(first at data row {first + 1:,}).",
            )

        if self.ans.int_index is not None:
            keys, valid = integer_keys(ids)
            rows = np.full(len(keys), -1, dtype=np.int64)
            if valid.all():
                rows = self.ans.int_index.get_indexer(pd.Index(keys)).astype(np.int64, copy=False)
            else:
                rows[valid] = self.ans.int_index.get_indexer(pd.Index(keys[valid]))
        else:
            keys, valid = None, None
            rows = np_int(pc.fill_null(pc.index_in(ids, value_set=self.ans.ids), -1))

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
                text = np_str(ids.take(pa.array(unknown_at)))
                unknown_keys = pd.Series(np.where(valid[unknown_at], canon, text))
            else:
                unknown_keys = pd.Series(np_str(ids.take(pa.array(unknown_at))))
            dups = unknown_keys.duplicated(keep=False).to_numpy()
            if dups.any():
                first_key = unknown_keys[dups].iloc[0]
                at = unknown_at[(unknown_keys == first_key).to_numpy()]
                n_dup = int(unknown_keys[dups].nunique())
                self.raise_duplicate(ids, at, n_dup)
            absent_at = np.flatnonzero(counts == 0)
            unknown_ex = np_str(ids.take(pa.array(unknown_at[:3]))).tolist()
            absent_ex = self.ans.ids.take(pa.array(absent_at[:3])).to_pylist()
            raise self.fail(
                "id_mismatch",
                f"The submitted {id_col!r} values do not match the test ids: "
                f"{plural(len(unknown_at), 'submitted id')} not among the test ids "
                f"(e.g. {examples(unknown_ex, len(unknown_at))}) and "
                f"{plural(len(absent_at), 'test id')} missing from the submission "
                f"(e.g. {examples(absent_ex, len(absent_at))}).",
            )
        return rows

    def raise_duplicate(self, ids: pa.ChunkedArray, at: np.ndarray, n_dup: int) -> None:
        value = ids[int(at[0])].as_py()
        where = ", ".join(f"{int(r) + 1:,}" for r in at[:3])
        raise self.fail(
            "duplicate_ids",
            f"Repeated {self.task.id_column!r} values ({plural(n_dup, 'distinct id')} repeated); "
            f"e.g. {show(value)} appears {len(at)} times "
            f"(data rows {where}{', …' if len(at) > 3 else ''}).",
        )

    def predictions(self, raw: pa.ChunkedArray) -> np.ndarray:
        col = self.task.target_column
        try:
            values = pc.cast(raw, pa.float64())
        except pa.ArrowInvalid:
            values = self.classify_bad_predictions(raw)
        preds = np_float(values)

        finite = np.isfinite(preds)
        if not finite.all():
            bad = np.flatnonzero(~finite)
            example = raw[int(bad[0])].as_py().strip()
            raise self.fail(
                "non_finite_predictions",
                f"NaN or infinite values in {col!r} in {plural(len(bad), 'row')}; "
                f"e.g. {show(example)} at data row {int(bad[0]) + 1:,}.",
            )
        if self.metric.needs_probabilities:
            out = (preds < 0.0) | (preds > 1.0)
            if out.any():
                bad = np.flatnonzero(out)
                raise self.fail(
                    "out_of_range_predictions",
                    f"Values outside [0, 1] in {col!r} in {plural(len(bad), 'row')}, but metric "
                    f"{self.metric.name!r} needs probabilities; "
                    f"e.g. {float(preds[bad[0]])!r} at data row {int(bad[0]) + 1:,} "
                    f"(range seen: {float(preds.min())!r} to {float(preds.max())!r}).",
                )
        return preds

    def classify_bad_predictions(self, raw: pa.ChunkedArray) -> pa.ChunkedArray:
        """Slow path, only when the strict cast failed: find which rule is broken and where."""
        col = self.task.target_column
        text = pc.utf8_trim_whitespace(raw)
        numeric = np_bool(pc.match_substring_regex(text, FLOAT_TEXT))
        numeric |= np_bool(pc.match_substring_regex(text, _NON_FINITE_TEXT, ignore_case=True))
        missing = np_bool(pc.is_in(text, value_set=pa.array(_NA_TOKENS)))
        bad = ~numeric & ~missing
        if bad.any():
            at = np.flatnonzero(bad)
            example = text[int(at[0])].as_py()
            raise self.fail(
                "non_numeric_predictions",
                f"Values that are not numbers in {col!r} in {plural(len(at), 'row')}; "
                f"e.g. {show(example)} at data row {int(at[0]) + 1:,}.",
            )
        if missing.any():
            at = np.flatnonzero(missing)
            raise self.fail(
                "missing_predictions",
                f"No value in {col!r} in {plural(len(at), 'row')} "
                f"(first at data row {int(at[0]) + 1:,}).",
            )
        try:
            return pc.cast(text, pa.float64())
        except pa.ArrowInvalid as exc:
            raise self.fail(
                "non_numeric_predictions",
                f"Some values in {col!r} are not numbers: {clip(str(exc), 120)}.",
            ) from None
