"""SQL over the published snapshot of the marts, as pandas DataFrames (no Streamlit here).

Every function opens its own short-lived read-only DuckDB connection to the snapshot
(``warehouse/snapshot.py``), so the dashboard never holds the warehouse's writer lock and a
newly published snapshot is picked up on the next query.
"""

from __future__ import annotations

import datetime as dt
import functools
import json
import os
import stat
from dataclasses import dataclass
from pathlib import Path

import duckdb
import pandas as pd

from warehouse.db import warehouse_path
from warehouse.snapshot import snapshot_path as _published_snapshot_path

SNAPSHOT_ENV = "TMLBENCH_SNAPSHOT"
VARIANTS = ("best_budget", "all_cells", "largest_budget")
STATUSES = (
    "success",
    "invalid_submission",
    "no_submission",
    "timeout",
    "runtime_error",
    "provider_error",
    "harness_error",
)
AGENT_COLUMNS = ("title", "harness", "provider", "model_id")
RUN_ROWS = 2_000  # attempts the run explorer draws at once (newest first); the CSV has all


@dataclass(frozen=True)
class Filters:
    """The dashboard's global filters; an empty selection means "all".

    On the marts (aggregates over all attempts) agents, tasks and budgets select rows and a
    suite keeps the agents and tasks that ran in it; scores and ranks are not recomputed. The
    date range applies only to attempt-level views (the run explorer, the counted attempts).
    """

    suites: tuple[str, ...] = ()
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
    alias: str = "",
    columns: tuple[str, ...] = AGENT,
    *,
    attempts: bool = False,
) -> tuple[str, list]:
    """SQL conditions (`` and ...``) and their parameters for ``filters`` on a table aliased
    ``alias`` with the key ``columns``; ``attempts``: a table of attempts (suite_id,
    created_at), where the suite and date range select attempts directly."""
    f = filters or NO_FILTERS
    a = f"{alias}." if alias else ""
    sql, params = [], []
    for column, values, cast in (
        ("agent_id", f.agents, "varchar"),
        ("task_id", f.tasks, "varchar"),
        ("budget_seconds", f.budgets, "integer"),
    ):
        if values and column in columns:
            sql.append(f"{a}{column} in (select unnest(?::{cast}[]))")
            params.append(list(values))
    if attempts:
        if f.suites:
            sql.append(f"{a}suite_id in (select unnest(?::varchar[]))")
            params.append(list(f.suites))
        if f.start is not None:
            sql.append(f"timezone('UTC', {a}created_at)::date >= ?")
            params.append(f.start)
        if f.end is not None:
            sql.append(f"timezone('UTC', {a}created_at)::date <= ?")
            params.append(f.end)
    elif f.suites:  # an aggregate: keep the agents (and tasks) that ran in the suite
        for column in ("agent_id", "task_id"):
            if column in columns:
                sql.append(
                    f"{a}{column} in (select {column} from raw.runs "
                    "where suite_id in (select unnest(?::varchar[])))"
                )
                params.append(list(f.suites))
    return "".join(f" and {c}" for c in sql), params


def snapshot_path(environ: dict[str, str] | None = None) -> Path:
    """``$TMLBENCH_SNAPSHOT``, else the snapshot published next to the warehouse."""
    env = os.environ if environ is None else environ
    value = env.get(SNAPSHOT_ENV)
    if value:
        return Path(value).expanduser().resolve()
    return _published_snapshot_path(warehouse_path(env))


def _read(path: Path, sql: str, params: list | None = None) -> pd.DataFrame:
    con = duckdb.connect(str(path), read_only=True)
    try:
        return con.execute(sql, params or []).df()
    finally:
        con.close()


def _tables(path: Path) -> set[str]:
    frame = _read(
        path,
        "select table_schema || '.' || table_name as name from information_schema.tables",
    )
    return set(frame["name"])


