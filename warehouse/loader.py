"""Load run records into ``raw.runs`` (and task/agent/suite specs into ``raw.tasks``,
``raw.agents`` and ``raw.suites``).

Rules (the warehouse half of "records are immutable"):

* keyed by (run_space, run_id): a record's space is the folder holding its run folder, relative
  to ``runs_dir`` (a suite's runs_subdir: load from the runs root), an import's is its source;
  a record already loaded with the same content hash (sha256 of the file's bytes) is
  *unchanged*; the same run with other content is *rejected*, never overwritten;
* a malformed record (bad JSON, schema violation, unknown status, out-of-range value) is
  rejected with a message naming the file and the problem, and the others still load;
* one transaction per load: all new rows go in together, or (on any failure) none do.

Speed: a load grows with what is new, not with what exists.

* ``raw.record_files`` indexes every file loaded (path, size, mtime, ctime, inode, sha256): a
  scan stats each ``record.json`` (one ``lstat`` per run folder, warehouse/record_files.py) and
  only files that are new, whose stat changed, or whose run is no longer loaded are read. A file
  read again is hashed: the same content is unchanged (its index row is refreshed), other
  content under a loaded run_id is the immutability violation it always was. ``rehash=True``
  reads and hashes every file (no parse for the unchanged): a change that kept size, mtime,
  ctime and inode (only possible by writing the disk under the filesystem or resetting the
  clock) is seen then.
* New files are parsed in bulk by pyarrow's JSON reader and checked in Arrow compute
  (warehouse/bulk_records.py: both cores, no Python object per record); only those its strict
  checks do not accept go through pydantic one by one, so a rejection reads exactly as it
  always did.
* ``prefixes`` limits a load to the run folders whose paths below ``runs_dir`` start with them
  (``<suite's runs_subdir>/<run id prefix>``: the settings a Dagster materialization just ran).

Resumptions: the folders a load searches for run folders are where a suite keeps its resumption
log (``runner.suites.resumptions``); ``raw.resumptions`` mirrors each log it finds, one row per
forgiven run id, so the marts' fault ceilings forgive what the runner's do. The log is
append-only but a copied folder may lack it: a log gone is gone from the table too (the runner
would forgive nothing). A malformed line is refused like a record (the others load); a log that
cannot be read (a link, too large, not UTF-8) keeps the rows it had.
"""

from __future__ import annotations

import collections
import contextlib
import datetime as dt
import gc
import hashlib
import itertools
import operator
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pydantic import ValidationError

from runner.attempts import RunRecord, run_space
from runner.config import Paths
from runner.errors import TmlbenchError, describe_validation_error
from runner.specs import (
    AgentSpec,
    SpecProblem,
    SuiteSpec,
    TaskSpec,
    list_agents,
    list_suites,
    list_tasks,
    task_spec_sha256,
)
from runner.suites import RESUMPTIONS_FILE, RESUMPTIONS_MAX_BYTES, parse_resumption
from warehouse.bulk_records import FieldRule, arrow_type, bulk_parse, check_columns, field_rules
from warehouse.db import apply_ddl
from warehouse.record_files import (
    ReadFile,
    ScannedFiles,
    Unreadable,
    read_record_file,
    resumption_log,
    scan_record_files,
)

SOURCE_TMLBENCH = "tmlbench"
RUN_FIELDS: tuple[str, ...] = tuple(RunRecord.model_fields)
_FIELD_GETTER = operator.itemgetter(*RUN_FIELDS)
BOOKKEEPING = ("run_space", "source", "source_path", "record_sha256", "loaded_at", "source_fields")
RULES: tuple[FieldRule, ...] = tuple(field_rules())
# Files per batch (parsed together, then inserted): bounds the memory a load of a million
# records needs, and is large enough that the per-batch queries on raw.runs stay cheap.
BULK_BATCH = 10_000

_TIMESTAMP = pa.timestamp("us", tz="UTC")
_INT_RANGES = {"INTEGER": (-(2**31), 2**31 - 1), "BIGINT": (-(2**63), 2**63 - 1)}


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


@dataclass(frozen=True)
class Candidate:
    """One parsed, valid record on its way in: where it came from and its content hash."""

    record: RunRecord
    source_path: str
    record_sha256: str
    # Imports: JSON of the source's fields that raw.runs has no column for.
    source_fields: str | None = None


