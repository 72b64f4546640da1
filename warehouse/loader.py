"""The runs load: run records into ``raw.runs``, incrementally, idempotently, in one transaction.

Rules (the warehouse half of "records are immutable"):

* keyed by (run_space, run_id): a record's space is the folder holding its run folder, relative
  to ``runs_dir`` (a suite's runs_subdir: load from the runs root), an import's is its source;
  a record already loaded with the same content hash (sha256 of the file's bytes) is
  *unchanged*; the same run with other content is *rejected*, never overwritten
  (``warehouse.verdicts``);
* a malformed record (bad JSON, schema violation, unknown status, out-of-range value) is
  rejected with a message naming the file and the problem, and the others still load
  (``warehouse.parse``);
* one transaction per load: all new rows go in together, or (on any failure) none do.

Speed: a load grows with what is new, not with what exists. The scan stats each ``record.json``
(``warehouse.record_files``), the index of the files loaded (``warehouse.record_index``) says
which to read; the files read go in batches of ``BULK_BATCH``, parsed in bulk by pyarrow
(``warehouse.bulk_records``), judged and inserted one batch while the next is read. ``prefixes``
limits a load to the run folders whose paths below ``runs_dir`` start with them (``<suite's
runs_subdir>/<run id prefix>``: the settings a Dagster materialization just ran). A load also
mirrors the suites' resumption logs it finds (``warehouse.resumptions``).

This module is also the one import of a caller that loads: ``load_specs`` and ``SpecReport``
(``warehouse.specs``) and ``content_version`` (``warehouse.db``) are importable from here.
"""

from __future__ import annotations

import collections
import contextlib
import datetime as dt
import gc
import itertools
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.compute as pc

from runner.errors import TmlbenchError
from warehouse import record_index
from warehouse.db import apply_ddl, content_version
from warehouse.parse import (
    ORIGIN,
    RUN_FIELDS,
    Candidate,
    Refusal,
    RunSpaces,
    batch_schema,
    beside,
    candidate_rows,
    parse_files,
    run_columns,
)
from warehouse.record_files import ReadFile, Unreadable, read_record_file, scan_record_files
from warehouse.record_index import STAT_COLUMNS, ToRead
from warehouse.resumptions import load_resumptions
from warehouse.specs import SpecReport, load_specs
from warehouse.verdicts import Judge

__all__ = [
    "BULK_BATCH",
    "SOURCE_TMLBENCH",
    "Candidate",
    "LoadReport",
    "SpecReport",
    "content_version",
    "ingest",
    "load_runs",
    "load_specs",
]

SOURCE_TMLBENCH = "tmlbench"
# Files per batch (parsed together, then inserted): bounds the memory a load of a million
# records needs, and is large enough that the per-batch queries on raw.runs stay cheap.
BULK_BATCH = 10_000

_TIMESTAMP = pa.timestamp("us", tz="UTC")


@dataclass(frozen=True)
class LoadReport:
    """What one load did: rows inserted, records already there, records refused (path, why).

    ``parsed`` (not part of equality) counts the files this load parsed: the others were known
    from the index, or read and found unchanged by their hash.
    """

    new: int
    unchanged: int
    rejected: list[tuple[str, str]] = field(default_factory=list)
    parsed: int = field(default=0, compare=False)

    @property
    def total(self) -> int:
        return self.new + self.unchanged + len(self.rejected)


def load_runs(
    con: duckdb.DuckDBPyConnection,
    runs_dir: Path,
    *,
    prefixes: Sequence[str] | None = None,
    rehash: bool = False,
) -> LoadReport:
    """Ingest every ``record.json`` under ``runs_dir`` (workspaces are never searched).

    ``prefixes``: only the run folders whose paths below ``runs_dir`` start with one of them
    (``name`` or ``sub/name``). ``rehash``: read and hash every file, not only those whose stat changed.
    """
    runs_dir = Path(runs_dir)
    if not runs_dir.is_dir():
        raise TmlbenchError(f"runs directory {runs_dir} does not exist")
    with _collector_paused():
        return _load_runs(con, runs_dir.resolve(), prefixes, rehash)


