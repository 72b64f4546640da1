"""The dashboard's queries over the published snapshot, as pandas DataFrames (no Streamlit here).

Every page shows a contracted dbt model of the display schema (dbt_project/models/display/;
the dashboard reads nothing else, so the marts and raw tables can change shape without breaking
a page), read here with a plain select and a WHERE for the filters: the badges, labels and
counts are computed by dbt, never here. A query takes an open read-only
connection to the snapshot (``open_snapshot``; the pages read the newest one through a
``SnapshotReader``) and runs on a cursor of its own, so concurrent sessions may share the
connection.
"""

from __future__ import annotations

import datetime as dt
import os
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TypedDict

import duckdb
import pandas as pd

from warehouse.db import warehouse_path
from warehouse.snapshot import snapshot_path as _published_snapshot_path

SNAPSHOT_ENV = "TMLBENCH_SNAPSHOT"
VARIANTS = ("best_budget", "all_cells", "largest_budget")
RUN_ROWS = 2_000  # attempts the run explorer draws at once (newest first); the CSV has all
TWIN_ROWS = 500  # twins of one attempt the run explorer draws (a deterministic agent has thousands)


@dataclass(frozen=True)
class Filters:
    """The dashboard's global filters; an empty selection means "all".

    ``suite`` chooses whose benchmark is shown: every mart is keyed by suite (its numbers are
    computed from the runs that suite counts alone), so the pages always show one suite; None
    only for a query of a one-suite snapshot. Agents, tasks and budgets then select rows (scores
    and ranks are not recomputed). The date range applies only to attempt-level views (the run
    explorer, the counted attempts).
    """

    suite: str | None = None
    agents: tuple[str, ...] = ()
    tasks: tuple[str, ...] = ()
    budgets: tuple[int, ...] = ()
    start: dt.date | None = None
    end: dt.date | None = None


NO_FILTERS = Filters()
AGENT = ("agent_id",)
AGENT_TASK = ("agent_id", "task_id")
AGENT_BUDGET = ("agent_id", "budget_seconds")
SETTING = ("agent_id", "task_id", "budget_seconds")


def _where(
    filters: Filters | None,
    columns: tuple[str, ...] = AGENT,
    *,
    attempts: bool = False,
) -> tuple[str, list[object]]:
    """SQL conditions (`` and ...``) and their parameters for ``filters`` on a table with the key
    ``columns`` (and suite_id); ``attempts``: a table of attempts (created_at), where the date
    range selects attempts."""
    f = filters or NO_FILTERS
    sql: list[str] = []
    params: list[object] = []
    if f.suite is not None:
        sql.append("suite_id = ?")
        params.append(f.suite)
    for column, values, cast in (
        ("agent_id", f.agents, "varchar"),
        ("task_id", f.tasks, "varchar"),
        ("budget_seconds", f.budgets, "integer"),
    ):
        if values and column in columns:
            sql.append(f"{column} in (select unnest(?::{cast}[]))")
            params.append(list(values))
    if attempts:
        if f.start is not None:
            sql.append("timezone('UTC', created_at)::date >= ?")
            params.append(f.start)
        if f.end is not None:
            sql.append("timezone('UTC', created_at)::date <= ?")
            params.append(f.end)
    return "".join(f" and {c}" for c in sql), params


def snapshot_path(environ: dict[str, str] | None = None) -> Path:
    """``$TMLBENCH_SNAPSHOT``, else the snapshot published next to the warehouse."""
    value = (os.environ if environ is None else environ).get(SNAPSHOT_ENV)
    if value:
        return Path(value).expanduser().resolve()
    return _published_snapshot_path(warehouse_path(environ))


Identity = tuple[int, int, int, int]  # (device, inode, mtime in ns, size) of a snapshot file


def snapshot_identity(path: Path) -> Identity | None:
    """Which file ``path`` is now (device, inode, mtime, size); None when there is none. A newly
    published snapshot replaces the file (warehouse/snapshot.py), so its identity changes."""
    try:
        info = Path(path).stat()
    except OSError:
        return None
    return (info.st_dev, info.st_ino, info.st_mtime_ns, info.st_size)