def _has_ceiling(path: Path) -> bool:
    """The snapshot's coverage mart reports the harness-error ceiling (snapshots built before it
    do not: the pages then leave it out instead of failing)."""
    try:
        version = Path(path).stat().st_mtime_ns  # a new snapshot is a new file: asked again
    except OSError:
        version = 0
    return _has_ceiling_in(str(path), version)


@functools.lru_cache(maxsize=8)
def _has_ceiling_in(path: str, version: int) -> bool:
    # one connection and a catalog query (~70 ms on a busy 2-core VM): once per snapshot
    frame = _read(
        Path(path),
        "select count(*) as n from information_schema.columns where table_schema = 'marts' "
        "and table_name = 'coverage' and column_name = 'harness_error_ceiling_reached'",
    )
    return bool(frame["n"].iloc[0])


# A setting stopped at the harness-error ceiling: it still lacks successes, and its harness
# faults reached its suite's ceiling, so the runner gives it no more attempts (marts.coverage).
STOPPED = "harness_error_ceiling_reached and missing > 0"


def has_runs(path: Path) -> bool:
    """The snapshot exists, is readable and its marts hold at least one attempt."""
    path = Path(path)
    if not path.is_file():
        return False
    try:
        if "marts.success_rates" not in _tables(path):
            return False
        count = _read(path, "select count(*) as n from marts.success_rates")["n"].iloc[0]
    except duckdb.Error:
        return False
    return bool(count)


def filter_options(path: Path) -> dict:
    """What the sidebar filters offer: suites, agents, tasks, budgets seen in raw.runs and the
    first and last day (UTC) an attempt was created."""
    frame = _read(
        path,
        """
        select list(distinct suite_id order by suite_id) filter (where suite_id is not null)
                   as suites,
               list(distinct agent_id order by agent_id) as agents,
               list(distinct task_id order by task_id) as tasks,
               list(distinct budget_seconds order by budget_seconds)
                   filter (where budget_seconds is not null) as budgets,
               min(timezone('UTC', created_at))::date as first_day,
               max(timezone('UTC', created_at))::date as last_day
        from raw.runs
        """,
    )
    row = frame.iloc[0]

    def values(name: str) -> list:
        value = row[name]
        return [] if value is None or value is pd.NA else list(value)

    def day(name: str) -> dt.date | None:
        return None if pd.isna(row[name]) else pd.Timestamp(row[name]).date()

    return {
        "suites": values("suites"),
        "agents": values("agents"),
        "tasks": values("tasks"),
        "budgets": [int(b) for b in values("budgets")],
        "first_day": day("first_day"),
        "last_day": day("last_day"),
    }


# Per agent, from marts.setting_duplicates: settings whose counted attempts (the ones its score is
# the median of) include the same answer twice, attempts whose answer another agent also
# submitted, and whether every counted attempt has a fingerprint (records before schema 5 do not).
DUPLICATES_PER_AGENT = """
            select agent_id,
                   count(*) filter (where duplicated_counted) as replayed_settings,
                   sum(n_shared_with_other_agents)::bigint as shared_attempts,
                   bool_and(n_counted_fingerprinted = n_counted) as known
            from marts.setting_duplicates
            group by agent_id
        """
# "⚠ replayed in k settings" and/or "⧉ m attempts shared with other agents"; else "✓ distinct"
# when every counted attempt has a fingerprint, "fingerprints unknown" when some do not.
DUPLICATES_BADGE = """case
                   when dup.replayed_settings > 0 or dup.shared_attempts > 0 then concat_ws(' · ',
                       case when dup.replayed_settings > 0 then '⚠ replayed in '
                            || dup.replayed_settings || ' setting(s)' end,
                       case when dup.shared_attempts > 0 then '⧉ ' || dup.shared_attempts
                            || ' attempt(s) shared with other agents' end)
                   when dup.known then '✓ distinct'
                   else 'fingerprints unknown' end"""