class _RunSpaces:
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
    indexed, to_read, stale = _index_lookup(con, root, scanned, rehash)
    columns = _run_columns(con)
    spaces = _RunSpaces(root)
    known = {path: hit for path, _, hit in to_read if hit is not None}
    files = [(path, st) for path, st, _ in to_read]

    load = _Load(con, SOURCE_TMLBENCH)
    refreshed = parsed = 0
    # A pipeline of two: while a worker reads and parses one batch (Python, then pyarrow on both
    # cores), this thread inserts the one before (DuckDB, off the GIL). One worker, not a reader
    # and a parser: threads that all want the GIL only slow each other (measured).
    with _transaction(con), ThreadPoolExecutor(1, thread_name_prefix="tmlbench-read") as worker:
        parts = (files[i : i + BULK_BATCH] for i in range(0, len(files), BULK_BATCH))
        ahead = collections.deque(
            worker.submit(_read_batch, part, known, spaces, columns)
            for part in itertools.islice(parts, 2)
        )
        while ahead:
            batch = ahead.popleft().result()
            for part in itertools.islice(parts, 1):
                ahead.append(worker.submit(_read_batch, part, known, spaces, columns))
            load.rejected += batch.rejected
            if batch.table is not None:
                load.ingest(batch.table)
            if batch.refreshed.num_rows:
                load.index(batch.refreshed)
            refreshed += batch.refreshed.num_rows
            parsed += batch.parsed
        load.write_index()
        load.rejected += _load_resumptions(con, root, scanned.folders, prefixes is None)
        if prefixes is None and stale is not None:
            # a full scan saw every file under root: index rows of files gone since are dropped
            _prune_index(con, root, stale)
    return load.report(unchanged=indexed + refreshed, parsed=parsed)


class _Load:
    """One load's transaction: its batches judged and inserted as they come, then the index of
    the record files it saw, at once.

    A batch is judged against raw.runs as it was committed before the load began (read through
    a cursor of its own, which does not see this transaction's rows), and against the keys of
    the runs this load has inserted so far: joining the load's own uncommitted rows for each
    batch cost ~30 s of a load of a million records. Of those keys, only the ones whose hash
    is also a hash of the batch's keys are joined (almost always none): joining all of them made
    a batch's query grow with the load, from 14 ms to 96 ms (~4 s of a million records).
    """

    def __init__(self, con: duckdb.DuckDBPyConnection, source: str) -> None:
        self.con = con
        self.source = source
        self.loaded_at = dt.datetime.now(dt.UTC)
        self.new = 0
        self.unchanged = 0
        self.rejected: list[tuple[str, str]] = []
        self._inserted: list[pa.Table] = []  # _KEYS and key_hash, of the runs inserted so far
        self._inserted_hashes = np.empty(0, np.uint64)  # their key_hash, sorted
        self._index_rows: list[pa.Table] = []

    def report(self, unchanged: int = 0, parsed: int = 0) -> LoadReport:
        return LoadReport(self.new, self.unchanged + unchanged, self.rejected, parsed)

    def ingest(self, batch: pa.Table) -> None:
        """Insert the batch's new runs, keep its record files for the index, and report its
        conflicts."""
        verdicts, key_hashes = self._verdicts(batch)
        verdict = verdicts.column("verdict")
        new = pc.equal(verdict, "new")
        unchanged = pc.equal(verdict, "unchanged")
        if pc.any(new).as_py():
            rows = batch if pc.all(new).as_py() else batch.filter(new)
            _insert_runs(self.con, _runs_rows(rows, self.source, self.loaded_at))
            inserted = key_hashes[new.to_numpy(zero_copy_only=False)]
            self._inserted.append(
                rows.select(list(_KEYS)).append_column("key_hash", pa.array(inserted))
            )
            # Two sorted runs: the stable sort (timsort) merges them in linear time.
            self._inserted_hashes = np.sort(
                np.concatenate([self._inserted_hashes, inserted]), kind="stable"
            )
        files = batch.select(["source_path", *STAT_COLUMNS, "record_sha256", "run_id"])
        indexed = files.filter(pc.and_(pc.or_(new, unchanged), pc.is_valid(files.column("size"))))
        if indexed.num_rows:
            self.index(indexed.rename_columns(["path", *files.column_names[1:]]))
        self.new += pc.sum(new).as_py() or 0
        self.unchanged += pc.sum(unchanged).as_py() or 0
        clashes = batch.select(["source_path", "run_id"]).append_column(
            "loaded_from", verdicts.column("loaded_from")
        )
        conflicts = clashes.filter(pc.equal(verdict, "conflict")).to_pylist()
        for clash in sorted(conflicts, key=lambda c: c["source_path"]):
            path = clash["source_path"]
            self.rejected.append(
                (
                    path,
                    f"records are immutable; {path} differs from the loaded one "
                    f"(loaded from {clash['loaded_from']}, run_id {clash['run_id']})",
                )
            )

    def _verdicts(self, batch: pa.Table) -> tuple[pa.Table, np.ndarray]:
        """Each row's verdict (and where its run was loaded from), and the hash of its key."""
        keys = batch.select(list(_KEYS))
        keys = keys.append_column("k", pa.array(range(batch.num_rows), pa.int64()))
        committed = self.con.cursor()
        try:
            committed.register("_tmlbench_batch", keys)
            hashed = committed.execute(
                "select hash(run_space, run_id) as h from _tmlbench_batch order by k"
            )
            key_hashes = np.asarray(hashed.fetchnumpy()["h"], np.uint64)
            committed.register("_tmlbench_inserted", self._inserted_like(key_hashes))
            return committed.execute(_VERDICTS).fetch_arrow_table(), key_hashes
        finally:
            committed.close()

    def _inserted_like(self, key_hashes: np.ndarray) -> pa.Table:
        """The keys inserted so far that may be among the batch's: those with one of its hashes
        (the same key has the same hash; a hash shared by two keys only costs a join)."""
        seen = self._inserted_hashes
        if len(seen):
            at = np.minimum(np.searchsorted(seen, key_hashes), len(seen) - 1)
            shared = np.unique(key_hashes[seen[at] == key_hashes])
            if len(shared):
                inserted = pa.concat_tables(self._inserted)
                return inserted.filter(pc.is_in(inserted.column("key_hash"), pa.array(shared)))
        return _INSERTED_SCHEMA.empty_table()

    def index(self, rows: pa.Table) -> None:
        """Record files (rows of raw.record_files but ``indexed_at``) to index when the load
        ends, their content being in raw.runs."""
        self._index_rows.append(rows)

    def write_index(self) -> None:
        if self._index_rows:
            _index_files(self.con, pa.concat_tables(self._index_rows), self.loaded_at)


