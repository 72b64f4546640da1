"""Warehouse integrity queries (used by Dagster asset checks and usable from SQL tools)."""

from __future__ import annotations

import duckdb

from runner.attempts import STATUSES


def status_problems(con: duckdb.DuckDBPyConnection, limit: int = 20) -> list[str]:
    """Runs in ``raw.runs`` without exactly one row or without one known status."""
    rows = con.execute(
        """
        select run_space || '/' || run_id, count(*) as n, count(distinct status) as statuses,
               bool_or(status is null or status not in (select unnest(?))) as unknown
        from raw.runs group by run_space, run_id
        having n <> 1 or statuses <> 1 or unknown
        order by 1 limit ?
        """,
        [list(STATUSES), limit],
    ).fetchall()
    return [f"{run}: {n} rows, {k} statuses, unknown={u}" for run, n, k, u in rows]
