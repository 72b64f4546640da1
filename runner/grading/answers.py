"""The private answers: trusted data, so every problem with them is the harness's (``HarnessError``)."""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from runner.errors import HarnessError
from runner.grading.arrays import CANONICAL_INT
from runner.specs import TaskSpec

# Arrow buffers come from the system allocator: freed memory goes back to the OS (and to
# numpy) at once instead of staying in a private pool, which keeps the grader's peak RSS low.
POOL = pa.system_memory_pool()


@dataclass(frozen=True)
class Answers:
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
            memory_pool=POOL,
        )
    except FileNotFoundError as exc:
        raise HarnessError(f"answers for task {task.id!r} not found at {path}") from exc
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise HarnessError(
            f"answers file {path} for task {task.id!r} cannot be read as a CSV with columns "
            f"{id_col!r} and {target_col!r}: {exc}"
        ) from exc
    df: pd.DataFrame = table.to_pandas(types_mapper={pa.string(): pd.StringDtype("pyarrow")}.get)
    prepare_answers(df, task)  # fail early (and as a harness error) on broken answers
    release_arrow_memory()
    return df


def prepare_answers(answers: pd.DataFrame, task: TaskSpec) -> Answers:
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
    if pc.all(pc.match_substring_regex(ids, CANONICAL_INT)).as_py():
        try:
            int_index = pd.Index(pc.cast(ids, pa.int64()).to_numpy(), dtype=np.int64)
        except pa.ArrowInvalid:  # beyond int64: compare as text
            int_index = None
    if int_index is not None:
        unique = int_index.is_unique
    else:  # pandas' check needs far less memory than pc.count_distinct on 1M strings
        # (pandas-stubs know no ArrowDtype overload of pd.array)
        text = pd.array(ids, dtype=pd.ArrowDtype(pa.string()))  # type: ignore[call-overload]
        unique = pd.Index(text).is_unique
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
    return Answers(n=n, ids=ids, int_index=int_index, target=target)


def release_arrow_memory() -> None:
    """Hand memory freed by Arrow's allocator back to the OS (keeps the peak RSS of scoring low)."""
    with contextlib.suppress(Exception):  # best effort only
        pa.default_memory_pool().release_unused()
