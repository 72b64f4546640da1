"""The terminal leaderboard: the dbt marts of one suite, printed as rich tables.

Nothing here computes a rule of the benchmark: every number is read from schema ``marts``
(dbt_project/), the same tables the dashboard shows. Every mart is keyed by suite (each suite's
benchmark is computed from the runs it counts alone), so a suite is a ``where suite_id = …``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from runner.errors import TmlbenchError
from runner.terminal import printable
from warehouse.db import connect, one_row  # light: connect() imports duckdb when it is called

if TYPE_CHECKING:
    import duckdb

RANKING = """
    select
        best.rank,
        best.agent_id,
        best.score as best_budget,
        all_cells.score as all_cells,
        largest.score as largest_budget,
        ranks.mean_rank,
        ranks.rank_std,
        rates.success_rate,
        rates.n_provider_error,
        stability.rel_iqr
    from marts.leaderboard as best
    left join marts.leaderboard as all_cells
        on all_cells.suite_id = best.suite_id and all_cells.agent_id = best.agent_id
        and all_cells.variant = 'all_cells'
    left join marts.leaderboard as largest
        on largest.suite_id = best.suite_id and largest.agent_id = best.agent_id
        and largest.variant = 'largest_budget'
    left join marts.rank_stability as ranks
        on ranks.suite_id = best.suite_id and ranks.agent_id = best.agent_id
    left join marts.success_rates as rates
        on rates.suite_id = best.suite_id and rates.agent_id = best.agent_id
    left join marts.run_stability as stability
        on stability.suite_id = best.suite_id and stability.agent_id = best.agent_id
    where best.suite_id = $suite and best.variant = 'best_budget'
    order by best.rank, best.agent_id
"""

SETTING_MEDIANS = """
    select task_id, agent_id, budget_seconds, median_score
    from marts.setting_scores
    where suite_id = $suite
    order by task_id, agent_id, budget_seconds
"""

# Whether the suite is final or provisional (k of n settings complete), and its N: the
# successes a setting counts (the suite file's `attempts`; the paper's 5 for an import).
STATUS = """
    select counted_successes, settings_complete, settings_expected, agents_ranked,
        agents_expected, provisional
    from marts.suite_status
    where suite_id = $suite
"""

# Per agent the suite does not rank: how many of its settings lack successes, and the first few.
NOT_RANKED = """
    select
        agent_id,
        count(*) filter (where missing > 0) as incomplete,
        count(*) as settings,
        list(
            task_id || ' · ' || budget_seconds || ' s: ' || successes || ' of '
                || counted_successes
            order by task_id, budget_seconds
        ) filter (where missing > 0)[1:3] as first_incomplete,
        count(*) filter (where missing > 0 and provider_error_ceiling_reached)
            as stopped_by_provider,
        count(*) filter (where missing > 0 and harness_error_ceiling_reached)
            as stopped_by_harness
    from marts.coverage
    where suite_id = $suite and not agent_is_covered
    group by agent_id
    order by agent_id
"""

# Suites with a file have a title in raw.suites; an import's suite (its source) has none.
SUITES = """
    select suite_id, max(title) as title, count(setting) > 0 as has_attempts
    from (
        select suite_id, title, null as setting from raw.suites
        union all
        select suite_id, null, agent_id from marts.coverage where attempts > 0
    )
    group by suite_id
    order by suite_id
"""

# The marts this command reads; a warehouse without them has not been built by dbt yet.
MARTS_READ = (
    "leaderboard",
    "rank_stability",
    "success_rates",
    "run_stability",
    "setting_scores",
    "coverage",
    "suite_status",
)


@dataclass(frozen=True)
class SuiteBoard:
    """What the terminal shows for one suite, as read from the marts."""

    suite_id: str
    title: str
    ranking: list[tuple[Any, ...]]  # rows of RANKING
    medians: list[tuple[Any, ...]]  # rows of SETTING_MEDIANS
    counted_successes: int
    settings_complete: int
    settings_expected: int
    agents_ranked: int
    agents_expected: int
    provisional: bool
    not_ranked: list[tuple[Any, ...]]  # rows of NOT_RANKED


def read_board(warehouse: Path, suite_id: str) -> SuiteBoard:
    """Read one suite's leaderboard from the marts of ``warehouse`` (opened read-only)."""
    if not warehouse.is_file():
        raise TmlbenchError(
            f"no warehouse at {warehouse}: build it and its marts with `tmlbench warehouse build` "
            "(or `make run`)"
        )
    con = connect(warehouse, read_only=True)
    try:
        _require_marts(con, warehouse)
        title = _suite_title(con, warehouse, suite_id)
        n, complete, expected, ranked, agents, provisional = one_row(
            con, _with_suite(STATUS, suite_id)
        )
        return SuiteBoard(
            suite_id=suite_id,
            title=title,
            ranking=con.execute(_with_suite(RANKING, suite_id)).fetchall(),
            medians=con.execute(_with_suite(SETTING_MEDIANS, suite_id)).fetchall(),
            counted_successes=n,
            settings_complete=complete,
            settings_expected=expected,
            agents_ranked=ranked,
            agents_expected=agents,
            provisional=provisional,
            not_ranked=con.execute(_with_suite(NOT_RANKED, suite_id)).fetchall(),
        )
    finally:
        con.close()


