"""The numbers tmlbench's report plots, by figure, with the report's file stems and the models' own
column names: what tests/warehouse/report/test_against_original.py compares with the original.

Two sources give the same frames: ``from_marts`` selects them from a built warehouse (the report
reads the same models), ``from_report`` reads a report bundle's CSV companions
(``<figure>.csv``). Each frame holds at least ``COLUMNS[figure]``:

========================== =====================================================================
figure                     columns (grain)
========================== =====================================================================
leaderboard_best_budget,   agent_id, score, rank (primary points), score_paper, rank_paper (the
leaderboard_all_cells,     paper's min-max points); one row per ranked agent, one file per
leaderboard_largest_budget variant (marts.leaderboard)
success_rates              agent_id, success_rate (successes ÷ agent_attempts), successes,
                           agent_attempts, attempts, harness_errors, provider_errors
                           (display.reliability_display)
run_stability              agent_id, run_rel_iqr, run_settings (display.reliability_display)
rank_std                   agent_id, mean_rank, rank_std, n_tasks (marts.rank_stability)
rank_heatmap               agent_id, task_id, best_points, rank (marts.task_ranks)
time_scaling               agent_id, budget_seconds, mean_points, n_tasks (marts.time_scaling)
marginal_gains             agent_id, from_budget_seconds, to_budget_seconds, gain (consecutive
                           budgets of time_scaling: the report branch's marts.time_scaling_gains)
monotonicity_rate          agent_id, share_monotone, monotone_curves, curves
                           (marts.time_scaling_monotone)
========================== =====================================================================
"""

from __future__ import annotations

from pathlib import Path

import duckdb
import pandas as pd

VARIANTS = ("best_budget", "all_cells", "largest_budget")

SELECTS: dict[str, str] = {
    **{
        f"leaderboard_{variant}": (
            "select agent_id, score, rank, score_paper, rank_paper from marts.leaderboard "
            f"where suite_id = ? and variant = '{variant}' order by rank, agent_id"
        )
        for variant in VARIANTS
    },
    "success_rates": (
        "select agent_id, success_rate, successes, agent_attempts, attempts, harness_errors, "
        "provider_errors from display.reliability_display where suite_id = ? "
        "order by success_rate desc, agent_id"
    ),
    "run_stability": (
        "select agent_id, run_rel_iqr, run_settings from display.reliability_display "
        "where suite_id = ? and run_rel_iqr is not null order by run_rel_iqr, agent_id"
    ),
    "rank_std": (
        "select agent_id, mean_rank, rank_std, n_tasks from marts.rank_stability "
        "where suite_id = ? order by mean_rank, agent_id"
    ),
    "rank_heatmap": (
        "select agent_id, task_id, best_points, rank from marts.task_ranks "
        "where suite_id = ? order by task_id, rank, agent_id"
    ),
    "time_scaling": (
        "select agent_id, budget_seconds, mean_points, n_tasks from marts.time_scaling "
        "where suite_id = ? order by agent_id, budget_seconds"
    ),
    # what marts.time_scaling_gains (issue 28's report branch) holds, until it is merged
    "marginal_gains": (
        "select * from (select agent_id, "
        "lag(budget_seconds) over w as from_budget_seconds, budget_seconds as to_budget_seconds, "
        "mean_points - lag(mean_points) over w as gain from marts.time_scaling "
        "where suite_id = ? window w as (partition by agent_id order by budget_seconds)) "
        "where from_budget_seconds is not null order by agent_id, to_budget_seconds"
    ),
    "monotonicity_rate": (
        "select agent_id, share_monotone, monotone_curves, curves "
        "from marts.time_scaling_monotone where suite_id = ? "
        "order by share_monotone desc, agent_id"
    ),
}
FIGURES = tuple(SELECTS)


def from_marts(warehouse: Path, suite: str) -> dict[str, pd.DataFrame]:
    """Each figure's numbers for ``suite``, from the marts of a built warehouse."""
    with duckdb.connect(str(warehouse), read_only=True) as con:
        return {name: con.execute(sql, [suite]).df() for name, sql in SELECTS.items()}


def from_report(bundle: Path) -> dict[str, pd.DataFrame]:
    """Each figure's numbers from a report bundle's CSV companions (``<figure>.csv``)."""
    return {name: pd.read_csv(bundle / f"{name}.csv") for name in FIGURES}
