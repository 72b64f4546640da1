"""Terminal rendering of a leaderboard (rich tables)."""

from __future__ import annotations

import math

from rich.console import Console
from rich.table import Table

from runner.leaderboard import Leaderboard
from runner.specs import SuiteSpec


def _fmt(value: float | None, digits: int = 3) -> str:
    return (
        "-"
        if value is None or (isinstance(value, float) and math.isnan(value))
        else f"{value:.{digits}f}"
    )


def render_leaderboard(console: Console, suite: SuiteSpec, board: Leaderboard) -> None:
    table = Table(title=f"tmlbench leaderboard: {suite.title} ({suite.id})", title_justify="left")
    for column in (
        "rank",
        "agent",
        "score",
        "all cells",
        "largest budget",
        "mean rank ± sd",
        "success rate",
        "run-to-run IQR/|median|",
    ):
        table.add_column(column, justify="left" if column == "agent" else "right")
    for row in board.ranking.itertuples():
        table.add_row(
            str(row.rank),
            row.agent_id,
            _fmt(row.best_budget),
            _fmt(row.all_cells),
            _fmt(row.largest_budget),
            f"{_fmt(row.mean_rank, 2)} ± {_fmt(row.rank_std, 2)}",
            f"{row.success_rate:.0%}",
            _fmt(row.rel_iqr, 4),
        )
    console.print(table)
    console.print(
        "score: per task the best budget's normalized points (best agent 1, worst 0), mean over tasks."
    )

    medians = Table(title="setting medians (first 5 successes)", title_justify="left")
    budgets = sorted(board.settings["budget_seconds"].unique())
    medians.add_column("task")
    medians.add_column("agent")
    for budget in budgets:
        medians.add_column(f"{budget} s", justify="right")
    grid = board.settings.pivot_table(
        index=["task_id", "agent_id"],
        columns="budget_seconds",
        values="median_score",
        aggfunc="first",
    )
    for (task_id, agent_id), row in grid.iterrows():
        medians.add_row(task_id, agent_id, *(_fmt(row.get(b), 4) for b in budgets))
    console.print(medians)

    if not board.coverage.empty:
        console.print("[yellow]not ranked (fewer successes than needed):[/]")
        for row in board.coverage.itertuples():
            console.print(
                f"  {row.agent_id} · {row.task_id} · {row.budget_seconds} s: "
                f"{row.successes} successes, {row.missing} missing"
            )