def leaderboard(
    path: Path, variant: str = "best_budget", filters: Filters | None = None
) -> pd.DataFrame:
    """Ranked (covered) agents of one variant, with success rate, run-to-run spread, badges
    (coverage of the suite's settings, contamination of its tasks) and, for the primary variant,
    the bootstrap interval; agent metadata when the snapshot has ``raw.agents``.

    contamination: "contaminated: <tasks>" when the model's knowledge cutoff is on or after a
    benchmarked task's start date, "clean" when known for every task, else "cutoff unknown".
    duplicates (snapshots with ``marts.setting_duplicates``): see ``DUPLICATES_BADGE``.
    """
    if variant not in VARIANTS:
        raise ValueError(f"unknown leaderboard variant {variant!r}; expected one of {VARIANTS}")
    tables = _tables(path)
    agent_cols, agent_join = "", ""
    if "raw.agents" in tables:
        agent_cols = "".join(f", ag.{c}" for c in AGENT_COLUMNS)
        agent_join = "left join raw.agents ag using (agent_id)"
    unc_cols, unc_join = "", ""
    if "marts.leaderboard_uncertainty" in tables and variant == "best_budget":
        unc_cols = ", u.score_low, u.score_high, u.p_rank_1"
        unc_join = "left join marts.leaderboard_uncertainty u using (agent_id)"
    contam_cte, contam_col, contam_join = "", ", 'cutoff unknown' as contamination", ""
    if "marts.contamination_flags" in tables:
        contam_cte = """,
        contam as (
            select agent_id,
                   string_agg(task_id, ', ' order by task_id) filter (where contaminated)
                       as contaminated_tasks,
                   bool_and(contaminated is not null) as known
            from marts.contamination_flags
            where task_id in (select task_id from marts.coverage)
            group by agent_id
        )"""
        contam_col = """,
               case when ct.contaminated_tasks is not null
                    then '⚠ contaminated: ' || ct.contaminated_tasks
                    when ct.known then '✓ clean'
                    else 'cutoff unknown' end as contamination"""
        contam_join = "left join contam ct using (agent_id)"
    dup_cte, dup_col, dup_join = "", "", ""
    if "marts.setting_duplicates" in tables:
        dup_cte = f""",
        dup as ({DUPLICATES_PER_AGENT})"""
        dup_col = f",\n               {DUPLICATES_BADGE} as duplicates"
        dup_join = "left join dup using (agent_id)"
    where, params = _where(filters, "lb")
    sql = f"""
        with cov as (
            select agent_id, count(*) as settings,
                   count(*) filter (where missing = 0) as complete_settings
            from marts.coverage
            group by agent_id
        ){contam_cte}{dup_cte}
        select lb.rank, lb.agent_id{agent_cols},
               case when cov.complete_settings = cov.settings then '✓ ' else '✗ ' end
                   || cov.complete_settings || '/' || cov.settings || ' settings' as coverage
               {contam_col}{dup_col},
               lb.score{unc_cols}, sr.success_rate, sr.successes, sr.attempts,
               rs.rel_iqr as run_rel_iqr, lb.n_cells
        from marts.leaderboard lb
        left join marts.success_rates sr using (agent_id)
        left join marts.run_stability rs using (agent_id)
        left join cov using (agent_id)
        {contam_join}
        {dup_join}
        {unc_join}
        {agent_join}
        where lb.variant = ?{where}
        order by lb.rank, lb.agent_id
    """
    return _read(path, sql, [variant, *params])


def coverage(path: Path, filters: Filters | None = None) -> pd.DataFrame:
    """One row per agent: settings expected, settings still lacking successes, ranked or not,
    a badge (✓ ranked / ✗ k settings incomplete, with how many of them stopped at the
    harness-error ceiling), its harness faults and its settings stopped at the ceiling."""
    where, params = _where(filters, columns=SETTING)
    stopped = f"count(*) filter (where {STOPPED})"
    ceiling_badge, ceiling_cols = "", ""
    if _has_ceiling(path):
        ceiling_badge = f"""
                         || case when {stopped} > 0
                                 then ' · ⛔ ' || {stopped}
                                      || ' stopped at the harness-error ceiling'
                                 else '' end"""
        ceiling_cols = f""",
               sum(n_harness_error)::bigint as harness_errors,
               {stopped} as stopped_at_harness_error_ceiling"""
    return _read(
        path,
        f"""
        select agent_id,
               case when bool_and(agent_is_covered) then '✓ ranked'
                    else '✗ ' || count(*) filter (where missing > 0) || ' of '
                         || count(*) || ' settings incomplete'{ceiling_badge} end as badge,
               count(*) as settings,
               count(*) filter (where missing > 0) as incomplete_settings,
               sum(missing)::bigint as missing_successes,
               bool_and(agent_is_covered) as is_ranked{ceiling_cols}
        from marts.coverage
        where true{where}
        group by agent_id
        order by is_ranked desc, agent_id
        """,
        params,
    )


