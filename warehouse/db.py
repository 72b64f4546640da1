"""Where the warehouse lives and how to open it: one DuckDB file, the raw schema applied idempotently."""

from __future__ import annotations

import contextlib
import os
import re
import secrets
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from runner.config import REPO_ROOT
from runner.errors import TmlbenchError

if TYPE_CHECKING:
    import duckdb

WAREHOUSE_ENV = "TMLBENCH_WAREHOUSE"
DEFAULT_WAREHOUSE = REPO_ROOT / "warehouse" / "tmlbench.duckdb"
RAW_DDL = Path(__file__).resolve().parent / "ddl" / "raw.sql"


def warehouse_path(environ: dict[str, str] | None = None) -> Path:
    """The warehouse file: ``$TMLBENCH_WAREHOUSE`` or ``<repo>/warehouse/tmlbench.duckdb``."""
    env = os.environ if environ is None else environ
    value = env.get(WAREHOUSE_ENV)
    return Path(value).expanduser().resolve() if value else DEFAULT_WAREHOUSE


def connect(path: Path | str | None = None, read_only: bool = False) -> duckdb.DuckDBPyConnection:
    """Open the warehouse file (``warehouse_path()`` when ``path`` is None).

    Every problem a user can fix (file locked by another process, missing file for a
    read-only connection, not a DuckDB file) becomes a TmlbenchError naming the path.
    """
    import duckdb  # here, not at the top: the CLI lists its commands without loading DuckDB

    path = warehouse_path() if path is None else Path(path)
    if read_only and not path.is_file():
        raise TmlbenchError(
            f"no warehouse at {path}; create it with: tmlbench warehouse load "
            f"(or point {WAREHOUSE_ENV} / --warehouse at an existing file)"
        )
    if not read_only:
        path.parent.mkdir(parents=True, exist_ok=True)
    try:
        return duckdb.connect(str(path), read_only=read_only)
    except duckdb.IOException as exc:
        message = str(exc)
        if "lock" in message.lower():
            raise TmlbenchError(
                f"the warehouse {path} is locked by another process ({_lock_holder(message)}). "
                f"DuckDB allows one writer, or any number of readers, per file: close the other "
                f"connection (a running tmlbench load/import, dbt build, Dagster job or the app) "
                f"and try again, or set {WAREHOUSE_ENV} to another file."
            ) from None
        raise TmlbenchError(f"cannot open the warehouse {path}: {message}") from None
    except duckdb.Error as exc:
        raise TmlbenchError(f"cannot open the warehouse {path}: {exc}") from None


@contextlib.contextmanager
def all_or_nothing(
    path: Path, keep_new: Callable[[], bool] = lambda: True
) -> Iterator[duckdb.DuckDBPyConnection]:
    """A read-write connection to the warehouse at ``path`` for work that leaves the disk as it
    was when it fails (an import: its writes are one transaction).

    An existing warehouse is opened in place: the work's transaction rolls back. A new one is
    built in a hidden file beside ``path`` and moved there only when the block returns and
    ``keep_new()`` says it holds something, so a failure, or a kill, never leaves an empty or
    half-made warehouse at ``path`` (the folders made for it are removed again too).
    """
    if path.exists():
        con = connect(path)
        try:
            yield con
        finally:
            con.close()
        return
    made = [folder for folder in (path.parent, *path.parent.parents) if not folder.exists()]
    building = path.with_name(f".{path.name}.{secrets.token_hex(4)}.building")
    con = connect(building)
    try:
        try:
            yield con
        finally:
            con.close()  # checkpoints: the database is one file, its WAL is gone
        if not keep_new():
            return
        try:
            os.link(building, path)  # unlike a rename, never replaces a warehouse made since
        except FileExistsError:
            raise TmlbenchError(
                f"the warehouse {path} was created by another process during this command; "
                "run it again (it will add to that warehouse)"
            ) from None
    finally:
        for leftover in (building, building.with_name(building.name + ".wal")):
            leftover.unlink(missing_ok=True)
        for folder in made:  # deepest first
            with contextlib.suppress(OSError):  # not empty: the warehouse is in it
                folder.rmdir()


def _lock_holder(message: str) -> str:
    """The 'held in <program> (PID n)' part of DuckDB's lock message, if it has one."""
    match = re.search(r"Conflicting lock is held in (.*?\(PID \d+\))", message)
    if match:
        return f"held by {match.group(1)}"
    return message.strip().splitlines()[0]


def apply_ddl(con: duckdb.DuckDBPyConnection) -> None:
    """Create the raw schema and its tables if they are not there yet (safe to call every time)."""
    ddl = RAW_DDL.read_text(encoding="utf-8")
    con.execute(ddl)
    if "run_space" not in _columns(con, "raw", "runs"):
        _add_run_spaces(con, ddl)


def _columns(con: duckdb.DuckDBPyConnection, schema: str, table: str) -> set[str]:
    rows = con.execute(
        "select column_name from duckdb_columns() where schema_name = ? and table_name = ?",
        [schema, table],
    ).fetchall()
    return {name for (name,) in rows}


def _add_run_spaces(con: duckdb.DuckDBPyConnection, ddl: str) -> None:
    """Rebuild a raw.runs keyed by run_id alone (before run spaces) keyed by (run_space, run_id).

    DuckDB cannot change a primary key in place, so the rows move to a new table in one
    transaction. A record's space is the name of the folder holding its run folder (what a suite's
    runs_subdir names; a suite whose runs_subdir is '.' gets the runs root's name instead: delete
    the warehouse and load again to fix that); an imported run's is its source.
    """
    con.execute("begin transaction")
    try:
        con.execute("alter table raw.runs rename to runs_before_run_spaces")
        con.execute(ddl)
        con.execute(
            "insert into raw.runs by name select *, case when source = 'tmlbench' then "
            r"coalesce(nullif(regexp_extract(source_path, '([^/]+)/[^/]+/[^/]+$', 1), ''), '.')"
            " else source end as run_space from raw.runs_before_run_spaces"
        )
        con.execute("drop table raw.runs_before_run_spaces")
        con.execute("commit")
    except BaseException:
        con.execute("rollback")
        raise


def one_row(con: duckdb.DuckDBPyConnection, query: str) -> tuple[Any, ...]:
    """The row of ``query``, which always returns one (an aggregate without ``group by``)."""
    row = con.execute(query).fetchone()
    if row is None:
        raise RuntimeError(f"no row from a query that always returns one: {query}")
    return row


def content_version(con: duckdb.DuckDBPyConnection, table: str) -> str:
    """A fingerprint of a raw table's content (every column but ``loaded_at``, where it has one):
    the same rows give the same value, whenever and however they were loaded. Dagster's data
    version."""
    count, digest = con.execute(
        f"select count(*), bit_xor(hash(*columns(c -> c != 'loaded_at'))) from {table}"
    ).fetchone() or (0, None)
    return f"{count}-{digest or 0:016x}"
