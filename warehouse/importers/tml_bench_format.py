"""What the original TML-bench harness writes, read as it writes it (nothing mapped yet).

The authority is its source, MykolaPinchuk/TML-bench: ``orchestrator/db.py`` (``ensure_db``
creates ``runs`` and ``baselines`` and migrates older databases by appending columns;
``insert_run`` flattens a result into a ``runs`` row) and ``orchestrator/result.py``
(``RunResult``; ``write_result_json`` writes ``runs/<run_id>/result.json``).

Every schema generation its migrations allow is read: a database from before a column was added
simply lacks it (the first one has 13 columns, the current one 31), and any value may be NULL.
A column or field this module does not know is kept (``Row.unknown``) rather than refused.

Results are downloaded from others, so every file is read as hostile data, with bounds a real
source is far inside (``Limits``): files are opened only through ``warehouse.record_files``
(never through a symbolic link, only regular files: no FIFO or device is ever opened, reads are
bounded); folders are walked without recursion, to a depth and a number of entries; JSON is
nested at most ``MAX_JSON_DEPTH`` deep; the SQLite database is opened as a descriptor of a
regular file, immutable (SQLite writes nothing beside it), with a cap on every value's length
and a deadline on the reading. A source past a bound is refused with what to do (TmlbenchError),
a file past one is a rejected row.
"""

from __future__ import annotations

import json
import os
import sqlite3
import stat
import time
from collections import deque
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from runner.errors import TmlbenchError
from warehouse.record_files import Unreadable, open_regular_file, read_record_file

RESULT_FILE = "result.json"
WORKSPACE_DIR = "workspace"  # runs/<run_id>/workspace: the agent's files, never searched

# A result.json is ~3 KB nested 4 deep (artifacts.notes.kilo.argv): these bounds are far above
# any real one, and far below what hurts.
RESULT_MAX_BYTES = 1 << 20
MAX_JSON_DEPTH = 32
LABEL_MAX_CHARS = 120  # of a run id in the name of its row (a hostile id may be 1 MiB long)


@dataclass(frozen=True)
class Limits:
    """How much one import reads, over all its sources (runs and baselines rows, bytes of
    values), and how far a folder walk goes (``max_depth`` folders below the one named)."""

    # The original's own benchmark is a few thousand runs (~800 bytes each in its database);
    # 50,000 rows take 0.9 GB and 9 s to import; 64 MiB of hostile values stay within 1 GiB.
    max_rows: int = 50_000
    max_bytes: int = 64 << 20
    max_depth: int = 16  # runs/<suite>/<run_id>/ is 2 deep
    max_entries: int = 200_000
    max_value_bytes: int = 1 << 20  # one database value
    max_seconds: float = 120.0  # reading one database


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
    """What one import's databases and result.json trees hold, read within ``limits``."""

    limits: Limits = field(default_factory=Limits)
    runs: list[Row] = field(default_factory=list)
    baselines: list[Row] = field(default_factory=list)
    rejected: list[tuple[str, str]] = field(default_factory=list)  # (where, why)
    rows_read: int = 0
    bytes_read: int = 0

    def count(self, where: object, nbytes: int) -> None:
        """Count one row of ``nbytes`` toward the limits; TmlbenchError past one of them."""
        self.rows_read += 1
        self.bytes_read += nbytes
        if self.rows_read > self.limits.max_rows:
            raise TmlbenchError(
                f"{where}: more than {self.limits.max_rows:,} rows in this import, far more than "
                "any TML-bench benchmark holds; if it is one, import it in parts"
            )
        if self.bytes_read > self.limits.max_bytes:
            raise TmlbenchError(
                f"{where}: more than {self.limits.max_bytes >> 20:,} MiB of values in this "
                "import, far more than any TML-bench benchmark holds; if it is one, import it "
                "in parts"
            )


# ---------------------------------------------------------------------------------------------
# the SQLite database