def stopped_settings(path: Path, filters: Filters | None = None) -> pd.DataFrame:
    """The settings stopped at the harness-error ceiling (see ``STOPPED``), with their count of
    harness faults, the ceiling and the successes they lack; empty for snapshots without it."""
    if not _has_ceiling(path):
        return pd.DataFrame()
    where, params = _where(filters, columns=SETTING)
    return _read(
        path,
        f"""
        select agent_id, task_id, budget_seconds,
               '⛔ ' || n_harness_error || ' harness errors (ceiling '
                   || harness_error_ceiling || ')' as harness_errors,
               n_harness_error, harness_error_ceiling, attempts, successes, missing
        from marts.coverage
        where {STOPPED}{where}
        order by agent_id, task_id, budget_seconds
        """,
        params,
    )


def duplicated_settings(path: Path, filters: Filters | None = None) -> pd.DataFrame:
    """The settings whose attempts submitted the same answer twice (``marts.setting_duplicates``:
    ``duplicated``), first those where it is among the counted attempts (``duplicated_counted``:
    the setting's median is not over independent attempts); empty for snapshots without it."""
    if "marts.setting_duplicates" not in _tables(path):
        return pd.DataFrame()
    where, params = _where(filters, columns=SETTING)
    return _read(
        path,
        f"""
        select agent_id, task_id, budget_seconds,
               coalesce(duplicated_counted, false) as duplicated_counted,
               n_counted, n_distinct_counted_submissions, n_fingerprinted,
               n_distinct_submissions, n_shared_with_other_agents
        from marts.setting_duplicates
        where duplicated{where}
        order by duplicated_counted desc, agent_id, task_id, budget_seconds
        """,
        params,
    )


def setting_scores(path: Path, filters: Filters | None = None) -> pd.DataFrame:
    """Task × budget medians and quartiles of every agent (one row per setting), with its
    harness faults: ``harness_errors`` says "n of <ceiling>", marked ⛔ when the setting stopped
    at the harness-error ceiling."""
    where, params = _where(filters, columns=SETTING, alias="s")
    ceiling_cols, ceiling_join = "", ""
    if _has_ceiling(path):
        stopped = "c.harness_error_ceiling_reached and c.missing > 0"  # STOPPED, of alias c
        ceiling_cols = f""",
               c.n_harness_error,
               case when {stopped}
                    then '⛔ ' || c.n_harness_error || ' of ' || c.harness_error_ceiling
                         || ': stopped at the ceiling'
                    else c.n_harness_error
                         || coalesce(' of ' || c.harness_error_ceiling, '') end
                   as harness_errors,
               coalesce({stopped}, false) as stopped_at_harness_error_ceiling"""
        ceiling_join = "left join marts.coverage c using (agent_id, task_id, budget_seconds)"
    return _read(
        path,
        f"""
        select s.agent_id, s.task_id, s.budget_seconds, s.metric_direction, s.median_score,
               s.q1, s.q3, s.iqr, s.n_counted, s.successes, s.attempts{ceiling_cols}
        from marts.setting_scores s
        {ceiling_join}
        where true{where}
        order by s.task_id, s.budget_seconds, s.agent_id
        """,
        params,
    )


