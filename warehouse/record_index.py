"""The index of record files loaded, ``raw.record_files``: which files a load must read.

A row per record file whose content is in ``raw.runs`` (path, size, mtime, ctime, inode, sha256,
run_id). A load compares the scan (``warehouse.record_files``: one ``lstat`` per run folder, no
read) with it in one query: only files that are new, whose stat changed, or whose run is no
longer loaded with that content are read. ``ctime`` changes on every write and cannot be set from
user space, so an edit that keeps size and mtime is seen; what no stat shows (bytes changed under
the filesystem, a reset clock) is found by a rehash, which reads every file.

The index is written only for files whose content is loaded: a rejected file is never indexed,
so every load reports it again.
"""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import duckdb
import pyarrow as pa

from warehouse.record_files import ReadFile, ScannedFiles

# What the index keeps of a file's stat (besides its path).
STAT_COLUMNS = ("size", "mtime_ns", "ctime_ns", "inode")


def stat_columns(stats: Sequence[os.stat_result]) -> dict[str, pa.Array]:
    """What the index keeps of a file's stat, as columns."""
    return {
        "size": pa.array([st.st_size for st in stats], pa.int64()),
        "mtime_ns": pa.array([st.st_mtime_ns for st in stats], pa.int64()),
        "ctime_ns": pa.array([st.st_ctime_ns for st in stats], pa.int64()),
        "inode": pa.array([st.st_ino for st in stats], pa.uint64()),
    }


@dataclass(frozen=True, slots=True)
class ToRead:
    """A scanned file the index does not know unchanged, and the (sha256, run_id) its index row
    has (None when it has none): the same bytes read again only refresh that row."""

    path: str
    stat: os.stat_result
    indexed: tuple[str, str] | None


@dataclass(frozen=True)
class Lookup:
    """What the index knows of a scan: how many files it knows unchanged, the others (sorted by
    path), and the scanned paths when the index holds rows of files under the root that the scan
    did not see (for ``prune``), else None."""

    unchanged: int
    to_read: list[ToRead]
    stale: pa.Table | None


def lookup(
    con: duckdb.DuckDBPyConnection, root: Path, scanned: ScannedFiles, rehash: bool
) -> Lookup:
    """What the index knows of the scanned files (``rehash``: none of them is unchanged).

    An index row counts only while raw.runs holds its run with its hash: a run deleted from the
    warehouse is read, and loaded, again.
    """
    stats = scanned.stats
    row = con.execute(
        "select count(*) from raw.record_files where starts_with(path, $root)",
        {"root": folder_prefix(root)},
    ).fetchone()
    if not row or not row[0]:  # nothing indexed here yet (a first load): read everything
        order = sorted(range(len(scanned)), key=scanned.paths.__getitem__)
        return Lookup(0, [ToRead(scanned.paths[i], stats[i], None) for i in order], None)
    files = pa.table(
        {
            "i": pa.array(range(len(scanned)), pa.int64()),
            "path": pa.array(scanned.paths, pa.string()),
            **stat_columns(stats),
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
        ToRead(scanned.paths[i], stats[i], (sha, run_id) if sha is not None else None)
        for i, sha, run_id in zip(positions, shas, run_ids, strict=True)
    ]
    # Index rows the scan matched (at most: rows of runs since deleted count as unmatched, which
    # at worst prunes for nothing); fewer than the index holds under root: files are gone.
    matched = len(scanned) - sum(f.indexed is None for f in to_read)
    stale = files.select(["path"]) if row[0] > matched else None
    return Lookup(len(scanned) - len(to_read), to_read, stale)


def index_rows(files: Sequence[ReadFile], run_ids: Sequence[str]) -> pa.Table:
    """raw.record_files rows (but ``indexed_at``) of files read and found loaded already."""
    return pa.table(
        {
            "path": pa.array([f.path for f in files], pa.string()),
            **stat_columns([f.stat for f in files]),
            "record_sha256": pa.array([f.sha256 for f in files], pa.string()),
            "run_id": pa.array(run_ids, pa.string()),
        }
    )


def write(con: duckdb.DuckDBPyConnection, rows: pa.Table, now: dt.datetime) -> None:
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


def prune(con: duckdb.DuckDBPyConnection, root: Path, seen: pa.Table) -> None:
    """Drop the index rows of files under ``root`` that a full scan no longer saw (``seen``: the
    paths it saw). Their runs stay in raw.runs: a load never deletes a record."""
    con.register("_tmlbench_seen", seen)
    try:
        con.execute(
            "delete from raw.record_files where starts_with(path, $root) "
            "and path not in (select path from _tmlbench_seen)",
            {"root": folder_prefix(root)},
        )
    finally:
        con.unregister("_tmlbench_seen")


def folder_prefix(root: Path) -> str:
    """``root`` as the start of the paths below it (``starts_with`` must not match a sibling
    folder whose name starts with root's)."""
    return str(root).rstrip(os.sep) + os.sep
