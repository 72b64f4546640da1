"""The numbers tmlbench's report plots, by figure: the report bundle's CSV companions
(``figures/<figure>.csv``), with the models' own column names, as
tests/warehouse/report/test_against_original.py compares them with the original. Each frame holds
at least these columns:

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
                           budgets of time_scaling: marts.time_scaling_gains)
monotonicity_rate          agent_id, share_monotone, monotone_curves, curves
                           (marts.time_scaling_monotone)
========================== =====================================================================
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

FIGURES = (
    "leaderboard_best_budget",
    "leaderboard_all_cells",
    "leaderboard_largest_budget",
    "success_rates",
    "run_stability",
    "rank_std",
    "rank_heatmap",
    "time_scaling",
    "marginal_gains",
    "monotonicity_rate",
)


def from_report(figures: Path) -> dict[str, pd.DataFrame]:
    """Each figure's numbers from a report bundle's ``figures/`` folder, floats read back exactly
    (the report writes their shortest repr)."""
    return {
        name: pd.read_csv(figures / f"{name}.csv", float_precision="round_trip") for name in FIGURES
    }