def counted_attempts(
    path: Path, task_id: str, budget_seconds: int, filters: Filters | None = None
) -> pd.DataFrame:
    """Every counted attempt (first N successes of each setting) of one task × budget."""
    where, params = _where(filters, columns=SETTING, attempts=True)
    return _read(
        path,
        f"""
        select run_id, agent_id, task_id, budget_seconds, created_at, success_index, score,
               score_hib
        from marts.counted_attempts
        where task_id = ? and budget_seconds = ?{where}
        order by agent_id, success_index
        """,
        [task_id, int(budget_seconds), *params],
    )


def success_rates(path: Path, filters: Filters | None = None) -> pd.DataFrame:
    """One row per agent: attempts, successes, success rate and one count per status."""
    counts = ", ".join(f"sr.n_{s}" for s in STATUSES)
    where, params = _where(filters, "sr")
    return _read(
        path,
        f"""
        select sr.agent_id, sr.attempts, sr.agent_attempts, sr.successes, sr.success_rate, {counts},
               rs.rel_iqr as run_rel_iqr, rs.n_settings as run_settings
        from marts.success_rates sr
        left join marts.run_stability rs using (agent_id)
        where true{where}
        order by sr.success_rate desc, sr.agent_id
        """,
        params,
    )


def status_counts(path: Path, filters: Filters | None = None) -> pd.DataFrame:
    """Long form of the status counts: agent_id, status, attempts (for a stacked bar chart)."""
    frame = success_rates(path, filters)[["agent_id", *(f"n_{s}" for s in STATUSES)]]
    long = frame.melt(
        id_vars="agent_id",
        value_vars=[f"n_{s}" for s in STATUSES],
        var_name="status",
        value_name="attempts",
    )
    long["status"] = long["status"].str.removeprefix("n_")
    return long


def performance_stability(path: Path, filters: Filters | None = None) -> pd.DataFrame:
    """One row per ranked agent: primary score (best budget) and run-to-run relative IQR."""
    where, params = _where(filters, "lb")
    return _read(
        path,
        f"""
        select lb.agent_id, lb.score, lb.rank, rs.rel_iqr, rs.n_settings
        from marts.leaderboard lb
        left join marts.run_stability rs using (agent_id)
        where lb.variant = 'best_budget'{where}
        order by lb.rank, lb.agent_id
        """,
        params,
    )


def rank_stability(path: Path, filters: Filters | None = None) -> pd.DataFrame:
    """One row per ranked agent: mean and sample std of its task ranks."""
    where, params = _where(filters)
    return _read(
        path,
        "select agent_id, mean_rank, rank_std, n_tasks from marts.rank_stability "
        f"where true{where} order by mean_rank, agent_id",
        params,
    )


def task_ranks(path: Path, filters: Filters | None = None) -> pd.DataFrame:
    """One row per (ranked agent, task): best points over budgets and rank on the task."""
    where, params = _where(filters, columns=AGENT_TASK)
    return _read(
        path,
        "select agent_id, task_id, best_points, rank from marts.task_ranks "
        f"where true{where} order by task_id, rank, agent_id",
        params,
    )


def time_scaling(path: Path, filters: Filters | None = None) -> pd.DataFrame:
    """One row per (ranked agent, budget): mean normalized points over tasks."""
    where, params = _where(filters, columns=AGENT_BUDGET)
    return _read(
        path,
        "select agent_id, budget_seconds, mean_points, n_tasks from marts.time_scaling "
        f"where true{where} order by agent_id, budget_seconds",
        params,
    )


def time_scaling_monotone(path: Path, filters: Filters | None = None) -> pd.DataFrame:
    """One row per ranked agent: how many of its (agent, task) curves never get worse as the
    budget grows (``marts.time_scaling_monotone``)."""
    where, params = _where(filters)
    return _read(
        path,
        "select agent_id, curves, monotone_curves, share_monotone "
        f"from marts.time_scaling_monotone where true{where} "
        "order by share_monotone desc, agent_id",
        params,
    )