_KEYS = ("run_space", "run_id", "record_sha256", "source_path")
_INSERTED_SCHEMA = pa.schema([*((name, pa.string()) for name in _KEYS), ("key_hash", pa.uint64())])


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


def _stat_columns(stats: Sequence[os.stat_result]) -> dict[str, pa.Array]:
    """What the index keeps of a file's stat, as columns."""
    return {
        "size": pa.array([st.st_size for st in stats], pa.int64()),
        "mtime_ns": pa.array([st.st_mtime_ns for st in stats], pa.int64()),
        "ctime_ns": pa.array([st.st_ctime_ns for st in stats], pa.int64()),
        "inode": pa.array([st.st_ino for st in stats], pa.uint64()),
    }


STAT_COLUMNS = ("size", "mtime_ns", "ctime_ns", "inode")


def _index_lookup(
    con: duckdb.DuckDBPyConnection, root: Path, scanned: ScannedFiles, rehash: bool
) -> tuple[int, list[tuple[str, os.stat_result, tuple[str, str] | None]], pa.Table | None]:
    """What the index knows of the scanned files.

    Returns how many it knows unchanged; the others, sorted by path, each with its stat and the
    (sha256, run_id) the index has for its path (None when it has none); and, when the index
    holds rows of files under ``root`` that the scan did not see, the scanned paths (for
    ``_prune_index``).

    An index row counts only while raw.runs holds its run with its hash: a run deleted from the
    warehouse is read, and loaded, again.
    """
    stats = scanned.stats
    row = con.execute(
        "select count(*) from raw.record_files where starts_with(path, $root)",
        {"root": _folder_prefix(root)},
    ).fetchone()
    if not row or not row[0]:  # nothing indexed here yet (a first load): read everything
        order = sorted(range(len(scanned)), key=scanned.paths.__getitem__)
        return 0, [(scanned.paths[i], stats[i], None) for i in order], None
    files = pa.table(
        {
            "i": pa.array(range(len(scanned)), pa.int64()),
            "path": pa.array(scanned.paths, pa.string()),
            **_stat_columns(stats),
        }
    )
    same = (
        "false"
        if rehash
        else "(f.size = s.size and f.mtime_ns = s.mtime_ns and f.ctime_ns = s.ctime_ns "
        "and f.inode = s.inode)"
    )
    con.register("_tmlbench_scanned", files)
    try:
        # One pass of left joins (an index row counts only while its run is loaded with its
        # hash): a load of one setting's folders joins a handful of rows, not the whole index.
        found = con.execute(
            "select s.i,\n"
            "    if(r.run_id is null, null, f.record_sha256) as record_sha256,\n"
            "    if(r.run_id is null, null, f.run_id) as run_id\n"
            "from _tmlbench_scanned s\n"
            "left join raw.record_files f using (path)\n"
            "left join raw.runs r on r.source_path = f.path and r.record_sha256 = f.record_sha256\n"
            f"where not (r.run_id is not null and coalesce({same}, false)) order by s.path"
        ).fetch_arrow_table()
    finally:
        con.unregister("_tmlbench_scanned")
    positions = found.column("i").to_pylist()
    shas = found.column("record_sha256").to_pylist()
    run_ids = found.column("run_id").to_pylist()
    to_read = [
        (scanned.paths[i], stats[i], (sha, run_id) if sha is not None else None)
        for i, sha, run_id in zip(positions, shas, run_ids, strict=True)
    ]
    # Index rows the scan matched (at most: rows of runs since deleted count as unmatched, which
    # at worst prunes for nothing); fewer than the index holds under root: files are gone.
    matched = len(scanned) - sum(hit is None for _, _, hit in to_read)
    stale = files.select(["path"]) if row[0] > matched else None
    return len(scanned) - len(to_read), to_read, stale


