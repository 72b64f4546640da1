"""``raw.resumptions``: the suites' resumption logs, one row per forgiven run id.

The folders a load searches for run folders are where a suite keeps its resumption log
(``runner.suites.resumptions``: resuming a setting stopped at a fault ceiling); the table mirrors each log
found, so the marts' fault ceilings forgive what the runner's do (both read a line through
``runner.suites.resumptions.parse_resumption``). The log is append-only but a copied folder may lack it:
a log gone is gone from the table too (the runner would forgive nothing). A malformed line is
refused like a record (the log's other lines load); a log that cannot be read (a link, too large,
not UTF-8) is refused by name and keeps the rows it had.
"""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Sequence
from pathlib import Path

import duckdb
import pyarrow as pa

from runner.attempts import run_space
from runner.suites import RESUMPTIONS_FILE, RESUMPTIONS_MAX_BYTES, parse_resumption
from warehouse.record_files import Unreadable, read_record_file, resumption_log
from warehouse.record_index import folder_prefix

_TIMESTAMP = pa.timestamp("us", tz="UTC")
_COLUMNS = {
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


def load_resumptions(
    con: duckdb.DuckDBPyConnection, root: Path, folders: Sequence[str], full: bool
) -> list[tuple[str, str]]:
    """Make raw.resumptions hold what the resumption logs in ``folders`` say (``full``: the
    folders are every one under ``root``, so rows of logs elsewhere under it are gone); returns
    the logs and lines refused. A log whose content hash is the one loaded is left as it is.
    Runs in the caller's transaction."""
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
        rows, refused = _rows(text, path, _folder_space(folder, root))
        rejected += refused
        loaded = con.execute(
            "select list(distinct file_sha256) from raw.resumptions where source_path = $path",
            {"path": path},
        ).fetchone()
        if loaded and loaded[0] == [item.sha256]:
            continue  # unchanged since the last load
        table = pa.table(
            {
                **{name: pa.array(values, _COLUMNS[name]) for name, values in rows.items()},
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
            **({"root": folder_prefix(root)} if full else {}),
        },
    )
    return rejected


def _folder_space(folder: str, root: Path) -> str:
    """The run space of the run folders in ``folder`` (``runner.attempts.records.run_space``)."""
    return run_space(Path(folder, "run", "record.json"), root)


def _rows(
    text: str, path: str, space: str
) -> tuple[dict[str, list[object]], list[tuple[str, str]]]:
    """raw.resumptions columns (but the file's hash and ``loaded_at``) of a log's valid lines,
    one row per forgiven run id; and its malformed lines, refused with the reason. Lines are
    numbered as the runner numbers them (``runner.suites.resumptions.forgiven_run_ids``)."""
    rows: dict[str, list[object]] = {name: [] for name in _COLUMNS if name != "file_sha256"}
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
