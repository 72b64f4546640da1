"""Arrow columns as numpy arrays, and ids written as integral numbers read as int64 keys."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

CANONICAL_INT = r"^-?(0|[1-9][0-9]*)$"
FLOAT_TEXT = r"^[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?$"
_INT_TEXT = r"^[+-]?[0-9]+$"
_EXACT_INT_LIMIT = 2**53


def as_text(col: pa.ChunkedArray) -> pa.ChunkedArray:
    return col if pa.types.is_string(col.type) else pc.cast(col, pa.string())


def np_bool(arr: pa.ChunkedArray | pa.Array) -> np.ndarray:
    return np.asarray(pc.fill_null(arr, False).to_numpy(zero_copy_only=False), dtype=bool)


def np_int(arr: pa.ChunkedArray | pa.Array) -> np.ndarray:
    return np.asarray(arr.to_numpy(zero_copy_only=False), dtype=np.int64)


def np_float(arr: pa.ChunkedArray | pa.Array) -> np.ndarray:
    return np.asarray(arr.to_numpy(zero_copy_only=False), dtype=np.float64)


def np_str(arr: pa.ChunkedArray | pa.Array) -> np.ndarray:
    return np.asarray(arr.to_numpy(zero_copy_only=False), dtype=object)


def integer_keys(
    ids: pa.ChunkedArray,
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.bool_]]:
    """int64 value of each id written as an integral number, and a mask of those that are."""
    n = len(ids)
    if pc.all(pc.match_substring_regex(ids, CANONICAL_INT)).as_py():
        try:
            return np_int(pc.cast(ids, pa.int64())), np.ones(n, dtype=bool)
        except pa.ArrowInvalid:
            pass  # out of int64 range: handled value by value below
    keys = np.zeros(n, dtype=np.int64)
    valid = np.zeros(n, dtype=bool)
    is_int = np_bool(pc.match_substring_regex(ids, _INT_TEXT))
    if is_int.any():
        at = np.flatnonzero(is_int)
        text = pc.replace_substring_regex(ids.take(pa.array(at)), r"^\+", "")
        try:
            keys[at] = np_int(pc.cast(text, pa.int64()))
            valid[at] = True
        except pa.ArrowInvalid:
            for i, v in zip(at, text.to_pylist(), strict=True):
                # More than 19 digits is beyond int64, and int() refuses over 4,300 digits.
                if len(v.lstrip("-").lstrip("0")) > 19:
                    continue
                k = int(v)
                if -(2**63) <= k < 2**63:
                    keys[i], valid[i] = k, True
    is_float = np_bool(pc.match_substring_regex(ids, FLOAT_TEXT)) & ~is_int
    if is_float.any():
        at = np.flatnonzero(is_float)
        vals = np_float(pc.cast(ids.take(pa.array(at)), pa.float64()))
        ok = np.isfinite(vals) & (np.abs(vals) <= _EXACT_INT_LIMIT)
        ok &= np.floor(np.where(ok, vals, 0.0)) == np.where(ok, vals, 0.0)
        keys[at[ok]] = vals[ok].astype(np.int64)
        valid[at[ok]] = True
    return keys, valid