def _folder_prefix(root: Path) -> str:
    return str(root).rstrip(os.sep) + os.sep


# A batch on its way in: one row per record, the record's fields as raw.runs types them, where it
# came from, and (for record files) what the index keeps of the file's stat.
ORIGIN = ("run_space", "source_path", "record_sha256", "source_fields")


_Parsed = tuple[pa.Table | None, list[tuple[str, str]]]


def _parse(files: Sequence[ReadFile], spaces: _RunSpaces, columns: dict[str, str]) -> _Parsed:
    """Parse ``files`` (in bulk, then one by one with pydantic those the bulk checks refused)
    into a batch; and the files refused, each with the message that says why."""
    if not files:
        return None, []
    try:
        accepted: pa.Table | None = bulk_parse([f.data for f in files], RULES, columns)
    except pa.ArrowException:  # the bulk path only ever decides who is quick: pydantic judges
        accepted = None
    taken = accepted.column("i") if accepted is not None else pa.array([], pa.int64())
    rejected: list[tuple[str, str]] = []
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
    modelled, kept, refused = _modelled(candidates, columns)
    rejected += refused
    origin = pa.table(
        {
            "run_space": pa.array([spaces.of(f.path) for f in files], pa.string()),
            "source_path": pa.array([f.path for f in files], pa.string()),
            "record_sha256": pa.array([f.sha256 for f in files], pa.string()),
            "source_fields": pa.nulls(len(files), pa.string()),
            **_stat_columns([f.stat for f in files]),
        }
    )
    parts = [] if accepted is None else [_beside(accepted.drop_columns(["i"]), origin.take(taken))]
    if kept:
        parts.append(_beside(modelled, origin.take(pa.array([positions[k] for k in kept]))))
    if not parts:
        return None, rejected
    schema = _batch_schema(columns)
    return pa.concat_tables([part.cast(schema) for part in parts]), rejected


@dataclass
class _Batch:
    """Files read and parsed together: rows to ingest, files refused (unreadable first), and
    files read again whose content is loaded already (only their index rows are refreshed)."""

    table: pa.Table | None
    rejected: list[tuple[str, str]]
    refreshed: pa.Table  # their index rows
    parsed: int


def _read_batch(
    files: Sequence[tuple[str, os.stat_result]],
    known: dict[str, tuple[str, str]],
    spaces: _RunSpaces,
    columns: dict[str, str],
) -> _Batch:
    """Read ``files``; parse those that are new or changed (``known``: the index's sha256 and
    run_id of a path)."""
    unreadable: list[tuple[str, str]] = []
    refreshed: list[ReadFile] = []
    refreshed_ids: list[str] = []
    to_parse: list[ReadFile] = []
    for path, st in files:
        item = read_record_file(path, st)
        if isinstance(item, Unreadable):
            unreadable.append((item.path, item.message))
        elif (hit := known.get(item.path)) is not None and hit[0] == item.sha256:
            refreshed.append(item)
            refreshed_ids.append(hit[1])
        else:
            to_parse.append(item)
    table, rejected = _parse(to_parse, spaces, columns)
    return _Batch(
        table, unreadable + rejected, _index_rows(refreshed, refreshed_ids), len(to_parse)
    )


def _beside(left: pa.Table, right: pa.Table) -> pa.Table:
    """The columns of both tables, side by side (rows in the same order)."""
    return pa.Table.from_arrays(
        [*left.columns, *right.columns], names=[*left.column_names, *right.column_names]
    )