SNAPSHOT_CATALOG = "snapshot"  # the name the snapshot file is attached under (open_snapshot)


def open_snapshot(path: Path) -> duckdb.DuckDBPyConnection | None:
    """A read-only connection to the snapshot file at ``path`` now; None when there is no such
    file or it is not a DuckDB database.

    The file is attached to a database of the connection's own (in memory) rather than opened
    with ``duckdb.connect(path)``: DuckDB's Python client keeps one database instance per file
    path and process, and while any connection to it is open (another session's, a cursor),
    ``connect(path)`` returns that instance, which still reads the file it opened first, not the
    one a publish swapped in since. An attached file is opened anew each time. Queries run on
    ``_cursor``s, which use the snapshot's catalog as ``use`` here does for this connection.
    """
    if not Path(path).is_file():
        return None
    con = duckdb.connect()  # ":memory:": a new database instance, never a cached one
    try:
        quoted = str(path).replace("'", "''")
        con.execute(f"attach '{quoted}' as {SNAPSHOT_CATALOG} (read_only)")
        con.execute(f"use {SNAPSHOT_CATALOG}")
    except duckdb.Error:
        con.close()
        return None
    return con


def _cursor(con: duckdb.DuckDBPyConnection) -> duckdb.DuckDBPyConnection:
    """A connection of its own to ``con``'s database (safe across threads), reading the snapshot:
    ``use`` is per connection, and a cursor starts in the in-memory catalog."""
    cursor = con.cursor()
    try:
        cursor.execute(f"use {SNAPSHOT_CATALOG}")
    except BaseException:
        cursor.close()
        raise
    return cursor


@dataclass(frozen=True)
class Snapshot:
    """A snapshot file as it was when opened: its identity then, and a read-only connection to it
    (None when there is no readable file). The connection may hold a newer file than the identity
    says (one published between the stat and the open), never an older one."""

    identity: Identity | None
    connection: duckdb.DuckDBPyConnection | None


class SnapshotReader:
    """The newest snapshot at one path, for every session of the dashboard's process.

    ``current()`` looks at the file's identity each time and opens a new connection when it
    changed (a publish swapped a new file in), so the next query reads the new snapshot. The
    previous connection is dropped, never closed here: another session's page may be running a
    query on it (closing a DuckDB connection closes its cursors under their queries). It closes,
    and the replaced file's disk space is freed, when the last query holding it returns, so at
    most one connection per query in flight outlives its snapshot.
    """

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()  # one open per new snapshot, however many sessions ask
        self._current = Snapshot(None, None)

    def current(self) -> Snapshot:
        with self._lock:  # the stat too: sessions see the file's identities in the order they came
            identity = snapshot_identity(self.path)  # before opening: the connection is never older
            if identity != self._current.identity:
                connection = open_snapshot(self.path) if identity is not None else None
                self._current = Snapshot(identity, connection)
            return self._current


def _read(
    con: duckdb.DuckDBPyConnection,
    sql: str,
    params: list[object] | Mapping[str, object] | None = None,
) -> pd.DataFrame:
    cursor = _cursor(con)
    try:
        return cursor.execute(sql, params or []).df()
    finally:
        cursor.close()


def has_runs(con: duckdb.DuckDBPyConnection | None) -> bool:
    """The snapshot is open and holds at least one attempt (a snapshot published before the
    display models existed, or before the suite picker's columns did, holds none that the pages
    can read: publish it again)."""
    if con is None:
        return False
    try:
        _read(con, "select suite_title, has_runs from display.filter_options limit 0")
        frame = _read(con, "select count(*) as n from display.reliability_display")
    except duckdb.Error:
        return False
    return bool(frame["n"].iloc[0])


def suites(con: duckdb.DuckDBPyConnection) -> pd.DataFrame:
    """Every suite the snapshot knows (``display.filter_options`` has a row for each loaded suite
    file, with runs or not, and each imported source): suite_id, suite_title (null for an
    import), from_suite_file, has_runs."""
    return _read(
        con,
        "select suite_id, suite_title, from_suite_file, has_runs from display.filter_options "
        "order by suite_id",
    )