def _with_suite(query: str, suite_id: str) -> str:
    """``query`` with ``$suite`` as a SQL string literal. Not a bound parameter: DuckDB's Python
    client imports pandas (about a second) to inspect any parameter it is given."""
    return query.replace("$suite", "'" + suite_id.replace("'", "''") + "'")


def _require_marts(con: duckdb.DuckDBPyConnection, warehouse: Path) -> None:
    present = {
        name
        for (name,) in con.execute(
            "select table_name from information_schema.tables where table_schema = 'marts'"
        ).fetchall()
    }
    missing = [name for name in MARTS_READ if name not in present]
    if missing:
        raise TmlbenchError(
            f"the warehouse {warehouse} has no marts.{', marts.'.join(missing)}: build them with "
            "`tmlbench warehouse build` (or `make run`)"
        )


def _suite_title(con: duckdb.DuckDBPyConnection, warehouse: Path, suite_id: str) -> str:
    suites = {sid: (title, any_runs) for sid, title, any_runs in con.execute(SUITES).fetchall()}
    if suite_id not in suites:
        known = ", ".join(suites) or "none"
        raise TmlbenchError(
            f"unknown suite {suite_id!r} in the warehouse {warehouse} (it has: {known}); "
            "load the suite files with `tmlbench warehouse build`"
        )
    title, any_runs = suites[suite_id]
    if not any_runs:
        raise TmlbenchError(
            f"the warehouse {warehouse} has no attempt of suite {suite_id!r}; run: "
            f"tmlbench bench --suite {suite_id}, then tmlbench warehouse build"
        )
    return title or f"{suite_id} (imported)"


def _fmt(value: float | None, digits: int = 3) -> str:
    return "-" if value is None or math.isnan(value) else f"{value:.{digits}f}"


def print_board(console: Console, board: SuiteBoard) -> None:
    console.print(_ranking_table(board))
    console.print(_status_line(board))
    console.print(
        "score: per task the best budget's normalized points (best agent 1, worst 0), mean over tasks."
    )
    console.print(
        "success rate: successes / the agent's own attempts; provider errors (attempts ended by "
        "the provider's faults) and harness errors are not the agent's: counted apart, re-run."
    )
    console.print(_medians_table(board))
    if board.not_ranked:
        console.print("[yellow]not ranked (fewer successes than needed in some setting):[/]")
        for agent_id, incomplete, settings, first, by_provider, by_harness in board.not_ranked:
            more = ", …" if incomplete > len(first) else ""
            stopped = "".join(
                f" · {count} stopped at the {kind}-error ceiling"
                for kind, count in (("provider", by_provider), ("harness", by_harness))
                if count
            )
            line = (
                f"  {agent_id}: {incomplete} of {settings} settings lack successes "
                f"({', '.join(first)}{more}){stopped}"
            )
            console.print(Text(printable(line)), highlight=False)


def _status_line(board: SuiteBoard) -> str:
    """Final or provisional, in one line: k of n settings, and whom the ranking is among."""
    settings = f"{board.settings_complete} of {board.settings_expected} settings complete"
    if not board.provisional:
        return f"final: {settings} ({board.counted_successes} successes each)"
    return (
        f"[yellow]provisional: {settings} ({board.counted_successes} successes each); ranked "
        f"among the {board.agents_ranked} of {board.agents_expected} agents complete in all "
        "their settings: ranks and scores may still change[/]"
    )


def _ranking_table(board: SuiteBoard) -> Table:
    provisional = " · provisional" if board.provisional else ""
    table = Table(
        title=f"tmlbench leaderboard: {board.title} ({board.suite_id}){provisional}",
        title_justify="left",
    )
    for column in (
        "rank",
        "agent",
        "score",
        "all cells",
        "largest budget",
        "mean rank ± sd",
        "success rate",
        "provider errors",
        "run-to-run IQR/|median|",
    ):
        table.add_column(column, justify="left" if column == "agent" else "right")
    for row in board.ranking:
        rank, agent, best, all_cells, largest, mean_rank, rank_std, rate, provider, rel_iqr = row
        table.add_row(
            str(rank),
            Text(printable(agent)),  # ids an import brought: text, never markup or escapes
            _fmt(best),
            _fmt(all_cells),
            _fmt(largest),
            f"{_fmt(mean_rank, 2)} ± {_fmt(rank_std, 2)}",
            "-" if rate is None else f"{rate:.0%}",
            str(provider),
            _fmt(rel_iqr, 4),
        )
    return table


def _medians_table(board: SuiteBoard) -> Table:
    """One row per (task, agent), one column per budget: the setting's median score."""
    counted = board.counted_successes
    table = Table(title=f"setting medians (first {counted} successes)", title_justify="left")
    budgets = sorted({budget for _, _, budget, _ in board.medians})
    table.add_column("task")
    table.add_column("agent")
    for budget in budgets:
        table.add_column(f"{budget} s", justify="right")
    grid: dict[tuple[str, str], dict[int, float | None]] = {}
    for task_id, agent_id, budget, median in board.medians:
        grid.setdefault((task_id, agent_id), {})[budget] = median
    for (task_id, agent_id), by_budget in grid.items():
        table.add_row(
            Text(printable(task_id)),
            Text(printable(agent_id)),
            *(_fmt(by_budget.get(b), 4) for b in budgets),
        )
    return table