def monotone_curves(path: Path, filters: Filters | None = None) -> pd.DataFrame:
    """One row per (ranked agent, task) curve of points over budgets: monotone or not, and the
    points at each budget (the same rule as ``marts.time_scaling_monotone``)."""
    where, params = _where(filters, columns=AGENT_TASK)
    return _read(
        path,
        f"""
        with steps as (
            select agent_id, task_id, budget_seconds, points,
                   lag(points) over (partition by agent_id, task_id order by budget_seconds)
                       as previous_points
            from marts.normalized_scores
            where true{where}
        )
        select agent_id, task_id,
               bool_and(previous_points is null or points >= previous_points) as is_monotone,
               string_agg(printf('%.2f', points), ' → ' order by budget_seconds) as points
        from steps
        group by agent_id, task_id
        order by agent_id, task_id
        """,
        params,
    )


def agent_costs(path: Path, filters: Filters | None = None) -> pd.DataFrame:
    """One row per agent: tokens and cost (null = unknown), cost per success, points per dollar."""
    where, params = _where(filters)
    return _read(
        path,
        f"select * from marts.agent_costs where true{where} order by agent_id",
        params,
    )


def setting_costs(path: Path, filters: Filters | None = None) -> pd.DataFrame:
    """One row per setting: tokens and cost (null = unknown), cost per success, points per dollar."""
    where, params = _where(filters, columns=SETTING)
    return _read(
        path,
        f"select * from marts.setting_costs where true{where} "
        "order by agent_id, task_id, budget_seconds",
        params,
    )


RUN_COLUMNS = (
    "run_id, created_at, agent_id, task_id, budget_seconds, instruction_profile, attempt_index, "
    "status, score, local_validation_score, validation_code, wall_seconds, peak_memory_bytes, "
    "tokens_in, tokens_out, cost_usd, suite_id, source_path"
)


def _runs_where(filters: Filters | None, statuses: tuple[str, ...]) -> tuple[str, list]:
    where, params = _where(filters, columns=SETTING, attempts=True)
    if statuses:
        where += " and status in (select unnest(?::varchar[]))"
        params.append(list(statuses))
    return where, params


def runs(
    path: Path,
    filters: Filters | None = None,
    statuses: tuple[str, ...] = (),
    limit: int | None = None,
) -> pd.DataFrame:
    """The attempts matching the filters, newest first (at most ``limit`` when given)."""
    if "raw.runs" not in _tables(path):
        return pd.DataFrame()
    where, params = _runs_where(filters, tuple(statuses))
    top = f" limit {int(limit)}" if limit is not None else ""
    return _read(
        path,
        f"select {RUN_COLUMNS} from raw.runs where true{where} "
        f"order by created_at desc, run_id{top}",
        params,
    )


def run_count(path: Path, filters: Filters | None = None, statuses: tuple[str, ...] = ()) -> int:
    """How many attempts match the filters (and statuses)."""
    where, params = _runs_where(filters, tuple(statuses))
    frame = _read(path, f"select count(*) as n from raw.runs where true{where}", params)
    return int(frame["n"].iloc[0])


def run_record(path: Path, run_id: str) -> dict:
    """One attempt's full row of raw.runs (every record field), or {} if it is not there."""
    frame = _read(path, "select * from raw.runs where run_id = ?", [run_id])
    return {} if frame.empty else frame.iloc[0].to_dict()


LOG_PREVIEW_BYTES = 64 * 1024


def run_file_preview(record: dict, field: str, limit: int = LOG_PREVIEW_BYTES) -> str | None:
    """The head of a file the record points to (``stdout_path``, ``submission_path``, ...).

    Paths are relative to the run folder, which is where the loaded record file lives. Files an
    agent wrote are untrusted: only a regular file (no symlink) inside the run folder is read,
    and at most ``limit`` bytes. None when the record has no such file on this machine.
    """
    relative, source = record.get(field), record.get("source_path")
    if not relative or not source:
        return None
    run_dir = Path(source).parent.resolve()
    target = run_dir / relative
    try:
        if not stat.S_ISREG(target.lstat().st_mode) or not target.resolve().is_relative_to(run_dir):
            return None
        with target.open("rb") as fh:
            head = fh.read(limit + 1)
    except OSError:
        return None
    text = head[:limit].decode("utf-8", errors="replace")
    return text + ("\n… (truncated)" if len(head) > limit else "")