def default_suite(suites: pd.DataFrame) -> str | None:
    """The suite shown until another is chosen: the demo's when it has runs (what `make run`
    builds), else the first suite with runs, else the demo's or the first; None without suites."""
    with_runs = suites.loc[suites["has_runs"].astype(bool), "suite_id"].tolist()
    every = suites["suite_id"].tolist()
    for candidates in (with_runs, every):
        if candidates:
            return "demo" if "demo" in candidates else candidates[0]
    return None


class FilterOptions(TypedDict):
    """What the sidebar's filters offer for one suite (``filter_options``)."""

    suites: list[str]
    agents: list[str]
    tasks: list[str]
    budgets: list[int]
    statuses: list[str]
    first_day: dt.date | None
    last_day: dt.date | None


def filter_options(con: duckdb.DuckDBPyConnection, suite: str | None) -> FilterOptions:
    """What the filters offer for one suite (its row of ``display.filter_options``): every
    suite, and the suite's agents, tasks, budgets, the statuses that occur (in the taxonomy's
    order), and the first and last day (UTC) one of its attempts was created."""
    frame = _read(con, "select * from display.filter_options order by suite_id")
    suites = [str(s) for s in frame["suite_id"]]
    chosen = frame[frame["suite_id"] == suite]
    if chosen.empty:
        return FilterOptions(
            suites=suites, agents=[], tasks=[], budgets=[], statuses=[], first_day=None,
            last_day=None,
        )  # fmt: skip
    row = chosen.iloc[0]

    def day(name: str) -> dt.date | None:
        return None if pd.isna(row[name]) else pd.Timestamp(row[name]).date()

    return FilterOptions(
        suites=suites,
        agents=[str(a) for a in row["agents"]],
        tasks=[str(t) for t in row["tasks"]],
        budgets=[int(b) for b in row["budgets"]],
        statuses=[str(s) for s in row["statuses"]],
        first_day=day("first_day"),
        last_day=day("last_day"),
    )


def leaderboard(
    con: duckdb.DuckDBPyConnection, variant: str = "best_budget", filters: Filters | None = None
) -> pd.DataFrame:
    """Ranked agents of one variant (``display.leaderboard_display``), best first."""
    if variant not in VARIANTS:
        raise ValueError(f"unknown leaderboard variant {variant!r}; expected one of {VARIANTS}")
    where, params = _where(filters)
    return _read(
        con,
        f"select * exclude (suite_id, variant) from display.leaderboard_display where variant = ?{where} "
        "order by rank, agent_id",
        [variant, *params],
    )


def report_zip(con: duckdb.DuckDBPyConnection, suite: str) -> bytes:
    """The suite's report bundle (what `tmlbench report` writes) as a zip, from the snapshot:
    the whole suite, whatever the filters (the report is the suite's)."""
    # imported here: vl-convert loads when a report is asked for, not with the dashboard
    from warehouse.report import report_zip as pack

    cursor = _cursor(con)
    try:
        return pack(cursor, suite, "the snapshot")
    finally:
        cursor.close()


def coverage(con: duckdb.DuckDBPyConnection, filters: Filters | None = None) -> pd.DataFrame:
    """One row per agent with runs: ranked or not, and why not (``display.coverage_display``)."""
    where, params = _where(filters)
    return _read(
        con,
        f"select * from display.coverage_display where true{where} "
        "order by is_ranked desc, agent_id",
        params,
    )


class SuiteStatus(TypedDict):
    """A suite's row of ``display.suite_status_display``: how complete it is."""

    suite_id: str
    counted_successes: int
    settings_expected: int
    settings_complete: int
    agents_expected: int
    agents_ranked: int
    provisional: bool


