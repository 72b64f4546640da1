"""Run records into rows of ``raw.runs``: a batch, and the records refused, each with why.

A batch is an Arrow table, one row per record: the record's fields as raw.runs types them
(``RUN_FIELDS``), where it came from (``ORIGIN``) and, for a record file, what the index keeps of
the file's stat (``warehouse.record_index.STAT_COLUMNS``).

Record files are parsed in bulk first (``warehouse.bulk_records``: pyarrow's reader and Arrow
checks derived from ``runner.attempts.records.RunRecord`` and raw.sql); the files its strict checks do not
take go through pydantic one by one, so a refusal reads as it always did: the file, then the field
and what is wrong (``describe_validation_error``). A valid record that raw.sql's constraints would
refuse (an int too wide for its column, a success without a metric) is refused here by name too,
so one bad record never fails a whole insert.
"""

from __future__ import annotations

import operator
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import duckdb
import pyarrow as pa
from pydantic import ValidationError

from runner.attempts import RunRecord, run_space
from runner.errors import TmlbenchError, describe_validation_error
from warehouse.bulk_records import FieldRule, arrow_type, bulk_parse, check_columns, field_rules
from warehouse.record_files import ReadFile
from warehouse.record_index import STAT_COLUMNS, stat_columns

RUN_FIELDS: tuple[str, ...] = tuple(RunRecord.model_fields)
# raw.runs's columns that are not record fields: where and when a row came in.
BOOKKEEPING = ("run_space", "source", "source_path", "record_sha256", "loaded_at", "source_fields")
# Where a batch's record came from (raw.runs columns but ``source`` and ``loaded_at``, which are
# the load's).
ORIGIN = ("run_space", "source_path", "record_sha256", "source_fields")
RULES: tuple[FieldRule, ...] = tuple(field_rules())

_FIELD_GETTER = operator.itemgetter(*RUN_FIELDS)
_INT_RANGES = {"INTEGER": (-(2**31), 2**31 - 1), "BIGINT": (-(2**63), 2**63 - 1)}

Refusal = tuple[str, str]  # (path, the message that says why; it names the path)


@dataclass(frozen=True)
class Candidate:
    """One parsed, valid record on its way in: where it came from and its content hash."""

    record: RunRecord
    source_path: str
    record_sha256: str
    # Imports: JSON of the source's fields that raw.runs has no column for.
    source_fields: str | None = None