def _batch_schema(columns: dict[str, str]) -> pa.Schema:
    origin = [(name, pa.string()) for name in ORIGIN]
    stat = [(name, pa.uint64() if name == "inode" else pa.int64()) for name in STAT_COLUMNS]
    return pa.schema([*_record_schema(columns), *origin, *stat])


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
    columns = _run_columns(con)
    load = _Load(con, source)
    modelled, kept, refused = _modelled(candidates, columns)
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
            load.ingest(_beside(modelled, origin).cast(_batch_schema(columns)))
        if in_transaction is not None:
            in_transaction(con)
    return load.report()


# Each row of a batch against raw.runs (as committed), the runs inserted by the load's earlier
# batches and the others in the batch. A run loaded before this batch is loaded from there; else
# the first of it in the batch (by path) is new, and loaded from there. Every row of a run is
# unchanged (its content is the loaded one's) or a conflict.
_VERDICTS = """
select
    case
        when b.nth = 1 and coalesce(r.run_id, l.run_id) is null then 'new'
        when b.record_sha256 = coalesce(r.record_sha256, l.record_sha256, b.first_sha)
            then 'unchanged'
        else 'conflict'
    end as verdict,
    coalesce(r.source_path, l.source_path, b.first_path) as loaded_from
from (
    select *,
        row_number() over w as nth,
        first_value(source_path) over w as first_path,
        first_value(record_sha256) over w as first_sha
    from _tmlbench_batch
    window w as (partition by run_space, run_id order by source_path)
) b
left join raw.runs r on r.run_space = b.run_space and r.run_id = b.run_id
left join _tmlbench_inserted l on l.run_space = b.run_space and l.run_id = b.run_id
order by b.k
"""


def _run_columns(con: duckdb.DuckDBPyConnection) -> dict[str, str]:
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


def _int_checks(columns: dict[str, str]) -> list[tuple[str, int, int, str]]:
    """(field, low, high, column type) for every integer column of raw.runs."""
    return [
        (name, *_INT_RANGES[columns[name]], columns[name].lower())
        for name in RUN_FIELDS
        if columns[name] in _INT_RANGES
    ]


def _modelled(
    candidates: Sequence[Candidate], columns: dict[str, str]
) -> tuple[pa.Table, list[int], list[tuple[str, str]]]:
    """The candidates raw.runs's constraints accept, as rows of its types; their positions in
    ``candidates``; and the others, refused with the reason (so one bad record cannot fail the
    whole insert: bulk-parsed records were checked in Arrow already)."""
    int_checks = _int_checks(columns)
    kept: list[int] = []
    rejected: list[tuple[str, str]] = []
    for k, candidate in enumerate(candidates):
        problem = _constraint_problem(candidate.record, int_checks)
        if problem:
            rejected.append((candidate.source_path, f"{candidate.source_path}: {problem}"))
        else:
            kept.append(k)
    rows = _model_rows([candidates[k] for k in kept], _record_schema(columns))
    return rows, kept, rejected


def _constraint_problem(
    record: RunRecord, int_checks: list[tuple[str, int, int, str]]
) -> str | None:
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


def _record_schema(columns: dict[str, str]) -> pa.Schema:
    return pa.schema([(name, arrow_type(columns[name])) for name in RUN_FIELDS])


def _model_rows(candidates: Sequence[Candidate], schema: pa.Schema) -> pa.Table:
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


def _index_rows(files: Sequence[ReadFile], run_ids: Sequence[str]) -> pa.Table:
    """raw.record_files rows (but ``indexed_at``) of files read and found loaded already."""
    return pa.table(
        {
            "path": pa.array([f.path for f in files], pa.string()),
            **_stat_columns([f.stat for f in files]),
            "record_sha256": pa.array([f.sha256 for f in files], pa.string()),
            "run_id": pa.array(run_ids, pa.string()),
        }
    )


def _index_files(con: duckdb.DuckDBPyConnection, rows: pa.Table, now: dt.datetime) -> None:
    """Index record files whose content is now in raw.runs (rows of raw.record_files but
    ``indexed_at``)."""
    con.register("_tmlbench_indexed", rows)
    try:
        # raw.record_files has no primary key (maintaining one costs more than the whole
        # index insert): a path's old row goes first, in this transaction
        con.execute(
            "delete from raw.record_files where path in (select path from _tmlbench_indexed)"
        )
        con.execute(
            "insert into raw.record_files by name "
            "select *, $now as indexed_at from _tmlbench_indexed",
            {"now": now},
        )
    finally:
        con.unregister("_tmlbench_indexed")


