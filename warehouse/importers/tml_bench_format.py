"""What the original TML-bench harness writes, read as it writes it (nothing mapped yet).

The authority is its source, MykolaPinchuk/TML-bench: ``orchestrator/db.py`` (``ensure_db``
creates ``runs`` and ``baselines`` and migrates older databases by appending columns;
``insert_run`` flattens a result into a ``runs`` row) and ``orchestrator/result.py``
(``RunResult``; ``write_result_json`` writes ``runs/<run_id>/result.json``).

Every schema generation its migrations allow is read: a database from before a column was added
simply lacks it (the first one has 13 columns, the current one 31), and any value may be NULL.
A column or field this module does not know is kept (``Row.unknown``) rather than refused.
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from runner.errors import TmlbenchError

RESULT_FILE = "result.json"
WORKSPACE_DIR = "workspace"  # runs/<run_id>/workspace: the agent's files, never searched

# The runs table of the current ensure_db, in its column order.
RUN_COLUMNS = (
    "run_id",
    "created_at",
    "competition_id",
    "status",
    "metric_name",
    "score_raw",
    "score_normalized",
    "secondary_r2",
    "local_validation_metric",
    "runtime_seconds",
    "budget_time_seconds",
    "seed",
    "prompt_profile",
    "prompt_strategy",
    "provider",
    "model_id",
    "mode",
    "temperature",
    "max_tokens",
    "submission_path",
    "normalized_submission_path",
    "submission_sha256",
    "normalized_submission_sha256",
    "spec_sha256",
    "prompt_sha256",
    "public_manifest_sha256",
    "kilo_version",
    "kilo_config_sha256",
    "benchmark_version",
    "git_sha",
    "git_dirty",
)
# NOT NULL in every generation (the first CREATE TABLE already had them).
RUN_KEY_COLUMNS = ("run_id", "created_at", "competition_id", "status")
RUN_FLOATS = frozenset(
    {
        "score_raw",
        "score_normalized",
        "secondary_r2",
        "local_validation_metric",
        "runtime_seconds",
        "temperature",
    }
)
RUN_INTS = frozenset({"budget_time_seconds", "seed", "max_tokens", "git_dirty"})

BASELINE_COLUMNS = (
    "competition_id",
    "baseline_type",
    "created_at",
    "metric_name",
    "score_raw",
    "score_normalized",
    "local_validation_metric",
    "submission_sha256",
    "normalized_submission_sha256",
    "spec_sha256",
    "public_manifest_sha256",
)
BASELINE_KEY_COLUMNS = ("competition_id", "baseline_type")
BASELINE_FLOATS = frozenset({"score_raw", "score_normalized", "local_validation_metric"})

# What its run_one.py writes as status (provider_error: the provider refused, e.g. HTTP 402).
STATUSES = ("success", "invalid_submission", "runtime_error", "timeout", "provider_error")

# result.json → runs columns, as insert_run reads them. Provenance wins over artifacts.notes
# when it has a (truthy) value: older results kept the provenance hashes in notes.
_RESULT_TOP = (
    "run_id",
    "created_at",
    "competition_id",
    "status",
    "metric_name",
    "score_raw",
    "score_normalized",
    "local_validation_metric",
    "runtime_seconds",
    "seed",
)
_PROVENANCE = (
    "spec_sha256",
    "prompt_sha256",
    "public_manifest_sha256",
    "kilo_version",
    "kilo_config_sha256",
)
_RESULT_NESTED: dict[str, dict[str, str]] = {
    "model": {n: n for n in ("provider", "model_id", "mode", "temperature", "max_tokens")},
    "budget": {"time_seconds": "budget_time_seconds"},
    "artifacts": {
        "submission_path": "submission_path",
        "normalized_submission_path": "normalized_submission_path",
    },
    "versions": {"benchmark": "benchmark_version", "git_sha": "git_sha", "git_dirty": "git_dirty"},
    "provenance": {n: n for n in _PROVENANCE},
}
_NOTES_FIELDS = (
    "submission_sha256",
    "normalized_submission_sha256",
    "prompt_profile",
    "prompt_strategy",
    "secondary_r2",
    "spec_sha256",
    "prompt_sha256",
    "public_manifest_sha256",
    "kilo_version",
    "kilo_config_sha256",
)


@dataclass
class Row:
    """One row as the source holds it: known columns, plus what this module does not know."""

    where: str  # names the row in messages: "<file>#run_id=…" or "<file> row 7"
    values: dict[str, Any]
    unknown: dict[str, Any] = field(default_factory=dict)  # non-null ones: kept, and reported
    extra: dict[str, Any] = field(default_factory=dict)  # kept: result.json's other notes


@dataclass
class Source:
    """What one database or result.json tree holds."""

    runs: list[Row] = field(default_factory=list)
    baselines: list[Row] = field(default_factory=list)
    rejected: list[tuple[str, str]] = field(default_factory=list)  # (where, why)


# ---------------------------------------------------------------------------------------------
# the SQLite database


def read_database(path: Path) -> Source:
    """Every row of ``runs`` and (if present) ``baselines``; TmlbenchError if it is not one."""
    try:
        con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    except sqlite3.Error as exc:
        raise TmlbenchError(f"{path}: cannot open as SQLite: {exc}") from None
    try:
        tables = _tables(con, path)
        if "runs" not in tables:
            raise TmlbenchError(
                f"{path}: not a TML-bench results database (it has no table 'runs'; "
                f"tables: {', '.join(sorted(tables)) or 'none'})"
            )
        source = Source()
        source.runs = list(_table_rows(con, path, "runs", RUN_COLUMNS, RUN_KEY_COLUMNS))
        if "baselines" in tables:
            source.baselines = list(
                _table_rows(con, path, "baselines", BASELINE_COLUMNS, BASELINE_KEY_COLUMNS)
            )
        return source
    finally:
        con.close()


def _tables(con: sqlite3.Connection, path: Path) -> set[str]:
    try:
        rows = con.execute("select name from sqlite_master where type = 'table'").fetchall()
    except sqlite3.DatabaseError as exc:
        raise TmlbenchError(f"{path}: not a readable SQLite database: {exc}") from None
    return {name for (name,) in rows}


def _table_rows(
    con: sqlite3.Connection,
    path: Path,
    table: str,
    known: tuple[str, ...],
    key: tuple[str, ...],
) -> Iterator[Row]:
    try:
        # rowid names a row that has no usable key; the table's own columns follow it.
        cur = con.execute(f'select rowid as "__rowid__", * from "{table}"')
    except sqlite3.DatabaseError as exc:
        raise TmlbenchError(f"{path}: cannot read table {table}: {exc}") from None
    columns = [d[0] for d in cur.description][1:]
    missing = [c for c in key if c not in columns]
    if missing:
        raise TmlbenchError(
            f"{path}: table {table} has no column {', '.join(missing)}; every TML-bench "
            f"database has {', '.join(key)} (is this a TML-bench results database?)"
        )
    known_set = set(known)
    for rowid, *values in cur:
        row = dict(zip(columns, values, strict=True))
        if table == "baselines":
            where = f"{path}#baselines.{row.get('competition_id')}/{row.get('baseline_type')}"
        elif row.get("run_id"):
            where = f"{path}#runs.run_id={row['run_id']}"
        else:
            where = f"{path}#runs row {rowid}"
        yield Row(
            where=where,
            values={c: row.get(c) for c in known},
            unknown={c: v for c, v in row.items() if c not in known_set and v is not None},
        )


# ---------------------------------------------------------------------------------------------
# result.json files


def read_result_tree(folder: Path) -> Source:
    """Every run folder's ``result.json`` under ``folder`` (the folder itself may be one).

    A run folder is never descended into: its ``workspace/`` holds the agent's own files, and a
    ``result.json`` written there must not count as a result.
    """
    paths = sorted(_result_files(folder))
    if not paths:
        raise TmlbenchError(
            f"{folder}: no {RESULT_FILE} files found (expected runs/<run_id>/{RESULT_FILE})"
        )
    source = Source()
    for path in paths:
        try:
            data = json.loads(path.read_bytes())
            source.runs.append(flatten_result(data, str(path)))
        except (OSError, ValueError) as exc:
            source.rejected.append((str(path), f"{path}: {exc}"))
    return source


def _result_files(folder: Path) -> Iterator[Path]:
    for root, dirs, files in os.walk(folder):
        if RESULT_FILE in files:
            yield Path(root) / RESULT_FILE
            dirs.clear()
        elif WORKSPACE_DIR in dirs:
            dirs.remove(WORKSPACE_DIR)


def flatten_result(data: Any, where: str) -> Row:
    """A result.json document as the ``runs`` row insert_run would write for it."""
    if not isinstance(data, dict):
        raise ValueError("not a TML-bench result: expected a JSON object at the top level")
    values: dict[str, Any] = dict.fromkeys(RUN_COLUMNS)
    unknown: dict[str, Any] = {}
    extra: dict[str, Any] = {}
    nested: dict[str, Mapping[str, Any]] = {}
    for key, value in data.items():
        if key in _RESULT_TOP:
            values[key] = value
        elif key in _RESULT_NESTED:
            if value is None:
                continue
            if not isinstance(value, dict):
                raise ValueError(f"{key!r} must be an object or null, got {type(value).__name__}")
            nested[key] = value
        elif value is not None:
            unknown[key] = value
    for key, obj in nested.items():
        mapping = _RESULT_NESTED[key]
        for sub, value in obj.items():
            if sub in mapping:
                values[mapping[sub]] = value
            elif not (key == "artifacts" and sub == "notes") and value is not None:
                unknown[f"{key}.{sub}"] = value

    notes = nested.get("artifacts", {}).get("notes")
    notes_dict = notes if isinstance(notes, dict) else {}
    provenance = nested.get("provenance", {})
    for name in _NOTES_FIELDS:
        note = notes_dict.get(name)
        # insert_run: `provenance.x or notes.x` for what provenance has, else notes.x.
        values[name] = (provenance.get(name) or note) if name in _PROVENANCE else note
    if isinstance(notes, dict):
        extra = {f"notes.{k}": v for k, v in notes.items() if k not in _NOTES_FIELDS}
    elif notes is not None:
        extra = {"notes": notes}
    label = values.get("run_id")
    return Row(where=f"{where}#run_id={label}" if label else where, values=values,
               unknown=unknown, extra=extra)  # fmt: skip
