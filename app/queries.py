"""SQL over the published snapshot of the marts, as pandas DataFrames (no Streamlit here).

Every function opens its own short-lived read-only DuckDB connection to the snapshot
(``warehouse/snapshot.py``), so the dashboard never holds the warehouse's writer lock and a
newly published snapshot is picked up on the next query.
"""

from __future__ import annotations

import os
import stat
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


def leaderboard(path: Path, variant: str = "best_budget") -> pd.DataFrame:
    """Ranked (covered) agents of one variant, with success rate, run-to-run spread and,
    for the primary variant, the bootstrap interval; agent metadata when the snapshot has
    ``raw.agents``."""
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
    sql = f"""
        select lb.rank, lb.agent_id{agent_cols}, lb.score{unc_cols},
               sr.success_rate, sr.successes, sr.attempts,
               rs.rel_iqr as run_rel_iqr, lb.n_cells
        from marts.leaderboard lb
        left join marts.success_rates sr using (agent_id)
        left join marts.run_stability rs using (agent_id)
        {unc_join}
        {agent_join}
        where lb.variant = ?
        order by lb.rank, lb.agent_id
    """
    return _read(path, sql, [variant])


def coverage(path: Path) -> pd.DataFrame:
    """One row per agent: settings expected, settings still lacking successes, ranked or not."""
    return _read(
        path,
        """
        select agent_id,
               count(*) as settings,
               count(*) filter (where missing > 0) as incomplete_settings,
               sum(missing)::bigint as missing_successes,
               bool_and(agent_is_covered) as is_ranked
        from marts.coverage
        group by agent_id
        order by is_ranked desc, agent_id
        """,
    )


def setting_scores(path: Path) -> pd.DataFrame:
    """Task × budget medians and quartiles of every agent (one row per setting)."""
    return _read(
        path,
        """
        select agent_id, task_id, budget_seconds, metric_direction, median_score, q1, q3, iqr,
               n_counted, successes, attempts
        from marts.setting_scores
        order by task_id, budget_seconds, agent_id
        """,
    )


def success_rates(path: Path) -> pd.DataFrame:
    """One row per agent: attempts, successes, success rate and one count per status."""
    counts = ", ".join(f"sr.n_{s}" for s in STATUSES)
    return _read(
        path,
        f"""
        select sr.agent_id, sr.attempts, sr.successes, sr.success_rate, {counts},
               rs.rel_iqr as run_rel_iqr, rs.n_settings as run_settings
        from marts.success_rates sr
        left join marts.run_stability rs using (agent_id)
        order by sr.success_rate desc, sr.agent_id
        """,
    )


def status_counts(path: Path) -> pd.DataFrame:
    """Long form of the status counts: agent_id, status, attempts (for a stacked bar chart)."""
    frame = success_rates(path)[["agent_id", *(f"n_{s}" for s in STATUSES)]]
    long = frame.melt(
        id_vars="agent_id",
        value_vars=[f"n_{s}" for s in STATUSES],
        var_name="status",
        value_name="attempts",
    )
    long["status"] = long["status"].str.removeprefix("n_")
    return long


def rank_stability(path: Path) -> pd.DataFrame:
    """One row per ranked agent: mean and sample std of its task ranks."""
    return _read(
        path,
        "select agent_id, mean_rank, rank_std, n_tasks from marts.rank_stability "
        "order by mean_rank, agent_id",
    )


def task_ranks(path: Path) -> pd.DataFrame:
    """One row per (ranked agent, task): best points over budgets and rank on the task."""
    return _read(
        path,
        "select agent_id, task_id, best_points, rank from marts.task_ranks "
        "order by task_id, rank, agent_id",
    )


def time_scaling(path: Path) -> pd.DataFrame:
    """One row per (ranked agent, budget): mean normalized points over tasks."""
    return _read(
        path,
        "select agent_id, budget_seconds, mean_points, n_tasks from marts.time_scaling "
        "order by agent_id, budget_seconds",
    )


RUN_COLUMNS = (
    "run_id, created_at, agent_id, task_id, budget_seconds, instruction_profile, attempt_index, "
    "status, score, local_validation_score, validation_code, wall_seconds, peak_memory_bytes, "
    "source_path"
)


def runs(path: Path) -> pd.DataFrame:
    """Every attempt in the snapshot, newest first (the run explorer filters this)."""
    if "raw.runs" not in _tables(path):
        return pd.DataFrame()
    return _read(path, f"select {RUN_COLUMNS} from raw.runs order by created_at desc, run_id")


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