def suite_status(
    con: duckdb.DuckDBPyConnection, filters: Filters | None = None
) -> SuiteStatus | None:
    """The chosen suite's row of ``display.suite_status_display``: N, k of n settings complete,
    agents ranked of expected, provisional; None when the snapshot has none (a suite without
    runs, or a snapshot published before the model existed). Not narrowed by the
    agent/task/budget filters: whether a suite is final is the suite's."""
    suite = (filters or NO_FILTERS).suite
    sql = "select * from display.suite_status_display"
    params: list[object] = []
    if suite is not None:
        sql += " where suite_id = ?"
        params.append(suite)
    try:
        frame = _read(con, sql + " order by suite_id limit 1", params)
    except duckdb.Error:
        return None
    if frame.empty:
        return None
    row = frame.iloc[0]
    return SuiteStatus(
        suite_id=str(row["suite_id"]),
        counted_successes=int(row["counted_successes"]),
        settings_expected=int(row["settings_expected"]),
        settings_complete=int(row["settings_complete"]),
        agents_expected=int(row["agents_expected"]),
        agents_ranked=int(row["agents_ranked"]),
        provisional=bool(row["provisional"]),
    )


def setting_scores(con: duckdb.DuckDBPyConnection, filters: Filters | None = None) -> pd.DataFrame:
    """Median and quartiles of every setting with its harness faults (``display.setting_display``)."""
    where, params = _where(filters, SETTING)
    return _read(
        con,
        f"select * from display.setting_display where true{where} "
        "order by task_id, budget_seconds, agent_id",
        params,
    )


def stopped_settings(
    con: duckdb.DuckDBPyConnection, filters: Filters | None = None
) -> pd.DataFrame:
    """The settings stopped at the harness-error or the provider-error ceiling
    (``display.setting_display``)."""
    where, params = _where(filters, SETTING)
    return _read(
        con,
        "select agent_id, task_id, budget_seconds, harness_errors, provider_errors, "
        "n_harness_error, harness_error_ceiling, n_provider_error, provider_error_ceiling, "
        "attempts, successes, missing, stopped_at_harness_error_ceiling, "
        "stopped_at_provider_error_ceiling from display.setting_display "
        f"where (stopped_at_harness_error_ceiling or stopped_at_provider_error_ceiling){where} "
        "order by agent_id, task_id, budget_seconds",
        params,
    )


def duplicated_settings(
    con: duckdb.DuckDBPyConnection, filters: Filters | None = None
) -> pd.DataFrame:
    """The settings whose attempts submitted the same answer twice (``display.setting_duplicates_display``),
    first those where it is among the counted attempts (the median is not over independent
    attempts)."""
    where, params = _where(filters, SETTING)
    return _read(
        con,
        "select agent_id, task_id, budget_seconds, duplicated_counted, n_counted, "
        "n_distinct_counted_submissions, n_fingerprinted, n_distinct_submissions, "
        f"n_shared_with_other_agents from display.setting_duplicates_display where duplicated{where} "
        "order by duplicated_counted desc, agent_id, task_id, budget_seconds",
        params,
    )


def counted_attempts(
    con: duckdb.DuckDBPyConnection,
    task_id: str,
    budget_seconds: int,
    filters: Filters | None = None,
) -> pd.DataFrame:
    """Every counted attempt (first N successes of each setting) of one task × budget."""
    where, params = _where(filters, SETTING, attempts=True)
    return _read(
        con,
        "select run_id, agent_id, task_id, budget_seconds, created_at, success_index, score, "
        "score_hib from display.counted_attempts_display "
        f"where task_id = ? and budget_seconds = ?{where} order by agent_id, success_index",
        [task_id, int(budget_seconds), *params],
    )


def success_rates(con: duckdb.DuckDBPyConnection, filters: Filters | None = None) -> pd.DataFrame:
    """One row per agent: attempts, success rate, run-to-run spread, primary score and rank
    (``display.reliability_display``)."""
    where, params = _where(filters)
    return _read(
        con,
        f"select * from display.reliability_display where true{where} "
        "order by success_rate desc, agent_id",
        params,
    )


