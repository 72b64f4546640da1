"""Parse many run records at once with Arrow, accepting only what pydantic would accept as is.

``runner.attempts.records.RunRecord`` is the one home of the record's fields, ``warehouse/ddl/raw.sql``
of their column types. From both this module derives, at load time, an Arrow schema for
pyarrow's JSON reader (C++, both cores: a batch of files becomes columns, no Python object per
record) and the checks, in Arrow compute, of the model's rules the reader does not enforce and
of the raw schema's constraints.

The reader is strict where pydantic is (a string where a number belongs, a key twice or unknown,
a trailing comma: the batch fails, and is halved until the culprit stands alone); the checks
refuse the rest of what pydantic refuses (a missing field, an unknown status, a value out of its
column's range) and some of what it would accept in another spelling (an int written as ``1.0``,
a time without an offset, a map of refused hosts that is not empty). A record the fast path
accepts is one pydantic accepts with the same values (tests/warehouse/test_bulk_records.py
compares them on thousands of odd documents); every other file goes through pydantic, which
accepts it or rejects it with the message it always gave. So the fast path can be strict without ever
changing a verdict: it only decides who is quick.

Measured on this project's 2 cores: DuckDB's JSON functions (``from_json`` and friends) cost 2-3
times pydantic's CPU on these 66-field records; pyarrow's reader costs about what pydantic does,
minus the Python objects and the transposition into columns.
"""

from __future__ import annotations

import datetime as dt
import types
import typing
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Literal

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj

from runner.attempts import RunRecord
from runner.errors import TmlbenchError

Kind = Literal["string", "enum", "integer", "number", "boolean", "timestamp", "int_map", "str_list"]

# The raw.runs column type each kind of field may have (warehouse/ddl/raw.sql).
COLUMN_TYPES: dict[Kind, tuple[str, ...]] = {
    "string": ("VARCHAR",),
    "enum": ("VARCHAR",),
    "integer": ("INTEGER", "BIGINT"),
    "number": ("DOUBLE",),
    "boolean": ("BOOLEAN",),
    "timestamp": ("TIMESTAMP WITH TIME ZONE",),
    "int_map": ("MAP(VARCHAR, INTEGER)",),
    "str_list": ("VARCHAR[]",),
}

# ISO 8601 with an offset and at most microseconds, as the harness writes times; other spellings
# pydantic also accepts go the per-file way.
_TIMESTAMP = (
    r"^[1-9][0-9]{3}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])"
    r"T([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\.[0-9]{1,6})?"
    r"(Z|[-+]([01][0-9]|2[0-3]):[0-5][0-9])$"
)
# What pyarrow's reader reads each kind as. Times as text (checked and cast in SQL); a map's keys
# are data, which the reader cannot take: it reads only an empty object there (a field in it
# fails the batch, and the record goes per file).
_READ_AS: dict[Kind, pa.DataType] = {
    "string": pa.string(),
    "enum": pa.string(),
    "integer": pa.int64(),
    "number": pa.float64(),
    "boolean": pa.bool_(),
    "timestamp": pa.string(),
    "int_map": pa.struct([]),
    "str_list": pa.list_(pa.string()),
}
# Records per read: a bad record costs re-reading about twice this many (halving until found).
CHUNK = 512


@dataclass(frozen=True)
class FieldRule:
    """One RunRecord field as the bulk parser sees it."""

    name: str
    kind: Kind
    nullable: bool
    values: tuple[str, ...] = ()  # an enum's allowed values


def field_rules() -> list[FieldRule]:
    """Every RunRecord field, in the model's order, with its kind (from its annotation)."""
    return [_rule(name, info.annotation) for name, info in RunRecord.model_fields.items()]


def _rule(name: str, annotation: Any) -> FieldRule:
    nullable = False
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        members = [a for a in typing.get_args(annotation) if a is not type(None)]
        nullable = len(members) < len(typing.get_args(annotation))
        if len(members) != 1:
            raise TmlbenchError(f"RunRecord.{name}: the bulk loader has no rule for {annotation}")
        annotation = members[0]
        origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is Literal and all(isinstance(a, str) for a in args):
        return FieldRule(name, "enum", nullable, tuple(args))
    simple: dict[Any, Kind] = {
        str: "string",
        bool: "boolean",
        int: "integer",
        float: "number",
        dt.datetime: "timestamp",
    }
    if annotation in simple:
        return FieldRule(name, simple[annotation], nullable)
    if origin is dict and args == (str, int):
        return FieldRule(name, "int_map", nullable)
    if origin is list and args == (str,):
        return FieldRule(name, "str_list", nullable)
    raise TmlbenchError(
        f"RunRecord.{name}: the bulk loader has no rule for {annotation} "
        "(teach warehouse/bulk_records.py the new kind of field)"
    )