TRANSCRIPT_PREVIEW_BYTES = 2 * 1024**2


def run_transcript(record: dict, limit: int = TRANSCRIPT_PREVIEW_BYTES) -> list[dict] | None:
    """An attempt's transcript as events: the built-in llm agent's (start, request, response,
    tool, retry, end, ...) or the provider gateway's for command agents (gateway_start,
    model_call, request, transcript_full, gateway_stop; see runner.gateway).

    Read like any other run file (regular file inside the run folder, at most ``limit`` bytes);
    a line that is not a JSON object with a string ``event`` (e.g. cut by the limit) is
    skipped. None without one.
    """
    text = run_file_preview(record, "transcript_path", limit)
    if text is None:
        return None
    events = []
    for line in text.splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if isinstance(event, dict) and isinstance(event.get("event"), str):
            events.append(event)
    return events


USAGE_FIELDS = (
    "tokens_in", "tokens_out", "cost_usd", "requests", "retries", "steps",
    "provider_seconds", "tool_seconds", "egress_requests", "egress_denied",
    "egress_denied_hosts", "egress_bytes_up", "egress_bytes_down",
)  # fmt: skip


def run_usage(record: dict) -> dict:
    """The model-usage and egress fields an attempt recorded (unknown ones left out)."""
    return {
        k: record[k] for k in USAGE_FIELDS if record.get(k) is not None and record[k] == record[k]
    }


TWIN_ROWS = 500  # twins of one attempt the run explorer draws (a deterministic agent has thousands)


def submission_twins(path: Path, run_id: str, limit: int = TWIN_ROWS) -> pd.DataFrame | None:
    """The other attempts of ``run_id``'s task that submitted the same answer (same canonical
    fingerprint; ``marts.submission_twins``), oldest first, at most ``limit``; ``total`` is how
    many there are and ``relation`` says whose they are: the same setting (a replay), the same
    agent at another budget, or another agent. Empty when the attempt has none (or no
    fingerprint); None when the snapshot predates the mart."""
    if "marts.submission_twins" not in _tables(path):
        return None
    return _read(
        path,
        """
        with me as (
            select task_id, submission_normalized_sha256, agent_id, budget_seconds
            from marts.submission_twins
            where run_id = ?
        )
        select t.run_id, t.agent_id, t.budget_seconds, t.created_at, t.status, t.score,
               t.is_counted, t.success_index,
               case when t.agent_id = me.agent_id and t.budget_seconds = me.budget_seconds
                        then 'same setting (replay)'
                    when t.agent_id = me.agent_id then 'same agent, another budget'
                    else 'another agent' end as relation,
               count(*) over () as total
        from marts.submission_twins t
        inner join me
            on t.task_id = me.task_id
            and t.submission_normalized_sha256 = me.submission_normalized_sha256
        where t.run_id <> ?
        order by t.created_at, t.run_id
        limit ?
        """,
        [run_id, run_id, int(limit)],
    )


def run_source_fields(record: dict) -> pd.DataFrame | None:
    """An imported attempt's ``source_fields`` (the source's fields raw.runs has no column for) as
    rows of field and value: strings as they are, anything else as compact JSON. A value that is
    not a JSON object becomes one row named "(value)". None when the attempt has none."""
    raw = record.get("source_fields")
    if raw is None or (isinstance(raw, float) and raw != raw):  # NULL: None or NaN
        return None
    try:
        value = json.loads(raw) if isinstance(raw, str) else raw
    except ValueError:
        value = raw  # not JSON after all: shown as the text it is
    items = value.items() if isinstance(value, dict) else [("(value)", value)]
    return pd.DataFrame(
        [(str(k), v if isinstance(v, str) else json.dumps(v, default=str)) for k, v in items],
        columns=["field", "value"],
    )