def _prune_index(con: duckdb.DuckDBPyConnection, root: Path, seen: pa.Table) -> None:
    """Drop the index rows of files under ``root`` that a full scan no longer saw."""
    con.register("_tmlbench_seen", seen)
    try:
        con.execute(
            "delete from raw.record_files where starts_with(path, $root) "
            "and path not in (select path from _tmlbench_seen)",
            {"root": _folder_prefix(root)},
        )
    finally:
        con.unregister("_tmlbench_seen")


def content_version(con: duckdb.DuckDBPyConnection, table: str) -> str:
    """A fingerprint of a raw table's content (every column but ``loaded_at``, where it has one):
    the same rows give the same value, whenever and however they were loaded. Dagster's data
    version."""
    count, digest = con.execute(
        f"select count(*), bit_xor(hash(*columns(c -> c != 'loaded_at'))) from {table}"
    ).fetchone() or (0, None)
    return f"{count}-{digest or 0:016x}"


# ---------------------------------------------------------------------------------------------
# resumption logs

_RESUMPTION_COLUMNS = {
    "run_space": pa.string(),
    "run_id": pa.string(),
    "suite_id": pa.string(),
    "setting": pa.string(),
    "resumed_at": _TIMESTAMP,
    "resumed_by": pa.string(),
    "source_path": pa.string(),
    "line_number": pa.int32(),
    "file_sha256": pa.string(),
}


def _load_resumptions(
    con: duckdb.DuckDBPyConnection, root: Path, folders: Sequence[str], full: bool
) -> list[tuple[str, str]]:
    """Make raw.resumptions hold what the resumption logs in ``folders`` say (``full``: the
    folders are every one under ``root``, so rows of logs elsewhere under it are gone); returns
    the logs and lines refused. A log whose content hash is the one loaded is left as it is."""
    rejected: list[tuple[str, str]] = []
    present: list[str] = []  # logs found, read or not: the rows of others are dropped
    for folder in folders:
        found = resumption_log(folder)
        if found is None:
            continue
        path, st = found
        present.append(path)
        item = read_record_file(path, st, RESUMPTIONS_MAX_BYTES, "a resumption log")
        if isinstance(item, Unreadable):
            rejected.append((path, item.message))
            continue
        try:
            text = item.data.decode("utf-8")
        except UnicodeDecodeError as exc:
            rejected.append((path, f"{path}: not UTF-8 ({exc}); no resumption read from it"))
            continue
        rows, refused = _resumption_rows(text, path, _folder_space(folder, root))
        rejected += refused
        loaded = con.execute(
            "select list(distinct file_sha256) from raw.resumptions where source_path = $path",
            {"path": path},
        ).fetchone()
        if loaded and loaded[0] == [item.sha256]:
            continue  # unchanged since the last load
        table = pa.table(
            {
                **{
                    name: pa.array(values, _RESUMPTION_COLUMNS[name])
                    for name, values in rows.items()
                },
                "file_sha256": pa.array([item.sha256] * len(rows["run_id"]), pa.string()),
                "loaded_at": pa.array([dt.datetime.now(dt.UTC)] * len(rows["run_id"]), _TIMESTAMP),
            }
        )
        con.execute("delete from raw.resumptions where source_path = $path", {"path": path})
        con.register("_tmlbench_resumptions", table)
        try:
            con.execute("insert into raw.resumptions by name select * from _tmlbench_resumptions")
        finally:
            con.unregister("_tmlbench_resumptions")
    searched = [os.path.join(folder, RESUMPTIONS_FILE) for folder in folders]
    gone = "list_contains($searched, source_path)"
    if full:
        gone = f"({gone} or starts_with(source_path, $root))"
    con.execute(
        f"delete from raw.resumptions where {gone} and not list_contains($present, source_path)",
        {
            "searched": searched,
            "present": present,
            **({"root": _folder_prefix(root)} if full else {}),
        },
    )
    return rejected


def _folder_space(folder: str, root: Path) -> str:
    """The run space of the run folders in ``folder`` (``runner.attempts.records.run_space``)."""
    return run_space(Path(folder, "run", "record.json"), root)


