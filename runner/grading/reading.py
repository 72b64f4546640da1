"""Reading a submission: its bytes through the guarded open, checked as text, parsed as CSV.

Everything is read as text (nothing is coerced); what the columns mean is checked after
(``runner.grading.validation``).
"""

from __future__ import annotations

import codecs
import contextlib
import hashlib
import os
import re
from pathlib import Path
from typing import Any

import pyarrow as pa

from runner.grading.csv_scan import (
    MAX_LINE_BYTES,
    first_bad_utf8,
    first_long_line,
    line_number,
    read_csv_text,
)
from runner.grading.guarded_open import open_submission, read_capped
from runner.grading.invalid import InvalidSubmission, Refusals, clip, show
from runner.specs import TaskSpec

MAX_COLUMNS = 1000
_NOT_NEWLINE = re.compile(rb"[^\r\n]")
_NEWLINE = re.compile(rb"[\r\n]")


class SubmissionReader:
    """The submission at ``path`` as a table of text, or the reason it cannot be one."""

    def __init__(self, path: Path, task: TaskSpec, max_bytes: int, refusals: Refusals) -> None:
        self.path = path
        self.task = task
        self.max_bytes = max_bytes
        self.refusals = refusals
        self.fail = refusals.fail

    def read_bytes(self) -> bytes:
        fd = open_submission(self.path, self.max_bytes, self.fail, self.too_large)
        try:
            chunks = list(read_capped(fd, self.max_bytes))
        finally:
            os.close(fd)
        data = chunks[0] if len(chunks) == 1 else b"".join(chunks)
        if len(data) > self.max_bytes:
            raise self.too_large(len(data))
        # The hash of exactly these bytes: what is validated is what is fingerprinted.
        self.refusals.sha256 = hashlib.sha256(data).hexdigest()
        return data

    def too_large(self, size: int) -> InvalidSubmission:
        return self.fail(
            "too_large",
            f"The submission is {size:,} bytes, more than the limit of {self.max_bytes:,} bytes "
            f"for {self.refusals.n_rows:,} rows.",
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
                f"{line_number(data, nul):,}, byte offset {nul:,}): it is binary data, not a "
                "CSV text file.",
            )
        if not data.isascii():
            bad = first_bad_utf8(data)
            if bad is not None:
                raise self.fail(
                    "unreadable_csv",
                    f"The submission {name} is not UTF-8 text: invalid byte 0x{data[bad]:02x} "
                    f"on line {line_number(data, bad):,}, at byte offset {bad:,}. Write it "
                    "as UTF-8 (pandas' to_csv does by default).",
                )
        start = len(codecs.BOM_UTF8) if data.startswith(codecs.BOM_UTF8) else 0
        long_line = first_long_line(data, start, MAX_LINE_BYTES)
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
                raise self.refusals.missing_id(names)
            raise self.fail(
                "wrong_columns",
                f"The header has {n_fields:,} columns; expected exactly "
                f"{len(self.task.submission.columns)}.",
            )
        try:
            table = read_csv_text(view, n_fields, use_threads=True)
        except pa.ArrowException as exc:
            raise self.parse_error(view, n_fields, exc) from None
        if table.num_rows == 0:
            raise self.fail("unreadable_csv", f"The submission {name} has no header row.")
        return table

    def long_line(self, data: bytes, offset: int, length: int) -> InvalidSubmission:
        start = data[offset : offset + 40].decode("utf-8", "replace")
        return self.fail(
            "unreadable_csv",
            f"Line {line_number(data, offset):,} of the submission {self.path.name} is "
            f"{length:,} bytes long (it starts {show(start + '…')}); the grader reads lines of "
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
            rows: list[Any] = []

            def first_bad_row(row: Any) -> str:  # a pyarrow.csv.InvalidRow
                rows.append(row)
                return "error"

            with contextlib.suppress(pa.ArrowException):
                read_csv_text(view, n_fields, use_threads=False, invalid_row_handler=first_bad_row)
            if rows:
                row = rows[0]
                where = f"Data row {row.number - 1:,}" if row.number else "A data row"
                return self.fail(
                    "unreadable_csv",
                    f"{where} of the submission {name} has {row.actual_columns} fields but the "
                    f"header has {row.expected_columns}: {show(row.text)}. Every row needs "
                    "exactly one value per header column (quote a value that contains a comma).",
                )
        if "straddl" in message:  # cannot happen below MAX_LINE_BYTES; said plainly if it does
            message = f"a line is longer than {MAX_LINE_BYTES:,} bytes"
        return self.fail(
            "unreadable_csv",
            f"The submission {name} cannot be parsed as CSV: {clip(message, 160)}.",
        )