def check_columns(rules: Sequence[FieldRule], columns: dict[str, str]) -> None:
    """Every field's raw.runs column has a type its kind allows (else the DDL is behind)."""
    wrong = [
        f"{r.name} ({r.kind}) is {columns[r.name]}"
        for r in rules
        if columns[r.name] not in COLUMN_TYPES[r.kind]
    ]
    if wrong:
        raise TmlbenchError(
            "raw.runs column types do not match runner.attempts.records.RunRecord: "
            + "; ".join(wrong)
            + " (warehouse/ddl/raw.sql and the model must agree)"
        )


def read_schema(rules: Sequence[FieldRule]) -> pa.Schema:
    """What a wrapped document (``{"i": position, "r": record}``) is read as."""
    record = pa.struct([pa.field(r.name, _READ_AS[r.kind]) for r in rules])
    return pa.schema([pa.field("i", pa.int64()), pa.field("r", record)])


def bulk_parse(
    docs: Sequence[bytes], rules: Sequence[FieldRule], columns: dict[str, str]
) -> pa.Table:
    """The records among ``docs`` that the fast path accepts: column ``i`` (the position in
    ``docs``) and one column per field, as ``arrow_type`` has raw.runs's column types."""
    schema = read_schema(rules)
    options = pj.ParseOptions(
        explicit_schema=schema, unexpected_field_behavior="error", newlines_in_values=True
    )
    # pyarrow's reader lets bytes that are not UTF-8 through into strings: such a document is
    # read as ``null`` here (no record: refused below), pydantic judges it.
    texts = [d if d.isascii() or _is_utf8(d) else b"null" for d in docs]
    starts = range(0, len(texts), CHUNK)
    # The reader releases the GIL: two chunks at a time use both cores.
    with ThreadPoolExecutor(max_workers=2, thread_name_prefix="tmlbench-parse") as pool:
        parts = [
            t
            for ts in pool.map(lambda i: _read(texts[i : i + CHUNK], i, options), starts)
            for t in ts
        ]
    names = [r.name for r in rules]
    if not parts:
        empty = [pa.array([], arrow_type(columns[r.name])) for r in rules]
        return pa.Table.from_arrays([pa.array([], pa.int64()), *empty], names=["i", *names])
    read = pa.concat_tables(parts).combine_chunks()
    record = read.column("r").chunk(0)
    values = {r.name: record.field(r.name) for r in rules}
    ok = _accepted(rules, columns, values)
    positions = read.column("i").filter(ok)
    kept = {name: array.filter(ok) for name, array in values.items()}
    converted, valid = _converted(rules, columns, kept)
    table = pa.Table.from_arrays([positions, *converted], names=["i", *names])
    return table if valid is None else table.filter(valid)


def arrow_type(column_type: str) -> pa.DataType:
    """The Arrow type of a raw.runs column type (what the loader inserts)."""
    return ARROW_TYPES[column_type]


ARROW_TYPES = {
    "VARCHAR": pa.string(),
    "INTEGER": pa.int64(),
    "BIGINT": pa.int64(),
    "DOUBLE": pa.float64(),
    "BOOLEAN": pa.bool_(),
    "DATE": pa.date32(),
    "TIMESTAMP WITH TIME ZONE": pa.timestamp("us", tz="UTC"),
    "MAP(VARCHAR, INTEGER)": pa.map_(pa.string(), pa.int64()),
    "VARCHAR[]": pa.list_(pa.string()),
}
_INT_RANGES = {"INTEGER": (-(2**31), 2**31 - 1), "BIGINT": (-(2**63), 2**63 - 1)}