def _resumption_rows(
    text: str, path: str, space: str
) -> tuple[dict[str, list[object]], list[tuple[str, str]]]:
    """raw.resumptions columns (but the file's hash and ``loaded_at``) of a log's valid lines,
    one row per forgiven run id; and its malformed lines, refused with the reason. Lines are
    numbered as the runner numbers them (``runner.suites.resumptions.forgiven_run_ids``)."""
    rows: dict[str, list[object]] = {
        name: [] for name in _RESUMPTION_COLUMNS if name != "file_sha256"
    }
    refused: list[tuple[str, str]] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            resumption = parse_resumption(line)
        except ValueError as exc:
            refused.append(
                (
                    path,
                    f"{path}, line {number}: not a resumption ({exc}); its faults are not forgiven",
                )
            )
            continue
        for run_id in dict.fromkeys(resumption.forgiven):  # a run named twice is forgiven once
            rows["run_space"].append(space)
            rows["run_id"].append(run_id)
            rows["suite_id"].append(resumption.suite_id)
            rows["setting"].append(resumption.setting)
            rows["resumed_at"].append(resumption.resumed_at)
            rows["resumed_by"].append(resumption.by)
            rows["source_path"].append(path)
            rows["line_number"].append(number)
    return rows, refused


# ---------------------------------------------------------------------------------------------
# specs


@dataclass(frozen=True)
class SpecReport:
    """What one spec load did: valid specs loaded, and the spec files it skipped (and why)."""

    tasks: int
    agents: int
    suites: int
    skipped: list[SpecProblem] = field(default_factory=list)


def load_specs(con: duckdb.DuckDBPyConnection, paths: Paths) -> SpecReport:
    """Replace raw.tasks, raw.suites (with raw.suite_settings) and the spec rows of raw.agents with
    the current spec files.

    Agents that exist only in imported data (source 'tml-bench') keep their rows; an agent
    with a spec gets the spec's row, whatever was there before. Suites are loaded for the rules
    their runner applies per setting (the harness-error ceiling) that the marts report on: the
    current file's rule, as the next run of the suite will apply it.

    An invalid spec file is skipped and reported, never a reason to load nothing: every valid
    file still loads, and the rows its id had from an earlier load stay (the file is broken
    now, the runs it describes are not: dropping its rows would drop them from the marts).
    """
    apply_ddl(con)
    now = dt.datetime.now(dt.UTC)
    tasks, agents, suites = (
        list_tasks(paths.tasks_dir),
        list_agents(paths.agents_dir),
        list_suites(paths.suites_dir),
    )
    task_rows = _task_rows(tasks.specs, paths.tasks_dir, now)
    agent_rows = _agent_rows(agents.specs, now)
    suite_rows = _suite_rows(suites.specs, paths.suites_dir, now)
    setting_rows = _suite_setting_rows(suites.specs)
    # the ids of invalid files: their rows are kept as the last valid load left them
    kept = {
        "tasks": [p.spec_id for p in tasks.problems],
        "agents": [p.spec_id for p in agents.problems],
        "suites": [p.spec_id for p in suites.problems],
    }
    con.execute("begin transaction")
    try:
        con.register("_tmlbench_tasks", task_rows)
        con.register("_tmlbench_agents", agent_rows)
        con.register("_tmlbench_suites", suite_rows)
        con.register("_tmlbench_suite_settings", setting_rows)
        con.execute(
            "delete from raw.tasks where not list_contains($kept, task_id)",
            {"kept": kept["tasks"]},
        )
        con.execute("insert into raw.tasks by name select * from _tmlbench_tasks")
        for table in ("raw.suites", "raw.suite_settings"):
            con.execute(
                f"delete from {table} where not list_contains($kept, suite_id)",
                {"kept": kept["suites"]},
            )
        con.execute("insert into raw.suites by name select * from _tmlbench_suites")
        con.execute("insert into raw.suite_settings by name select * from _tmlbench_suite_settings")
        con.execute(
            "delete from raw.agents where (source = 'spec' "
            "or agent_id in (select agent_id from _tmlbench_agents)) "
            "and not list_contains($kept, agent_id)",
            {"kept": kept["agents"]},
        )
        con.execute("insert into raw.agents by name select * from _tmlbench_agents")
        con.execute("commit")
    except BaseException:
        con.execute("rollback")
        raise
    finally:
        con.unregister("_tmlbench_tasks")
        con.unregister("_tmlbench_agents")
        con.unregister("_tmlbench_suites")
        con.unregister("_tmlbench_suite_settings")
    return SpecReport(
        tasks=len(tasks.specs),
        agents=len(agents.specs),
        suites=len(suites.specs),
        skipped=[*tasks.problems, *agents.problems, *suites.problems],
    )


