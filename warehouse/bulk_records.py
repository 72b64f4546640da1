"""Parse many run records at once in DuckDB, accepting only what pydantic would accept as is.

``runner.records.RunRecord`` is the one home of the record's fields, ``warehouse/ddl/raw.sql``
of their column types. This module derives from both, at load time, one SQL statement that parses
a batch of record files with DuckDB's JSON functions (both cores, no Python object per record)
and checks each against the model's rules: every field present and no other, each value of its
field's JSON type (a string for a ``str`` field, digits for an ``int``, ...), in range for its
column, a known status, an ISO 8601 time with an offset, and the raw schema's constraints.

A record the statement accepts is one pydantic would accept with the same values (the tests
compare the two on edge cases). Everything else (bad JSON, a missing field, an unusual but valid
spelling such as ``1.0`` for an int, a record without all of the current fields) is left to the
per-file pydantic path, which either accepts it or rejects it with the message it always gave.
So the fast path can be strict without ever changing a verdict: it only decides who is quick.
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

# What the harness writes (json.dumps of model_dump(mode="json")); other spellings pydantic also
# accepts go the per-file way. Integers without leading zeros; finite decimals; ISO 8601 with an
# offset and at most microseconds.
_INTEGER = r"-?(0|[1-9][0-9]*)"
_NUMBER = r"-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?"
_TIMESTAMP = (
    r"[1-9][0-9]{3}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])"
    r"T([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\.[0-9]{1,6})?"
    r"(Z|[-+]([01][0-9]|2[0-3]):[0-5][0-9])"
)
# DuckDB's JSON reader allows trailing commas, the JSON standard (and pydantic) does not. The
# pattern also matches inside strings: such a record merely takes the per-file path.
_TRAILING_COMMA = r",\s*[\]}]"


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


def _value_and_check(rule: FieldRule, column_type: str, string_type: str) -> tuple[str, str]:
    """SQL for the field's typed value and for "pydantic would accept it as this value".

    ``v.<field>`` is the field as DuckDB extracts it as VARCHAR (the text of a number, the
    content of a string; NULL when null) or, for lists and maps, as JSON.
    """
    v = f"v.{_quote(rule.name)}"
    null_ok = "true" if rule.nullable else "false"
    kind = rule.kind
    if kind == "string":  # only here can another JSON type pass for the right one
        check = (
            f"case {string_type} when 'VARCHAR' then true when 'NULL' then {null_ok} else false end"
        )
        return v, check
    value: str
    guards: list[str]
    if kind == "enum":
        value, guards = v, [f"{v} in ({', '.join(_literal(x) for x in rule.values)})"]
    elif kind == "boolean":
        value, guards = f"({v} = 'true')", [f"{v} in ('true', 'false')"]
    elif kind == "integer":
        value = f"try_cast({v} as {column_type})"
        guards = [f"regexp_full_match({v}, {_literal(_INTEGER)})", f"{value} is not null"]
    elif kind == "number":
        value = f"try_cast({v} as DOUBLE)"
        guards = [f"regexp_full_match({v}, {_literal(_NUMBER)})", f"isfinite({value})"]
    elif kind == "timestamp":
        value = f"try_cast({v} as TIMESTAMPTZ)"
        guards = [f"regexp_full_match({v}, {_literal(_TIMESTAMP)})", f"{value} is not null"]
    elif kind == "str_list":
        items = f"from_json({v}, '[\"JSON\"]')"
        value = f"from_json({v}, '[\"VARCHAR\"]')"
        guards = [
            f"starts_with({v}, '[')",
            f"list_bool_and(list_transform({items}, x -> starts_with(x, '\"')))",
        ]
    else:  # int_map: an object of integers with distinct keys (DuckDB refuses a key twice in
        # a map, pydantic keeps the last: such a record goes the per-file way)
        keys = f"json_keys({v})"
        entries = f"from_json({v}, '\"MAP(VARCHAR, JSON)\"')"
        integer = (
            f"regexp_full_match(x, {_literal(_INTEGER)}) and try_cast(x as INTEGER) is not null"
        )
        value = f"from_json({v}, '\"{column_type}\"')"
        guards = [
            f"starts_with({v}, '{{')",
            f"len({keys}) = len(list_distinct({keys}))",
            f"list_bool_and(list_transform(map_values({entries}), x -> {integer}))",
        ]
    # One WHEN per guard: DuckDB evaluates a CASE's branches in order and each only for the rows
    # still undecided, so a later guard (building a map, say) never sees what an earlier refused.
    refusals = " ".join(f"when not coalesce({g}, false) then false" for g in guards)
    check = f"case when {v} is null then {null_ok} {refusals} else true end"
    return f"case when {v} is not null then {value} end", check


def parse_statement(rules: Sequence[FieldRule], docs: str) -> str:
    """Parse every document of ``docs`` (i, content) that is JSON as the standard has it, once.

    Each field is extracted as VARCHAR (lists and maps as JSON), with the document's keys and the
    JSON type of each ``str`` field.
    """
    string_fields = [r.name for r in rules if r.kind == "string"]
    paths = "[" + ", ".join(_literal("$." + _quote(n)) for n in string_fields) + "]"
    structure = ", ".join(
        f'"{r.name}": "{"JSON" if r.kind in ("int_map", "str_list") else "VARCHAR"}"' for r in rules
    )
    return (
        f"select i, from_json(content, {_literal('{' + structure + '}')}) as v,\n"
        f"    json_keys(content) as keys, json_type(content, {paths}) as types\n"
        f"from {docs}\n"
        f"where json_valid(content) and not regexp_matches(content, {_literal(_TRAILING_COMMA)})"
    )


def bulk_statement(rules: Sequence[FieldRule], columns: dict[str, str], parsed: str) -> str:
    """Of the documents ``parse_statement`` parsed into ``parsed``, the accepted ones: ``i`` and
    one column per field, typed as raw.runs has it."""
    string_fields = [r.name for r in rules if r.kind == "string"]
    position = {name: i + 1 for i, name in enumerate(string_fields)}  # DuckDB lists: 1-based
    values: list[str] = []
    checks: list[str] = []
    for rule in rules:
        string_type = f"types[{position[rule.name]}]" if rule.name in position else "NULL"
        value, check = _value_and_check(rule, columns[rule.name], string_type)
        values.append(f"cast({value} as {columns[rule.name]}) as {_quote(rule.name)}")
        checks.append(check)
    names = ", ".join(_literal(r.name) for r in rules)
    checks += [
        # every field present, none twice, no other (a record of an older schema version, whose
        # later fields are missing, goes the per-file way)
        f"len(keys) = {len(rules)} and list_has_all(keys, [{names}])",
        # raw.runs's own constraints (checks in raw.sql), so one record cannot fail the insert
        "coalesce(try_cast(v.budget_seconds as BIGINT) > 0, true)",
        "(v.status <> 'success' or v.metric_direction is not null)",
        "(v.status = 'success' or (v.score is null and v.score_hib is null))",
    ]
    return f"select i, {', '.join(values)}\nfrom {parsed}\nwhere {' and '.join(checks)}\norder by i"


def bulk_parse(
    con: duckdb.DuckDBPyConnection,
    docs: Sequence[bytes],
    rules: Sequence[FieldRule],
    columns: dict[str, str],
) -> pa.Table:
    """The records among ``docs`` that the bulk checks accept: column ``i`` (the position in
    ``docs``) and one column per field. A document that is not UTF-8 is never accepted.

    Two statements, the parsed documents in a temporary table between them: in one statement
    DuckDB would push the checks below the parse and parse a record once per field it checks.
    """
    texts = [i for i, d in enumerate(docs) if d.isascii() or _is_utf8(d)]
    table = pa.table(
        {
            "i": pa.array(texts, pa.int64()),
            "content": pa.array([docs[i] for i in texts], pa.string()),
        }
    )
    view, parsed = "_tmlbench_record_docs", "_tmlbench_parsed_records"
    con.register(view, table)
    try:
        con.execute(f"create or replace temp table {parsed} as {parse_statement(rules, view)}")
        return con.execute(bulk_statement(rules, columns, parsed)).fetch_arrow_table()
    finally:
        con.unregister(view)
        con.execute(f"drop table if exists {parsed}")


def _is_utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True
