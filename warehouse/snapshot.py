"""A read-only copy of the marts (and the raw runs) for the dashboard, published atomically.

The dashboard opens the snapshot, never the warehouse itself, so it never competes with the
loader or dbt for DuckDB's single-writer lock. A new snapshot is written to a temporary file
next to the old one and swapped in with ``os.replace``: readers see the old file or the new
one, never half of one.
"""

from __future__ import annotations

import os
from pathlib import Path

import duckdb

from warehouse.db import connect

# display: the models the dashboard's pages show (dbt_project/models/display/); marts: the
# tables it shows as they are and what people query; raw: the attempts the run explorer lists.
SNAPSHOT_SCHEMAS = ("display", "marts", "raw")
# The loader's bookkeeping: no page reads it.
NOT_PUBLISHED = ("raw.record_files",)


def snapshot_path(warehouse: Path) -> Path:
    """Default snapshot location: ``<warehouse stem>.snapshot.duckdb`` next to the warehouse."""
    return warehouse.with_name(f"{warehouse.stem}.snapshot.duckdb")


def reports_path(warehouse: Path) -> Path:
    """Default folder of the published report bundles (``<folder>/<suite>/``): ``reports/`` next
    to the warehouse. `tmlbench report` and Dagster's ``reports`` asset both publish there."""
    return warehouse.parent / "reports"


def publish_snapshot(
    warehouse: Path, snapshot: Path, schemas: tuple[str, ...] = SNAPSHOT_SCHEMAS
) -> dict[str, int]:
    """Copy every table of ``schemas`` into a fresh file, then replace ``snapshot`` with it.

    Returns the row count of every copied table (``schema.table`` → rows).
    """
    snapshot.parent.mkdir(parents=True, exist_ok=True)
    staging = snapshot.with_name(f".{snapshot.name}.{os.getpid()}.tmp")
    staging.unlink(missing_ok=True)
    source = connect(warehouse, read_only=True)
    target = duckdb.connect(str(staging))
    counts: dict[str, int] = {}
    try:
        tables = source.execute(
            "select table_schema, table_name from information_schema.tables "
            "where table_type = 'BASE TABLE' and table_schema in (select unnest(?)) "
            "and table_schema || '.' || table_name not in (select unnest(?)) "
            "order by 1, 2",
            [list(schemas), list(NOT_PUBLISHED)],
        ).fetchall()
        for schema in {s for s, _ in tables}:
            target.execute(f'create schema "{schema}"')
        for schema, table in tables:
            frame = source.execute(f'select * from "{schema}"."{table}"').fetch_arrow_table()
            target.register("incoming", frame)
            target.execute(f'create table "{schema}"."{table}" as select * from incoming')
            target.unregister("incoming")
            counts[f"{schema}.{table}"] = frame.num_rows
    finally:
        source.close()
        target.close()
    os.replace(staging, snapshot)
    return counts
