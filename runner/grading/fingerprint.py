"""Submission fingerprints: the file's bytes, and its content in one canonical form.

Every run record (schema 5) carries two fingerprints of the agent's submission:

``submission_sha256``
    sha256 (hex) of the file's bytes exactly as the agent left them. The grader computes it
    from the very bytes it validates, read once through its guarded open (never through a
    symlink, never a FIFO or device, never more than its size cap: see ``runner.grading``),
    so no second read of the hostile workspace can see other bytes. Statuses that are not
    graded (timeout, runtime_error, provider_error) get it from the same guarded open
    (``runner.grading.hash_submission_file``). None when there is no file, when it is not a
    regular file, or when it is larger than the grader's cap.

``submission_normalized_sha256``
    sha256 (hex) of the submission's *content* in the canonical form below, computed from
    the ids and float64 values the grader matched and parsed, never from a second parse of
    the file. Set for ``success`` only: then the grader accepted every row and scored it.
    (A submission whose predictions validated but whose score was refused,
    ``non_finite_score``, gets none: the field then means "a scored answer", which is what
    duplicate detection needs, and such a file is still identified by its byte hash.)

Canonical form, version 1: UTF-8 text, every line ended by a single LF, no BOM::

    <id_column>,<target_column>
    <id>,<prediction>          one line per test id
    ...

* Header: the task's id and target column names (id first), whatever the order, spacing
  or quoting of the file's header.
* Ids: a valid submission has exactly one row per test id, so each row is written with
  the test id the grader matched it to, as the answers write it. When every test id is a
  canonical integer the grader matches ids by value (``12``, ``+12``, ``012``, ``12.0`` are
  all id 12), and the id is written in decimal (``12``, ``-3``); otherwise ids are text
  (matched after stripping surrounding whitespace) and written as the test id's text.
* Order: integer ids ascending by value; text ids ascending by their UTF-8 bytes (the same
  as Unicode code point order; no locale collation). The order depends only on the task's
  ids, never on the file's row order.
* Prediction: the float64 the grader parsed, with -0.0 made 0.0, written as the 16
  lowercase hex digits of its IEEE-754 binary64 bits, most significant first (Python:
  ``struct.pack(">d", value).hex()``; 0.5 is ``3fe0000000000000``).
* A field holding a comma, a double quote, CR or LF is quoted as in RFC 4180 (inner quotes
  doubled); every other field is written bare.

So files that differ only in row order, line ends (CRLF, LF, bare CR), a final newline,
blank lines, a BOM, quoting, column order, whitespace around fields, how an integer id is
written, or how a number is written (``0.5``, ``0.50``, ``.5``, ``5e-1``; ``1`` and
``1.0``; ``-0.0`` and ``0``; even numerals beyond float64's precision that parse to the
same double, which the grader cannot tell apart either) share the normalized hash, and any
prediction whose float64 differs, even in its last bit, changes it.

Why the bits and not ``repr`` (the shortest round-trip decimal): both write each double
one way (``repr`` is a bijection on finite doubles), so the equivalence is the same, but
the bits are written by numpy in bulk while ``repr`` costs a Python call per value:
``benchmarks/fingerprint.py`` measured the ``repr`` form six times slower (1.07 s against
0.16 s for a million rows with integer ids on the 2-core reference machine, where grading
the same file takes 0.9 s).

The form is part of the record's meaning: changing anything above changes every hash and
needs a new record schema version, so old and new hashes are never compared.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

CANONICAL_FORM_VERSION = 1
CHUNK_ROWS = 1 << 16  # rows per piece: bounds the text held at once (~1.5 MB for int ids)

_HEX_DIGITS = np.frombuffer(b"0123456789abcdef", dtype=np.uint8)
# The two hex digits of every byte value, as one uint16 per byte so one lookup writes both.
# Viewing the digit pairs as uint16 and back as bytes keeps their order on any endianness.
_BYTE_HEX = (
    np.stack([_HEX_DIGITS[np.arange(256) >> 4], _HEX_DIGITS[np.arange(256) & 15]], axis=1)
    .copy()
    .view(np.uint16)
    .ravel()
)
_NEEDS_QUOTES = r'[,"\r\n]'
_COMMA = pa.scalar(",", pa.large_string())


def normalized_sha256(
    id_column: str,
    target_column: str,
    ids: pa.Array | pa.ChunkedArray,
    int_ids: np.ndarray | None,
    predictions: np.ndarray,
) -> str:
    """sha256 (hex) of the canonical form of a validated submission (see the module docstring).

    ``ids`` are the test ids as text and ``predictions`` the parsed values, aligned row for
    row (the answers' order); ``int_ids`` are the ids' int64 values when the grader matches
    them as integers, else None.
    """
    digest = hashlib.sha256()
    for piece in canonical_pieces(id_column, target_column, ids, int_ids, predictions):
        digest.update(piece)
    return digest.hexdigest()


def canonical_text(
    id_column: str,
    target_column: str,
    ids: pa.Array | pa.ChunkedArray,
    int_ids: np.ndarray | None,
    predictions: np.ndarray,
) -> bytes:
    """The whole canonical form at once (for people and tests; hashing streams it)."""
    return b"".join(
        bytes(p) for p in canonical_pieces(id_column, target_column, ids, int_ids, predictions)
    )


def canonical_pieces(
    id_column: str,
    target_column: str,
    ids: pa.Array | pa.ChunkedArray,
    int_ids: np.ndarray | None,
    predictions: np.ndarray,
) -> Iterator[bytes | memoryview]:
    """The canonical form in consecutive pieces of at most ``CHUNK_ROWS`` lines."""
    n = len(predictions)
    if len(ids) != n or (int_ids is not None and len(int_ids) != n):
        raise ValueError(
            f"ids ({len(ids)}), integer ids ({None if int_ids is None else len(int_ids)}) "
            f"and predictions ({n}) must have one entry per row"
        )
    yield f"{_field(id_column)},{_field(target_column)}\n".encode()
    if int_ids is not None:
        order = np.argsort(np.asarray(int_ids, dtype=np.int64))  # ids are unique: no ties
        id_text = pc.cast(pa.array(np.asarray(int_ids, dtype=np.int64)[order]), pa.large_string())
    else:
        if isinstance(ids, pa.ChunkedArray):
            ids = ids.combine_chunks()
        order = pc.sort_indices(ids).to_numpy()  # Arrow compares strings bytewise
        id_text = _quoted(pc.cast(ids.take(pa.array(order)), pa.large_string()))
    values = np.asarray(predictions, dtype=np.float64)[order]  # a copy: safe to change
    values += 0.0  # -0.0 + 0.0 is 0.0 (IEEE 754, round to nearest): one zero
    for lo in range(0, n, CHUNK_ROWS):
        lines = pc.binary_join_element_wise(
            id_text.slice(lo, CHUNK_ROWS), _hex_lines(values[lo : lo + CHUNK_ROWS]), _COMMA
        )
        yield _joined(lines)


def _hex_lines(values: np.ndarray) -> pa.LargeStringArray:
    """``<16 hex digits of the big-endian bits>\\n`` for each value, built in bulk."""
    m = len(values)
    bits = values.astype(">f8").view(np.uint8).reshape(m, 8)
    out = np.empty((m, 17), dtype=np.uint8)
    out[:, :16] = _BYTE_HEX[bits].view(np.uint8).reshape(m, 16)
    out[:, 16] = ord("\n")
    offsets = np.arange(0, 17 * (m + 1), 17, dtype=np.int64)
    return pa.Array.from_buffers(
        pa.large_string(), m, [None, pa.py_buffer(offsets), pa.py_buffer(out)]
    )


def _joined(lines: pa.LargeStringArray) -> memoryview:
    """All values of a string array back to back: exactly the slice of its data buffer."""
    if lines.null_count:  # cannot happen: the grader's ids and predictions have no gaps
        raise ValueError("a canonical line is missing")
    _, offsets_buf, data = lines.buffers()
    offsets = np.frombuffer(offsets_buf, dtype=np.int64)[
        lines.offset : lines.offset + len(lines) + 1
    ]
    if data is None:
        return memoryview(b"")
    return memoryview(data)[int(offsets[0]) : int(offsets[-1])]


def _quoted(text: pa.LargeStringArray) -> pa.LargeStringArray:
    if not pc.any(pc.match_substring_regex(text, _NEEDS_QUOTES)).as_py():
        return text  # the usual case: nothing to quote, no per-id Python work
    return pa.array([_field(v) for v in text.to_pylist()], type=pa.large_string())


def _field(value: str) -> str:
    if any(c in value for c in ',"\r\n'):
        return '"' + value.replace('"', '""') + '"'
    return value