class RunSpaces:
    """``runner.attempts.records.run_space`` of record paths below ``root``, worked out once per folder
    that holds run folders (the rule's path arithmetic costs ~15 µs a record)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.known: dict[str, str] = {}

    def of(self, path: str) -> str:
        holder = path.rsplit(os.sep, 2)[0]  # <holder>/<run folder>/record.json
        space = self.known.get(holder)
        if space is None:
            space = self.known[holder] = run_space(Path(path), self.root)
        return space


def run_columns(con: duckdb.DuckDBPyConnection) -> dict[str, str]:
    """raw.runs column -> DuckDB type; checks that every RunRecord field has its column."""
    rows = con.execute(
        "select column_name, data_type from information_schema.columns "
        "where table_schema = 'raw' and table_name = 'runs' order by ordinal_position"
    ).fetchall()
    columns: dict[str, str] = dict(rows)
    missing = [f for f in (*RUN_FIELDS, *BOOKKEEPING) if f not in columns]
    if missing:
        raise TmlbenchError(
            f"raw.runs has no column for {', '.join(missing)}: warehouse/ddl/raw.sql is behind "
            "runner.attempts.records.RunRecord (add the columns there)"
        )
    check_columns(RULES, columns)
    return columns


def parse_files(
    files: Sequence[ReadFile], spaces: RunSpaces, columns: dict[str, str]
) -> tuple[pa.Table | None, list[Refusal]]:
    """Parse ``files`` (in bulk, then one by one with pydantic those the bulk checks refused)
    into a batch (None: no file was valid); and the files refused, each with the message that
    says why."""
    if not files:
        return None, []
    try:
        accepted: pa.Table | None = bulk_parse([f.data for f in files], RULES, columns)
    except pa.ArrowException:  # the bulk path only ever decides who is quick: pydantic judges
        accepted = None
    taken = accepted.column("i") if accepted is not None else pa.array([], pa.int64())
    rejected: list[Refusal] = []
    candidates: list[Candidate] = []
    positions: list[int] = []
    for i in sorted(set(range(len(files))).difference(taken.to_pylist())):
        f = files[i]
        try:
            record = RunRecord.model_validate_json(f.data)
        except ValidationError as exc:
            rejected.append(
                (f.path, f"{f.path}: not a valid run record: {describe_validation_error(exc)}")
            )
            continue
        candidates.append(Candidate(record, f.path, f.sha256))
        positions.append(i)
    modelled, kept, refused = candidate_rows(candidates, columns)
    rejected += refused
    origin = pa.table(
        {
            "run_space": pa.array([spaces.of(f.path) for f in files], pa.string()),
            "source_path": pa.array([f.path for f in files], pa.string()),
            "record_sha256": pa.array([f.sha256 for f in files], pa.string()),
            "source_fields": pa.nulls(len(files), pa.string()),
            **stat_columns([f.stat for f in files]),
        }
    )
    parts = [] if accepted is None else [beside(accepted.drop_columns(["i"]), origin.take(taken))]
    if kept:
        parts.append(beside(modelled, origin.take(pa.array([positions[k] for k in kept]))))
    if not parts:
        return None, rejected
    schema = batch_schema(columns)
    return pa.concat_tables([part.cast(schema) for part in parts]), rejected


def candidate_rows(
    candidates: Sequence[Candidate], columns: dict[str, str]
) -> tuple[pa.Table, list[int], list[Refusal]]:
    """The candidates raw.runs's constraints accept, as rows of its types; their positions in
    ``candidates``; and the others, refused with the reason (so one bad record cannot fail the
    whole insert: bulk-parsed records were checked in Arrow already)."""
    checks = int_checks(columns)
    kept: list[int] = []
    rejected: list[Refusal] = []
    for k, candidate in enumerate(candidates):
        problem = constraint_problem(candidate.record, checks)
        if problem:
            rejected.append((candidate.source_path, f"{candidate.source_path}: {problem}"))
        else:
            kept.append(k)
    rows = model_rows([candidates[k] for k in kept], record_schema(columns))
    return rows, kept, rejected


def int_checks(columns: dict[str, str]) -> list[tuple[str, int, int, str]]:
    """(field, low, high, column type) for every integer column of raw.runs."""
    return [
        (name, *_INT_RANGES[columns[name]], columns[name].lower())
        for name in RUN_FIELDS
        if columns[name] in _INT_RANGES
    ]


def constraint_problem(
    record: RunRecord, int_checks: list[tuple[str, int, int, str]]
) -> str | None:
    """What raw.sql's constraints refuse in a record pydantic took (None: nothing)."""
    values = record.__dict__
    for name, low, high, type_name in int_checks:
        value = values[name]
        if value is not None and not low <= value <= high:
            return f"{name}: {value} does not fit the column's type ({type_name})"
    if record.budget_seconds is not None and record.budget_seconds <= 0:
        return f"budget_seconds: must be > 0, got {record.budget_seconds}"
    if record.status == "success" and record.metric_direction is None:
        return "status success needs a metric (metric_name/metric_direction are empty)"
    if record.status != "success" and (record.score is not None or record.score_hib is not None):
        return f"status {record.status!r} must not carry a score (only success has one)"
    return None


def record_schema(columns: dict[str, str]) -> pa.Schema:
    """The record fields' columns, as raw.runs types them."""
    return pa.schema([(name, arrow_type(columns[name])) for name in RUN_FIELDS])


def batch_schema(columns: dict[str, str]) -> pa.Schema:
    """A batch's columns: the record's, its origin, its file's stat."""
    origin = [(name, pa.string()) for name in ORIGIN]
    stat = [(name, pa.uint64() if name == "inode" else pa.int64()) for name in STAT_COLUMNS]
    return pa.schema([*record_schema(columns), *origin, *stat])


def model_rows(candidates: Sequence[Candidate], schema: pa.Schema) -> pa.Table:
    """The candidates' records as columns of ``schema`` (``record_schema``)."""
    if not candidates:
        return schema.empty_table()
    # Transpose records into columns with C-level itemgetter/zip (a comprehension per column is
    # several times slower at 100k rows).
    rows = map(_FIELD_GETTER, (c.record.__dict__ for c in candidates))
    return pa.table(
        {
            name: pa.array(values, schema.field(name).type)
            for name, values in zip(RUN_FIELDS, zip(*rows, strict=True), strict=True)
        },
        schema=schema,
    )


def beside(left: pa.Table, right: pa.Table) -> pa.Table:
    """The columns of both tables, side by side (rows in the same order)."""
    return pa.Table.from_arrays(
        [*left.columns, *right.columns], names=[*left.column_names, *right.column_names]
    )