def ingest(
    con: duckdb.DuckDBPyConnection,
    candidates: Sequence[Candidate],
    rejected: Iterable[tuple[str, str]] = (),
    *,
    source: str,
    in_transaction: Callable[[duckdb.DuckDBPyConnection], None] | None = None,
) -> LoadReport:
    """Insert the candidates that are new, in one transaction; report unchanged and conflicts.

    ``in_transaction`` runs after the insert, inside the same transaction (importers use it to
    add agents and renumber attempts), so it too is all-or-nothing. The runs' space is
    ``source``: an import's run ids are unique within its source.
    """
    apply_ddl(con)
    columns = run_columns(con)
    load = _Load(con, source)
    modelled, kept, refused = candidate_rows(candidates, columns)
    load.rejected += [*rejected, *refused]
    chosen = [candidates[k] for k in kept]
    n = len(chosen)
    origin = pa.table(
        {
            "run_space": pa.array([source] * n, pa.string()),
            "source_path": pa.array([c.source_path for c in chosen], pa.string()),
            "record_sha256": pa.array([c.record_sha256 for c in chosen], pa.string()),
            "source_fields": pa.array([c.source_fields for c in chosen], pa.string()),
            **{name: pa.nulls(n, pa.int64()) for name in STAT_COLUMNS},
        }
    )
    with _transaction(con):
        if n:
            load.ingest(beside(modelled, origin).cast(batch_schema(columns)))
        if in_transaction is not None:
            in_transaction(con)
    return load.report()


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    """Python's cyclic garbage collector off for the duration: a load makes a few objects per
    record file and no cycles, and each full collection would walk all of them again (it showed
    in the profile of a 100k load; a million records make millions of objects)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _load_runs(
    con: duckdb.DuckDBPyConnection, root: Path, prefixes: Sequence[str] | None, rehash: bool
) -> LoadReport:
    apply_ddl(con)
    scanned = scan_record_files(root, prefixes)
    known = record_index.lookup(con, root, scanned, rehash)
    columns = run_columns(con)
    spaces = RunSpaces(root)
    files = known.to_read

    load = _Load(con, SOURCE_TMLBENCH)
    refreshed = parsed = 0
    # A pipeline of two: while a worker reads and parses one batch (Python, then pyarrow on both
    # cores), this thread inserts the one before (DuckDB, off the GIL). One worker, not a reader
    # and a parser: threads that all want the GIL only slow each other (measured).
    with _transaction(con), ThreadPoolExecutor(1, thread_name_prefix="tmlbench-read") as worker:
        parts = (files[i : i + BULK_BATCH] for i in range(0, len(files), BULK_BATCH))
        ahead = collections.deque(
            worker.submit(_read_batch, part, spaces, columns) for part in itertools.islice(parts, 2)
        )
        while ahead:
            batch = ahead.popleft().result()
            for part in itertools.islice(parts, 1):
                ahead.append(worker.submit(_read_batch, part, spaces, columns))
            load.rejected += batch.rejected
            if batch.table is not None:
                load.ingest(batch.table)
            if batch.refreshed.num_rows:
                load.index(batch.refreshed)
            refreshed += batch.refreshed.num_rows
            parsed += batch.parsed
        load.write_index()
        load.rejected += load_resumptions(con, root, scanned.folders, prefixes is None)
        if prefixes is None and known.stale is not None:
            # a full scan saw every file under root: index rows of files gone since are dropped
            record_index.prune(con, root, known.stale)
    return load.report(unchanged=known.unchanged + refreshed, parsed=parsed)


@dataclass
class _Batch:
    """Files read and parsed together: rows to ingest, files refused (unreadable first), and
    files read again whose content is loaded already (only their index rows are refreshed)."""

    table: pa.Table | None
    rejected: list[Refusal]
    refreshed: pa.Table  # their index rows
    parsed: int


def _read_batch(files: Sequence[ToRead], spaces: RunSpaces, columns: dict[str, str]) -> _Batch:
    """Read ``files``; parse those that are new or changed (not the bytes their index row
    has)."""
    unreadable: list[Refusal] = []
    refreshed: list[ReadFile] = []
    refreshed_ids: list[str] = []
    to_parse: list[ReadFile] = []
    for file in files:
        item = read_record_file(file.path, file.stat)
        if isinstance(item, Unreadable):
            unreadable.append((item.path, item.message))
        elif file.indexed is not None and file.indexed[0] == item.sha256:
            refreshed.append(item)
            refreshed_ids.append(file.indexed[1])
        else:
            to_parse.append(item)
    table, rejected = parse_files(to_parse, spaces, columns)
    return _Batch(
        table,
        unreadable + rejected,
        record_index.index_rows(refreshed, refreshed_ids),
        len(to_parse),
    )


class _Load:
    """One load's transaction: its batches judged (``warehouse.verdicts``) and their new runs
    inserted as they come, then the index of the record files it saw, at once."""

    def __init__(self, con: duckdb.DuckDBPyConnection, source: str) -> None:
        self.con = con
        self.source = source
        self.loaded_at = dt.datetime.now(dt.UTC)
        self.new = 0
        self.unchanged = 0
        self.rejected: list[Refusal] = []
        self._judge = Judge(con)
        self._index_rows: list[pa.Table] = []

    def report(self, unchanged: int = 0, parsed: int = 0) -> LoadReport:
        return LoadReport(self.new, self.unchanged + unchanged, self.rejected, parsed)

    def ingest(self, batch: pa.Table) -> None:
        """Insert the batch's new runs, keep its record files for the index, and report its
        conflicts."""
        judged = self._judge.judge(batch)
        new, unchanged = judged.new, judged.unchanged
        if pc.any(new).as_py():
            rows = batch if pc.all(new).as_py() else batch.filter(new)
            _insert_runs(self.con, _runs_rows(rows, self.source, self.loaded_at))
            self._judge.inserted(rows, judged.key_hashes[new.to_numpy(zero_copy_only=False)])
        files = batch.select(["source_path", *STAT_COLUMNS, "record_sha256", "run_id"])
        indexed = files.filter(pc.and_(pc.or_(new, unchanged), pc.is_valid(files.column("size"))))
        if indexed.num_rows:
            self.index(indexed.rename_columns(["path", *files.column_names[1:]]))
        self.new += pc.sum(new).as_py() or 0
        self.unchanged += pc.sum(unchanged).as_py() or 0
        self.rejected += judged.conflicts(batch)

    def index(self, rows: pa.Table) -> None:
        """Record files (rows of raw.record_files but ``indexed_at``) to index when the load
        ends, their content being in raw.runs."""
        self._index_rows.append(rows)

    def write_index(self) -> None:
        if self._index_rows:
            record_index.write(self.con, pa.concat_tables(self._index_rows), self.loaded_at)


@contextlib.contextmanager
def _transaction(con: duckdb.DuckDBPyConnection) -> Iterator[None]:
    """One transaction: committed whole, or rolled back (a database error is reported as a load
    that failed and loaded nothing)."""
    con.execute("begin transaction")
    try:
        yield
        con.execute("commit")
    except BaseException as exc:
        con.execute("rollback")
        if isinstance(exc, duckdb.Error):
            raise TmlbenchError(
                f"loading into raw.runs failed, nothing was loaded (rolled back): {exc}"
            ) from exc
        raise


def _runs_rows(batch: pa.Table, source: str, loaded_at: dt.datetime) -> pa.Table:
    """raw.runs rows of a batch's records."""
    n = batch.num_rows
    rows = batch.select([*RUN_FIELDS, *ORIGIN])
    rows = rows.append_column("source", pa.array([source] * n, pa.string()))
    return rows.append_column("loaded_at", pa.array([loaded_at] * n, _TIMESTAMP))


def _insert_runs(con: duckdb.DuckDBPyConnection, table: pa.Table) -> None:
    con.register("_tmlbench_new_runs", table)
    try:
        con.execute("insert into raw.runs by name select * from _tmlbench_new_runs")
    finally:
        con.unregister("_tmlbench_new_runs")