def _accepted(
    rules: Sequence[FieldRule], columns: dict[str, str], values: dict[str, pa.Array]
) -> pa.Array:
    """Which records pydantic accepts as they were read, and raw.runs's checks too: the model's
    rules the reader does not enforce (a value given, a known enum value, an int that fits its
    column, a finite float, a time as the harness writes it) and the checks of raw.sql."""
    n = len(next(iter(values.values())))
    ok = pa.array([True] * n, pa.bool_())
    for rule in rules:
        v = values[rule.name]
        if not rule.nullable:
            ok = pc.and_(ok, pc.is_valid(v))
        check: pa.Array | None = None
        if rule.kind == "enum":
            check = pc.is_in(v, value_set=pa.array(rule.values, pa.string()))
        elif rule.kind == "integer":
            low, high = _INT_RANGES[columns[rule.name]]
            check = pc.and_(pc.greater_equal(v, low), pc.less_equal(v, high))
        elif rule.kind == "number":
            check = pc.is_finite(v)
        elif rule.kind == "timestamp":
            check = pc.match_substring_regex(v, _TIMESTAMP)
        if check is not None:  # a null value passes (nullability is checked above)
            ok = pc.and_(ok, pc.or_(pc.is_null(v), pc.fill_null(check, False)))
    # raw.runs's own constraints (checks in raw.sql), so one record cannot fail the insert
    success = pc.fill_null(pc.equal(values["status"], "success"), False)
    budget = values["budget_seconds"]
    ok = pc.and_(ok, pc.fill_null(pc.greater(budget, 0), True))
    ok = pc.and_(ok, pc.or_(pc.invert(success), pc.is_valid(values["metric_direction"])))
    scoreless = pc.and_(pc.is_null(values["score"]), pc.is_null(values["score_hib"]))
    return pc.and_(ok, pc.or_(success, scoreless))


def _converted(
    rules: Sequence[FieldRule], columns: dict[str, str], values: dict[str, pa.Array]
) -> tuple[list[pa.Array], pa.Array | None]:
    """The accepted values as raw.runs's Arrow types, and which rows survived the conversion
    (None: all; a time with a day its month lacks, say 02-30, does not)."""
    out: list[pa.Array] = []
    valid: pa.Array | None = None
    for rule in rules:
        v = values[rule.name]
        target = arrow_type(columns[rule.name])
        if rule.kind == "timestamp":
            v, parsed = _timestamps(v, target)
            if parsed is not None:
                valid = parsed if valid is None else pc.and_(valid, parsed)
        elif rule.kind == "int_map":  # only null or {} got this far
            v = _empty_maps(v, target)
        out.append(v.cast(target))
    return out, valid


def _timestamps(v: pa.Array, target: pa.DataType) -> tuple[pa.Array, pa.Array | None]:
    try:
        return v.cast(target), None
    except pa.ArrowInvalid:  # some text matched the pattern but is no date: find which
        parsed: list[Any] = []
        for text in v.to_pylist():
            try:
                parsed.append(None if text is None else pa.scalar(text).cast(target).as_py())
            except pa.ArrowInvalid:
                parsed.append(_NOT_A_TIME)
        good = [p is not _NOT_A_TIME for p in parsed]
        return pa.array([p if ok else None for p, ok in zip(parsed, good, strict=True)], target), (
            pa.array(good, pa.bool_())
        )


_NOT_A_TIME = object()


def _read(docs: Sequence[bytes], start: int, options: pj.ParseOptions) -> list[pa.Table]:
    """Read ``docs`` (positions ``start``…) in one go; if that fails, each half on its own."""
    # Each document is wrapped with its position: a document that is not exactly one JSON
    # object (two, none, half of one) cannot make the rows disagree with the files unseen.
    wrapped = b"".join(b'{"i":%d,"r":%b}\n' % (start + k, d) for k, d in enumerate(docs))
    try:
        table = pj.read_json(
            pa.BufferReader(wrapped),
            read_options=pj.ReadOptions(use_threads=False, block_size=max(len(wrapped), 1)),
            parse_options=options,
        )
        if table.column("i").to_pylist() == list(range(start, start + len(docs))):
            return [table]
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        pass
    if len(docs) == 1:
        return []
    half = len(docs) // 2
    return _read(docs[:half], start, options) + _read(docs[half:], start + half, options)


def _empty_maps(values: pa.Array, target: pa.DataType) -> pa.Array:
    """Empty maps where the reader read an empty object, nulls where it read null."""
    n = len(values)
    offsets = pa.array([0] * (n + 1), pa.int32())
    keys, items = pa.array([], pa.string()), pa.array([], target.item_type)
    return pa.MapArray.from_arrays(offsets, keys, items, mask=values.is_null())


def _is_utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True
