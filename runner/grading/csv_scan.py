"""Byte-level checks of a submission before Arrow parses it, and the parse itself (all text)."""

from __future__ import annotations

import codecs
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv

from runner.grading.answers import POOL

# Longest line (without its line end) the grader reads; also Arrow's block size, so every line
# within the limit parses (Arrow only refuses rows that straddle more than two blocks).
MAX_LINE_BYTES = 1 << 20
_SCAN_CHUNK = 1 << 22  # bytes per numpy pass when looking for the long line, or bad UTF-8


def read_csv_text(view: memoryview, n_fields: int, *, use_threads: bool, **parse: Any) -> pa.Table:
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
        memory_pool=POOL,
    )


def line_number(data: bytes, pos: int) -> int:
    """1-based line of byte ``pos``; \\n, \\r\\n and a bare \\r each end a line."""
    crlf = data.count(b"\r\n", 0, pos)
    return 1 + data.count(b"\n", 0, pos) + data.count(b"\r", 0, pos) - crlf


def first_bad_utf8(data: bytes) -> int | None:
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


def first_long_line(data: bytes, start: int, limit: int) -> tuple[int, int] | None:
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