def read_database(path: Path, into: Source | None = None) -> Source:
    """Every row of ``runs`` and (if present) ``baselines``, added to ``into`` (a new Source by
    default); TmlbenchError if it is not a readable TML-bench database, or too large."""
    source = Source() if into is None else into
    limits = source.limits
    fd = open_regular_file(str(path), "a TML-bench results database")
    if isinstance(fd, Unreadable):
        raise TmlbenchError(f"{fd.message} (name the SQLite file itself)")
    try:
        # The descriptor, not the name: the file checked is the file read. Immutable: SQLite
        # takes no lock and writes nothing (no journal, no -wal), the file being data.
        con = sqlite3.connect(f"file:/proc/self/fd/{fd}?mode=ro&immutable=1", uri=True)
    except sqlite3.Error as exc:
        os.close(fd)
        raise TmlbenchError(f"{path}: cannot open as SQLite: {exc}") from None
    try:
        con.text_factory = _text
        con.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, limits.max_value_bytes)
        deadline = time.monotonic() + limits.max_seconds
        con.set_progress_handler(lambda: time.monotonic() > deadline, 100)  # VM steps
        try:
            tables = _tables(con)
            if "runs" not in tables:
                names = sorted(label(repr(name)) for name in tables)
                more = f" and {len(names) - 10:,} more" if len(names) > 10 else ""
                raise TmlbenchError(
                    f"{path}: not a TML-bench results database (it has no table 'runs'; "
                    f"tables: {', '.join(names[:10]) or 'none'}{more})"
                )
            source.runs += _table_rows(con, path, "runs", RUN_COLUMNS, RUN_KEY_COLUMNS, source)
            if "baselines" in tables:
                source.baselines += _table_rows(
                    con, path, "baselines", BASELINE_COLUMNS, BASELINE_KEY_COLUMNS, source
                )
        except (sqlite3.Error, UnicodeDecodeError) as exc:  # the latter: a name in its schema
            raise TmlbenchError(_database_problem(path, exc, limits)) from None
        return source
    finally:
        con.close()
        os.close(fd)


def _text(data: bytes) -> str | bytes:
    """A TEXT value: its bytes when they are not UTF-8, which a text column refuses by name."""
    try:
        return data.decode()
    except UnicodeDecodeError:
        return data


def _database_problem(path: Path, exc: Exception, limits: Limits) -> str:
    if isinstance(exc, sqlite3.DataError) and "too big" in str(exc):
        return (
            f"{path}: holds a value larger than {limits.max_value_bytes:,} bytes, which no "
            "TML-bench database column holds: not imported (is this a TML-bench database?)"
        )
    if "interrupted" in str(exc):
        return (
            f"{path}: reading took longer than {limits.max_seconds:.0f} s: not imported (a "
            "TML-bench database reads in seconds; is this one?)"
        )
    return f"{path}: not a readable SQLite database: {exc}"


def _tables(con: sqlite3.Connection) -> set[str]:
    # Tables only: a view (which may loop or multiply rows) is never read.
    rows = con.execute("select name from sqlite_master where type = 'table'").fetchall()
    return {name for (name,) in rows if isinstance(name, str)}


def _table_rows(
    con: sqlite3.Connection,
    path: Path,
    table: str,
    known: tuple[str, ...],
    key: tuple[str, ...],
    source: Source,
) -> list[Row]:
    cur = con.execute(f'select * from "{table}"')
    columns = [str(d[0]) for d in cur.description]
    missing = [c for c in key if c not in columns]
    if missing:
        raise TmlbenchError(
            f"{path}: table {table} has no column {', '.join(missing)}; every TML-bench "
            f"database has {', '.join(key)} (is this a TML-bench results database?)"
        )
    known_set = set(known)
    rows: list[Row] = []
    for number, values in enumerate(cur, 1):  # names a row that has no run_id
        row = dict(zip(columns, values, strict=True))
        if table == "baselines":
            comp, kind = label(row.get("competition_id")), label(row.get("baseline_type"))
            where = f"{path}#baselines.{comp}/{kind}"
        elif row.get("run_id"):
            where = f"{path}#runs.run_id={label(row['run_id'])}"
        else:
            where = f"{path}#runs row {number}"
        source.count(where, sum(map(_size, values)) + sum(map(len, columns)))
        rows.append(
            Row(
                where=where,
                values={c: row.get(c) for c in known},
                unknown={c: v for c, v in row.items() if c not in known_set and v is not None},
            )
        )
    return rows


def _size(value: Any) -> int:
    """Bytes ``value`` takes once stored (as JSON, where unknown values go): a control or
    non-ASCII character is six (``\\u0001``), a byte two (hex)."""
    if isinstance(value, str):
        return len(value) if value.isascii() and value.isprintable() else len(json.dumps(value))
    return 2 * len(value) if isinstance(value, bytes) else 8


def label(value: Any) -> str:
    """A value from the source as part of a row's name: clipped, so a name stays a name."""
    text = str(value)
    if len(text) <= LABEL_MAX_CHARS:
        return text
    return f"{text[:LABEL_MAX_CHARS]}…({len(text) - LABEL_MAX_CHARS:,} more characters)"


# ---------------------------------------------------------------------------------------------
# result.json files