def _task_rows(tasks: list[TaskSpec], tasks_dir: Path, now: dt.datetime) -> pa.Table:
    """raw.tasks rows of the task specs."""
    return pa.table(
        {
            "task_id": pa.array([t.id for t in tasks], pa.string()),
            "title": pa.array([t.title for t in tasks], pa.string()),
            "task_type": pa.array([t.task_type for t in tasks], pa.string()),
            "metric_name": pa.array([t.metric.name for t in tasks], pa.string()),
            "metric_direction": pa.array([t.metric.direction for t in tasks], pa.string()),
            "id_column": pa.array([t.id_column for t in tasks], pa.string()),
            "target_column": pa.array([t.target_column for t in tasks], pa.string()),
            "start_date": pa.array([t.start_date for t in tasks], pa.date32()),
            "kaggle_competition": pa.array(
                [t.source.kaggle.competition if t.source.kaggle else None for t in tasks],
                pa.string(),
            ),
            "twin_default_rows": pa.array(
                [t.source.twin.default_rows if t.source.twin else None for t in tasks], pa.int64()
            ),
            "spec_sha256": pa.array(
                [task_spec_sha256(tasks_dir, t.id) for t in tasks], pa.string()
            ),
            "loaded_at": pa.array([now] * len(tasks), pa.timestamp("us", tz="UTC")),
        }
    )


def _agent_rows(agents: list[AgentSpec], now: dt.datetime) -> pa.Table:
    """raw.agents rows of the agent specs (source 'spec')."""
    return pa.table(
        {
            "agent_id": pa.array([a.id for a in agents], pa.string()),
            "kind": pa.array([a.kind for a in agents], pa.string()),
            "title": pa.array([a.title for a in agents], pa.string()),
            "harness": pa.array([a.harness for a in agents], pa.string()),
            "harness_version": pa.array([a.harness_version for a in agents], pa.string()),
            "provider": pa.array([a.model.provider for a in agents], pa.string()),
            "model_id": pa.array([a.model.model_id for a in agents], pa.string()),
            "knowledge_cutoff": pa.array([a.model.knowledge_cutoff for a in agents], pa.date32()),
            "price_in_per_mtok_usd": pa.array([_price(a, "input") for a in agents], pa.float64()),
            "price_out_per_mtok_usd": pa.array([_price(a, "output") for a in agents], pa.float64()),
            "source": pa.array(["spec"] * len(agents), pa.string()),
            "loaded_at": pa.array([now] * len(agents), pa.timestamp("us", tz="UTC")),
        }
    )


def _suite_rows(suites: list[SuiteSpec], suites_dir: Path, now: dt.datetime) -> pa.Table:
    """raw.suites rows of the suite specs, with the sha256 of each file's bytes."""
    shas = [hashlib.sha256((suites_dir / f"{s.id}.yaml").read_bytes()).hexdigest() for s in suites]
    return pa.table(
        {
            "suite_id": pa.array([s.id for s in suites], pa.string()),
            "title": pa.array([s.title for s in suites], pa.string()),
            "attempts": pa.array([s.attempts for s in suites], pa.int32()),
            "attempt_ceiling": pa.array([s.attempt_ceiling for s in suites], pa.int32()),
            "harness_error_ceiling": pa.array(
                [s.harness_error_ceiling for s in suites], pa.int32()
            ),
            "provider_error_ceiling": pa.array(
                [s.provider_error_ceiling for s in suites], pa.int32()
            ),
            "runs_subdir": pa.array([s.runs_subdir for s in suites], pa.string()),
            "spec_sha256": pa.array(shas, pa.string()),
            "loaded_at": pa.array([now] * len(suites), pa.timestamp("us", tz="UTC")),
        }
    )


def _suite_setting_rows(suites: list[SuiteSpec]) -> pa.Table:
    """raw.suite_settings rows: every (agent, task, budget) each suite lists."""
    rows = [
        (suite.id, agent, task, budget)
        for suite in suites
        for agent in suite.agents
        for task in suite.tasks
        for budget in suite.budgets
    ]
    names = ("suite_id", "agent_id", "task_id", "budget_seconds")
    types = (pa.string(), pa.string(), pa.string(), pa.int32())
    return pa.table(
        {
            name: pa.array([row[i] for row in rows], kind)
            for i, (name, kind) in enumerate(zip(names, types, strict=True))
        }
    )


def _price(agent: AgentSpec, side: str) -> float | None:
    """USD per million tokens of an llm agent or a command agent's gateway, where given."""
    prices = agent.llm.prices if agent.llm else agent.gateway.prices if agent.gateway else None
    return getattr(prices, f"{side}_per_mtok") if prices else None