def pass_k(con: duckdb.DuckDBPyConnection, filters: Filters | None = None) -> pd.DataFrame:
    """One row per (agent, k = 1..N): mean pass^k and mean expected worst points of k attempts
    over its settings, and how many settings each mean is over (``display.agent_pass_k_display``)."""
    where, params = _where(filters)
    return _read(
        con,
        f"select * from display.agent_pass_k_display where true{where} order by agent_id, k",
        params,
    )


def status_counts(con: duckdb.DuckDBPyConnection, filters: Filters | None = None) -> pd.DataFrame:
    """agent_id, status, attempts: one row per agent and status (``display.status_counts_display``)."""
    where, params = _where(filters)
    return _read(
        con,
        f"select * from display.status_counts_display where true{where} order by agent_id",
        params,
    )


def rank_stability(con: duckdb.DuckDBPyConnection, filters: Filters | None = None) -> pd.DataFrame:
    """One row per ranked agent: mean and sample std of its task ranks."""
    where, params = _where(filters)
    return _read(
        con,
        "select agent_id, mean_rank, rank_std, n_tasks from display.rank_stability_display "
        f"where true{where} order by mean_rank, agent_id",
        params,
    )


def task_ranks(con: duckdb.DuckDBPyConnection, filters: Filters | None = None) -> pd.DataFrame:
    """One row per (ranked agent, task): best points over budgets and rank on the task."""
    where, params = _where(filters, AGENT_TASK)
    return _read(
        con,
        "select agent_id, task_id, best_points, rank from display.task_ranks_display "
        f"where true{where} order by task_id, rank, agent_id",
        params,
    )


def time_scaling(con: duckdb.DuckDBPyConnection, filters: Filters | None = None) -> pd.DataFrame:
    """One row per (ranked agent, budget): mean normalized points over tasks."""
    where, params = _where(filters, AGENT_BUDGET)
    return _read(
        con,
        "select agent_id, budget_seconds, mean_points, n_tasks from display.time_scaling_display "
        f"where true{where} order by agent_id, budget_seconds",
        params,
    )


def time_scaling_monotone(
    con: duckdb.DuckDBPyConnection, filters: Filters | None = None
) -> pd.DataFrame:
    """One row per ranked agent: how many of its curves (its own median per task) never get worse
    as the budget grows."""
    where, params = _where(filters)
    return _read(
        con,
        "select agent_id, curves, monotone_curves, share_monotone "
        f"from display.time_scaling_monotone_display where true{where} "
        "order by share_monotone desc, agent_id",
        params,
    )


def monotone_curves(con: duckdb.DuckDBPyConnection, filters: Filters | None = None) -> pd.DataFrame:
    """One row per (ranked agent, task) curve: monotone or not, and its points by budget
    (``display.time_scaling_curves``)."""
    where, params = _where(filters, AGENT_TASK)
    return _read(
        con,
        f"select * from display.time_scaling_curves where true{where} order by agent_id, task_id",
        params,
    )


def agent_costs(con: duckdb.DuckDBPyConnection, filters: Filters | None = None) -> pd.DataFrame:
    """One row per agent: tokens and cost (null = unknown), cost per success, points per dollar."""
    where, params = _where(filters)
    return _read(
        con,
        f"select * from display.agent_costs_display where true{where} order by agent_id",
        params,
    )


def setting_costs(con: duckdb.DuckDBPyConnection, filters: Filters | None = None) -> pd.DataFrame:
    """One row per setting: tokens and cost (null = unknown), cost per success, points per dollar."""
    where, params = _where(filters, SETTING)
    return _read(
        con,
        f"select * from display.setting_costs_display where true{where} "
        "order by agent_id, task_id, budget_seconds",
        params,
    )


RUN_COLUMNS = (
    "run_id, created_at, agent_id, task_id, budget_seconds, instruction_profile, attempt_index, "
    "status, score, local_validation_score, validation_code, wall_seconds, peak_memory_bytes, "
    "tokens_in, tokens_out, cost_usd, run_space"
)