def read_result_tree(folder: Path, into: Source | None = None) -> Source:
    """Every run folder's ``result.json`` under ``folder`` (the folder itself may be one), added
    to ``into`` (a new Source by default).

    A run folder is never descended into: its ``workspace/`` holds the agent's own files, and a
    ``result.json`` written there must not count as a result. A file that cannot be a result (a
    link, a FIFO, too large, JSON nested too deep) is a rejected row, named.
    """
    source = Source() if into is None else into
    found = len(source.runs) + len(source.rejected)
    for path, st in _result_files(folder, source):
        item = read_record_file(str(path), st, RESULT_MAX_BYTES, f"a TML-bench {RESULT_FILE}")
        if isinstance(item, Unreadable):
            source.rejected.append((item.path, item.message))
            continue
        source.count(path, len(item.data))
        try:
            source.runs.append(flatten_result(load_json(item.data), str(path)))
        except ValueError as exc:
            source.rejected.append((str(path), f"{path}: {exc}"))
    if len(source.runs) + len(source.rejected) == found:
        raise TmlbenchError(
            f"{folder}: no {RESULT_FILE} files found (expected runs/<run_id>/{RESULT_FILE})"
        )
    return source


def _result_files(folder: Path, source: Source) -> Iterator[tuple[Path, os.stat_result]]:
    """Each run folder's result.json and its ``lstat``, in name order, breadth first.

    Iterative (a deep tree cannot exhaust the stack) and bounded: folders deeper than
    ``max_depth`` below ``folder`` are not searched, and a tree of more than ``max_entries``
    entries is refused; both are said. Links are never followed: a link where a run folder
    could be is reported, since the results behind it are not imported.
    """
    limits = source.limits
    root = os.fspath(folder)
    try:
        if stat.S_ISLNK(os.lstat(root).st_mode):
            raise TmlbenchError(f"{root}: is a symbolic link; links are never followed (name "
                                "the folder itself)")  # fmt: skip
    except OSError as exc:
        raise TmlbenchError(f"{root}: cannot read: {exc.strerror or exc}") from None
    pending: deque[tuple[str, int]] = deque([(root, 0)])
    entries = 0
    while pending:
        current, depth = pending.popleft()
        listed: list[os.DirEntry[str]] = []
        try:
            with os.scandir(current) as it:
                for entry in it:  # counted as listed: a folder of millions is never held
                    listed.append(entry)
                    entries += 1
                    if entries > limits.max_entries:
                        break
        except OSError as exc:
            source.rejected.append((current, f"{current}: cannot list: {exc.strerror or exc}"))
            continue
        listed.sort(key=lambda e: e.name)
        if entries > limits.max_entries:
            raise TmlbenchError(
                f"{root}: more than {limits.max_entries:,} files and folders: not a folder of "
                f"TML-bench results; name its runs/ folder (or run folders) instead"
            )
        names = {e.name: e for e in listed}
        result = names.get(RESULT_FILE)
        if result is not None:
            try:
                yield Path(result.path), result.stat(follow_symlinks=False)
            except OSError as exc:
                source.rejected.append((result.path, f"{result.path}: {exc.strerror or exc}"))
            continue  # a run folder: never searched further
        for entry in listed:
            if entry.name == WORKSPACE_DIR:
                continue
            if entry.is_symlink():
                source.rejected.append(
                    (entry.path, f"{entry.path}: is a symbolic link; links are never followed")
                )
            elif entry.is_dir(follow_symlinks=False):
                if depth < limits.max_depth:
                    pending.append((entry.path, depth + 1))
                else:
                    source.rejected.append(
                        (
                            entry.path,
                            f"{entry.path}: more than {limits.max_depth} folders below {root}: "
                            "not searched (results are at runs/<run_id>/result.json: name a "
                            "folder nearer to them)",
                        )
                    )


def load_json(data: bytes) -> Any:
    """A JSON document nested at most ``MAX_JSON_DEPTH`` deep (ValueError: why it is not one).

    The parser is recursive (a deeper document raises RecursionError, caught here), and so is
    everything that later walks the value; the depth is checked on the parsed value, without
    recursion, so every document past the bound is refused alike.
    """
    try:
        value = json.loads(data)
    except RecursionError:
        raise ValueError(f"JSON nested deeper than {MAX_JSON_DEPTH} levels") from None
    except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError, a 5,000-digit number
        raise ValueError(f"not JSON: {exc}") from None
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        children = (
            node.values() if isinstance(node, dict) else node if isinstance(node, list) else ()
        )
        for child in children:
            if isinstance(child, dict | list):
                if depth >= MAX_JSON_DEPTH:
                    raise ValueError(f"JSON nested deeper than {MAX_JSON_DEPTH} levels")
                stack.append((child, depth + 1))
    return value


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
    run_id = values.get("run_id")
    return Row(where=f"{where}#run_id={label(run_id)}" if run_id else where, values=values,
               unknown=unknown, extra=extra)  # fmt: skip
