"""The report's figures: for each, the rows it plots (one select of a mart or display model, in a
fixed order) and the shared chart that draws them (``warehouse/report/charts.py``).

A figure's CSV companion is exactly the rows its chart is given, with the models' own column
names: nothing is computed here (the benchmark's rules live in dbt), only selected, filtered to
what can be drawn (e.g. agents with a run-to-run spread) and, for tokens, reshaped long.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import duckdb
import pandas as pd

from warehouse.report import charts

Frames = dict[str, pd.DataFrame]  # figure name → the rows it plots (every figure of the report)


@dataclass(frozen=True)
class Figure:
    name: str  # file stem: <name>.png, <name>.svg, <name>.csv
    title: str
    caption: str
    sql: str  # one select with a ? for the suite id; its order by fixes the CSV's row order
    draw: Callable[[pd.DataFrame, Frames], charts.Drawing]
    reshape: Callable[[pd.DataFrame], pd.DataFrame] | None = None  # long form for the chart


def _leaderboard(variant: str) -> str:
    """A variant's ranked agents: the primary score (and its interval for the primary variant)
    and the paper's min-max score and rank (drawn as a tick, for replication)."""
    interval = ", d.score_low, d.score_high" if variant == "best_budget" else ""
    return (
        f"select d.rank, d.agent_id, d.score{interval}, d.n_cells, l.score_paper, l.rank_paper "
        "from display.leaderboard_display d join marts.leaderboard l "
        "using (suite_id, agent_id, variant) "
        f"where suite_id = ? and variant = '{variant}' order by d.rank, d.agent_id"
    )


