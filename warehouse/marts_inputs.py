"""What the marts are built from, so a build can be skipped when nothing changed.

The marts are a function of the raw tables dbt reads and of the dbt project's files: their
content versions and the project's fingerprint make ``marts_inputs_version``. A snapshot records
the version it was published from; when the warehouse holds the same, dbt has nothing to do.
"""

from __future__ import annotations

import hashlib

import duckdb

from warehouse.dbt import project_fingerprint
from warehouse.loader import content_version
from warehouse.raw_load import RAW_TABLES


def marts_inputs_version(con: duckdb.DuckDBPyConnection) -> str:
    """What the marts are a function of: the content of dbt's raw sources and the dbt project."""
    parts = [content_version(con, table) for table in RAW_TABLES]
    parts.append(project_fingerprint())
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


def has_marts(con: duckdb.DuckDBPyConnection) -> bool:
    """Whether the warehouse has a marts schema with any table (dbt has built it)."""
    row = con.execute(
        "select count(*) from information_schema.tables where table_schema = 'marts'"
    ).fetchone()
    return bool(row and row[0])