def _runs_where(filters: Filters | None, statuses: tuple[str, ...]) -> tuple[str, list[object]]:
    """The FROM and WHERE of a select of attempts: a suite's rows of ``display.runs_display``;
    without a suite (SQL users, tests: never a page), every attempt once, whichever suites count
    it (its row of the first, or its one row when none does)."""
    where, params = _where(filters, SETTING, attempts=True)
    if statuses:
        where += " and status in (select unnest(?::varchar[]))"
        params.append(list(statuses))
    source = "display.runs_display"
    if (filters or NO_FILTERS).suite is None:
        source = (
            f"(select * from {source} qualify row_number() over "
            "(partition by run_space, run_id order by suite_id nulls last) = 1)"
        )
    return f"{source} where true{where}", params


def runs(
    con: duckdb.DuckDBPyConnection,
    filters: Filters | None = None,
    statuses: tuple[str, ...] = (),
    limit: int | None = None,
) -> pd.DataFrame:
    """The attempts (``display.runs_display``) matching the filters, newest first (at most
    ``limit``)."""
    source, params = _runs_where(filters, tuple(statuses))
    top = f" limit {int(limit)}" if limit is not None else ""
    return _read(
        con, f"select {RUN_COLUMNS} from {source} order by created_at desc, run_id{top}", params
    )


def run_count(
    con: duckdb.DuckDBPyConnection, filters: Filters | None = None, statuses: tuple[str, ...] = ()
) -> int:
    """How many attempts match the filters (and statuses)."""
    source, params = _runs_where(filters, tuple(statuses))
    frame = _read(con, f"select count(*) as n from {source}", params)
    return int(frame["n"].iloc[0])


Record = dict[str, object]  # one attempt's fields as the warehouse holds them (NULL: None)


def run_record(con: duckdb.DuckDBPyConnection, run_space: str, run_id: str) -> Record:
    """One attempt's every record field (its row of ``display.runs_display``, with the record's
    own suite_id as it was recorded, in the record's column order; NULL as None), or {} if it is
    not there. Fetched as a Python row: a one-row DataFrame of its ~80 columns costs more than
    the query (~0.1 s)."""
    cursor = _cursor(con)
    try:
        cursor.execute(
            "select * exclude (suite_id) rename (recorded_suite_id as suite_id) "
            "from display.runs_display where run_space = ? and run_id = ? limit 1",
            [run_space, run_id],
        )
        row = cursor.fetchone()
        if row is None:
            return {}
        return dict(zip([c[0] for c in cursor.description], row, strict=True))
    finally:
        cursor.close()


# (suite_id, task_id, submission_normalized_sha256, agent_id, budget_seconds) of an attempt
TwinKey = tuple[str | None, str, str, str, int]


def submission_twins(
    con: duckdb.DuckDBPyConnection, run_id: str, twin_key: TwinKey, limit: int = TWIN_ROWS
) -> pd.DataFrame:
    """The other attempts of ``run_id``'s task that submitted the same answer (``display.
    submission_twins_display``), oldest first, at most ``limit``; ``total`` is how many there are, and
    ``relation`` says whose they are: the same setting (a replay), the same agent at another
    budget, or another agent. The relation is of a pair of attempts, relative to the one opened,
    so no mart holds it for every pair (a deterministic agent has thousands of twins).

    twin_key: the opened attempt's (suite_id, task_id, submission_normalized_sha256, agent_id,
    budget_seconds): twins are of one suite's attempts."""
    suite_id, task_id, fingerprint, agent_id, budget_seconds = twin_key
    return _read(
        con,
        """
        select run_id, agent_id, budget_seconds, created_at, status, score, is_counted,
               success_index,
               case when agent_id = $agent and budget_seconds = $budget
                        then 'same setting (replay)'
                    when agent_id = $agent then 'same agent, another budget'
                    else 'another agent' end as relation,
               count(*) over () as total
        from display.submission_twins_display
        where suite_id = $suite and task_id = $task
            and submission_normalized_sha256 = $fingerprint and run_id <> $run_id
        order by created_at, run_id
        limit $limit
        """,
        {
            "suite": suite_id,
            "agent": agent_id,
            "budget": int(budget_seconds),
            "task": task_id,
            "fingerprint": fingerprint,
            "run_id": run_id,
            "limit": int(limit),
        },
    )