FIGURES: tuple[Figure, ...] = (
    Figure(
        "leaderboard_best_budget",
        "Leaderboard (primary): best budget per task",
        "Per task the agent's best normalized points over budgets, then the mean over tasks; "
        "the black rule is the bootstrap 95% interval (score_low to score_high); the orange tick "
        "is the paper's min-max score (score_paper).",
        _leaderboard("best_budget"),
        lambda f, _: charts.leaderboard_scores(f, with_interval=True),
    ),
    Figure(
        "leaderboard_all_cells",
        "Leaderboard: mean over all task × budget cells",
        "The mean of the normalized points over every task × budget cell (no interval: the "
        "bootstrap is of the primary score only); the orange tick is the paper's min-max score.",
        _leaderboard("all_cells"),
        lambda f, _: charts.leaderboard_scores(f, with_interval=False),
    ),
    Figure(
        "leaderboard_largest_budget",
        "Leaderboard: largest budget only",
        "The mean over tasks of the normalized points at the suite's largest budget (no "
        "interval: the bootstrap is of the primary score only); the orange tick is the paper's "
        "min-max score.",
        _leaderboard("largest_budget"),
        lambda f, _: charts.leaderboard_scores(f, with_interval=False),
    ),
    Figure(
        "success_rates",
        "Success rate",
        "Successes ÷ the agent's own attempts (harness and provider errors excluded; counted "
        "apart).",
        "select agent_id, success_rate, successes, agent_attempts, attempts, harness_errors, "
        "provider_errors from display.reliability_display where suite_id = ? "
        "order by success_rate desc, agent_id",
        lambda f, _: charts.success_rates(f),
    ),
    Figure(
        "run_stability",
        "Run-to-run stability",
        "Per agent, the median over its settings of IQR ÷ |median| of the counted scores "
        "(lower = steadier).",
        "select agent_id, run_rel_iqr, run_settings from display.reliability_display "
        "where suite_id = ? and run_rel_iqr is not null order by run_rel_iqr, agent_id",
        lambda f, _: charts.run_stability(f),
    ),
    Figure(
        "performance_vs_stability",
        "Performance vs. stability",
        "Each ranked agent's primary score against its run-to-run relative IQR: top left is best.",
        "select agent_id, rank, score, run_rel_iqr, run_settings from display.reliability_display "
        "where suite_id = ? and rank is not null and run_rel_iqr is not null "
        "order by rank, agent_id",
        lambda f, _: charts.performance_vs_stability(f),
    ),
    Figure(
        "pass_k",
        "Reliability under repetition (pass^k)",
        "The chance that k attempts of a setting all succeed, C(c, k) / C(n, k) for c successes "
        "in the n attempts the success rate counts (τ-bench's pass^k), averaged over the agent's "
        "settings with at least k attempts.",
        "select agent_id, k, mean_pass_k, settings_with_pass_k from marts.agent_pass_k "
        "where suite_id = ? and mean_pass_k is not null order by agent_id, k",
        lambda f, _: charts.pass_k(f),
    ),
    Figure(
        "expected_worst_points",
        "Expected worst points of k attempts",
        "The expected lowest normalized points among k attempts drawn from those made (a failed "
        "attempt scores 0), averaged over the agent's settings: what repeating costs in score.",
        "select agent_id, k, mean_expected_worst_points, settings_with_worst_points "
        "from marts.agent_pass_k where suite_id = ? and mean_expected_worst_points is not null "
        "order by agent_id, k",
        lambda f, _: charts.pass_k(f, "mean_expected_worst_points"),
    ),
    Figure(
        "rank_std",
        "Rank stability",
        "Mean task rank (1 = best) ± the sample standard deviation of the ranks over tasks.",
        "select agent_id, mean_rank, rank_std, n_tasks from marts.rank_stability "
        "where suite_id = ? order by mean_rank, agent_id",
        lambda f, frames: charts.rank_std(f, frames["rank_heatmap"]),
    ),
    Figure(
        "rank_heatmap",
        "Rank per task",
        "Each ranked agent's rank on each task (best-budget normalized points, min ranking).",
        "select agent_id, task_id, best_points, rank from marts.task_ranks "
        "where suite_id = ? order by task_id, rank, agent_id",
        lambda f, frames: charts.rank_heatmap(f, frames["rank_std"]["agent_id"].tolist()),
    ),
    Figure(
        "time_scaling",
        "Time scaling",
        "Mean normalized points over tasks at each time budget (log scale).",
        "select agent_id, budget_seconds, mean_points, n_tasks from marts.time_scaling "
        "where suite_id = ? order by agent_id, budget_seconds",
        lambda f, _: charts.time_scaling(f),
    ),
    Figure(
        "marginal_gains",
        "Marginal gains per budget step",
        "What the next larger budget adds to the mean normalized points (negative: a loss).",
        "select agent_id, from_budget_seconds, to_budget_seconds, from_mean_points, "
        "to_mean_points, gain from marts.time_scaling_gains where suite_id = ? "
        "order by agent_id, to_budget_seconds",
        lambda f, _: charts.marginal_gains(f),
    ),
    Figure(
        "monotonicity_rate",
        "Monotonicity rate",
        "Share of an agent's curves (one per task, over the budgets) on which its own median "
        "score never gets worse as the budget grows (equal is not worse).",
        "select agent_id, share_monotone, monotone_curves, curves from marts.time_scaling_monotone "
        "where suite_id = ? order by share_monotone desc, agent_id",
        lambda f, _: charts.monotonicity_rate(f),
    ),
    Figure(
        "points_per_dollar",
        "Score per dollar",
        "Primary score ÷ the mean cost of a counted attempt; agents whose cost is unknown "
        "are left out.",
        "select agent_id, score, counted_cost_mean_usd, points_per_dollar, cost_total_usd, "
        "attempts_with_cost from marts.agent_costs "
        "where suite_id = ? and points_per_dollar is not null order by points_per_dollar desc, "
        "agent_id",
        lambda f, _: charts.points_per_dollar(f),
    ),
    Figure(
        "tokens",
        "Tokens per agent",
        "Tokens in and out over the attempts that recorded them; agents without a record are "
        "left out.",
        "select agent_id, tokens_in_total, tokens_out_total from marts.agent_costs "
        "where suite_id = ? and (tokens_in_total is not null or tokens_out_total is not null) "
        "order by agent_id",
        lambda f, _: charts.tokens(f),
        reshape=charts.tokens_long,
    ),
)


def read_frames(con: duckdb.DuckDBPyConnection, suite_id: str) -> Frames:
    """Every figure's rows for one suite, as its chart is given them."""
    frames: Frames = {}
    for figure in FIGURES:
        frame = con.execute(figure.sql, [suite_id]).df()
        frames[figure.name] = figure.reshape(frame) if figure.reshape else frame
    return frames
