"""Parse many run records at once with Arrow, accepting only what pydantic would accept as is.

``runner.records.RunRecord`` is the one home of the record's fields, ``warehouse/ddl/raw.sql``
of their column types. From both this module derives, at load time, an Arrow schema for
pyarrow's JSON reader (C++: a batch of files becomes columns, no Python object per record) and
one DuckDB statement that checks the columns against the model's rules and the raw schema's
constraints and casts them to raw.runs's types.

The reader is strict where pydantic is (a string where a number belongs, a key twice or unknown,
a trailing comma: the batch fails, and is split until the culprit stands alone) and the SQL
refuses the rest of what pydantic refuses (a missing field, an unknown status, a value out of
its column's range) and some of what it would accept in another spelling (an int written as
``1.0``, a time without an offset). A record the fast path accepts is one pydantic accepts with
the same values (tests/test_warehouse_bulk.py compares them on thousands of odd documents);
every other file goes through pydantic, which accepts it or rejects it with the message it
always gave. So the fast path can be strict without ever changing a verdict: it only decides
who is quick.
"""

from __future__ import annotations

import datetime as dt
import types
import typing
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import duckdb
import pyarrow as pa
import pyarrow.json as pj

from runner.errors import TmlbenchError
from runner.records import RunRecord

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
            "raw.runs column types do not match runner.records.RunRecord: "
            + "; ".join(wrong)
            + " (warehouse/ddl/raw.sql and the model must agree)"
        )


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def read_schema(rules: Sequence[FieldRule]) -> pa.Schema:
    """What a wrapped document (``{"i": position, "r": record}``) is read as."""
    record = pa.struct([pa.field(r.name, _READ_AS[r.kind]) for r in rules])
    return pa.schema([pa.field("i", pa.int64()), pa.field("r", record)])


def check_statement(rules: Sequence[FieldRule], columns: dict[str, str], table: str) -> str:
    """The rows of ``table`` (i, one column per field as read) pydantic accepts as they are, as
    raw.runs's types: the model's rules the reader does not enforce, and raw.sql's checks."""
    values: list[str] = []
    checks: list[str] = []
    for rule in rules:
        c = _quote(rule.name)
        column_type = columns[rule.name]
        value = c
        ok: str | None = None
        if rule.kind == "enum":
            ok = f"{c} in ({', '.join(_literal(x) for x in rule.values)})"
        elif rule.kind == "integer":
            value = f"try_cast({c} as {column_type})"
            ok = f"{value} is not null"
        elif rule.kind == "number":
            ok = f"isfinite({c})"
        elif rule.kind == "timestamp":
            value = f"try_cast({c} as TIMESTAMPTZ)"
            ok = f"regexp_full_match({c}, {_literal(_TIMESTAMP.strip('^$'))}) and {value} is not null"
        if ok is not None:  # CASE: a check sees only rows where the value is there
            checks.append(
                f"case when {c} is null then {'true' if rule.nullable else 'false'} else {ok} end"
            )
        elif not rule.nullable:
            checks.append(f"{c} is not null")
        values.append(f"cast({value} as {column_type}) as {c}")
    checks += [
        # raw.runs's own constraints (checks in raw.sql), so one record cannot fail the insert
        "coalesce(budget_seconds > 0, true)",
        "(status <> 'success' or metric_direction is not null)",
        "(status = 'success' or (score is null and score_hib is null))",
    ]
    return f"select i, {', '.join(values)}\nfrom {table}\nwhere {' and '.join(checks)}\norder by i"


def bulk_parse(
    con: duckdb.DuckDBPyConnection,
    docs: Sequence[bytes],
    rules: Sequence[FieldRule],
    columns: dict[str, str],
) -> pa.Table:
    """The records among ``docs`` that the fast path accepts: column ``i`` (the position in
    ``docs``) and one column per field, typed as raw.runs has it."""
    schema = read_schema(rules)
    options = pj.ParseOptions(
        explicit_schema=schema, unexpected_field_behavior="error", newlines_in_values=True
    )
    # pyarrow's reader lets bytes that are not UTF-8 through into strings: such a document is
    # read as ``null`` here (no record: refused below), pydantic judges it.
    texts = [d if d.isascii() or _is_utf8(d) else b"null" for d in docs]
    parts: list[pa.Table] = []
    for start in range(0, len(texts), CHUNK):
        parts += _read(texts[start : start + CHUNK], start, options)
    if not parts:
        return pa.table({"i": pa.array([], pa.int64())})
    read = pa.concat_tables(parts).combine_chunks()
    record = read.column("r").chunk(0) if read.num_rows else pa.array([], schema.field("r").type)
    table = pa.Table.from_arrays(
        [read.column("i"), *[_as_loadable(record.field(r.name), r) for r in rules]],
        names=["i", *[r.name for r in rules]],
    )
    con.register("_tmlbench_read_records", table)
    try:
        return con.execute(
            check_statement(rules, columns, "_tmlbench_read_records")
        ).fetch_arrow_table()
    finally:
        con.unregister("_tmlbench_read_records")


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


def _as_loadable(values: pa.Array, rule: FieldRule) -> pa.Array:
    """A column as DuckDB can take it: the empty objects read for a map become empty maps."""
    if rule.kind != "int_map":
        return values
    n = len(values)
    offsets = pa.array([0] * (n + 1), pa.int32())
    empty = pa.MapArray.from_arrays(offsets, pa.array([], pa.string()), pa.array([], pa.int64()))
    return (
        pa.MapArray.from_arrays(empty.offsets, empty.keys, empty.items, mask=values.is_null())
        if n
        else empty
    )


def _is_utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True
