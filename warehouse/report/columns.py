"""Every column the dashboard and the report show: its human label, its unit (number format), its
help and width, in one table (``COLUMNS``), and the Vega-Lite tooltips built from it (no Streamlit
here: the report renders charts without it; app/columns.py turns the table into Streamlit's
``column_config``).

Pages and the report never rename or format a column themselves: they choose which columns a
table shows, in which order (key columns first). A column's format follows its unit, not its
page: a score keeps four significant digits wherever it is shown, a budget is whole seconds, a
cost is dollars, a rate a percentage. CSV files keep the models' own column names (what SQL users
and scripts know).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

import pandas as pd

# Number formats by unit (Streamlit's NumberColumn: printf-style or a named preset).
FORMATS = {
    "count": "localized",  # 12,345
    "rank": "%d",
    "score": "%.4g",  # a metric's raw value: 0.8912, 1235, 1.235e+05
    "points": "%.3f",  # normalized points, 0..1
    "ratio": "%.3f",
    "mean_rank": "%.2f",
    "budget": "%d s",
    "seconds": "%.1f s",
    "usd": "$%.4f",  # one attempt costs fractions of a cent to a few dollars
    "per_dollar": "%.2f",
    "percent": "percent",
    "bytes": "bytes",
}
KINDS = (*FORMATS, "text", "datetime", "check", "bar")  # bar: a 0..1 value drawn as a bar


@dataclass(frozen=True)
class Column:
    label: str
    kind: str = "text"
    help: str | None = None
    width: int | Literal["small", "medium", "large"] | None = None  # pixels, or a named size


COVERAGE_HELP = (
    "k/n: k of the agent's n settings have enough successes to count (✗: some lack them). "
    "Whether the whole suite is complete is said above the table (provisional: k of n settings)."
)
CONTAMINATION_HELP = (
    "⚠ the tasks whose start date is on or before the model's knowledge cutoff (the agent may "
    "have seen the competition); cutoff unknown when a date is missing."
)
DUPLICATES_HELP = (
    "⚠ settings where two of the counted attempts submitted the same answer (cached or "
    "replayed: not independent); ↔ attempts whose answer another agent also submitted; "
    "unknown when some counted attempt has no submission fingerprint (records before schema 5)."
)
SUCCESS_RATE_HELP = (
    "Successes / the agent's own attempts (harness and provider faults are not the agent's: "
    "excluded, shown on the Reliability page)."
)
UNKNOWN_COST = "Empty when no attempt recorded a cost (unknown, never $0)."
PASS_K_HELP = (
    "The chance that k attempts, drawn from the n made, all succeed: C(c, k) / C(n, k) for c "
    "successes (τ-bench's pass^k), over the attempts the success rate counts."
)
WORST_POINTS_HELP = (
    "The expected lowest normalized points among k attempts drawn from those made (a failed "
    "attempt scores 0)."
)

COLUMNS: dict[str, Column] = {
    # who, what, which setting
    "agent_id": Column("Agent", width=140),
    "task_id": Column("Task", width=260),
    "budget_seconds": Column("Budget", "budget", width=70),
    "run_id": Column("Run id", width=165),
    "created_at": Column("Created (UTC)", "datetime", width=125),
    "status": Column("Status", width=130),
    "attempt_index": Column("Attempt", "count", width=65),
    "instruction_profile": Column("Instructions"),
    "agent_title": Column("Title"),
    "harness": Column("Harness"),
    "provider": Column("Provider"),
    "model_id": Column("Model"),
    # scores and ranks
    "rank": Column("Rank", "rank", width=50),
    "score": Column("Score", "score", width=80),
    "score_hib": Column("Score (higher is better)", "score"),
    "score_interval": Column("95% interval", help="Bootstrap 95% interval of the primary score."),
    "score_low": Column("95% low", "points"),
    "score_high": Column("95% high", "points"),
    "p_rank_1": Column(
        "P(rank 1)",
        "percent",
        help="Share of the bootstrap replicates that rank it first, among the ranked agents "
        "(in a provisional suite, only those complete so far: the others may still place "
        "anywhere).",
        width=80,
    ),
    "points": Column("Points", "points", help="Normalized points of the setting (0 to 1)."),
    "best_points": Column("Best points", "points"),
    "mean_points": Column("Mean points", "points"),
    "mean_rank": Column("Mean rank", "mean_rank"),
    "rank_std": Column("Rank sd", "mean_rank", help="Sample standard deviation over tasks."),
    "mean_rank_sd": Column(
        "Mean rank ± sd", help="Mean rank over the tasks ± its sample standard deviation."
    ),
    "n_tasks": Column("Tasks", "count"),
    "n_cells": Column("Cells", "count", help="Task × budget cells the score is over."),
    "median_score": Column("Median", "score", help="Median of the counted successes."),
    "q1": Column("Q1", "score"),
    "q3": Column("Q3", "score"),
    "iqr": Column("IQR", "score"),
    "success_index": Column("Success #", "count", help="Its place among the setting's successes."),
    "local_validation_score": Column(
        "Own validation", "score", help="The validation score the agent printed (its claim)."
    ),
    "validation_code": Column("Validation", width=110),
    "wall_seconds": Column("Wall time", "seconds", width=80),
    "peak_memory_bytes": Column("Peak memory", "bytes"),
    # badges (labels built by dbt)
    "coverage": Column("Coverage", help=COVERAGE_HELP, width=80),
    "contamination": Column("Contamination", help=CONTAMINATION_HELP),
    "duplicates": Column("Duplicates", help=DUPLICATES_HELP),
    "suite_coverage": Column("Suite settings complete"),
    "badge": Column("Ranked?", width="large"),
    "is_ranked": Column("Ranked", "check"),
    # counts and rates
    "attempts": Column("Attempts", "count"),
    "agent_attempts": Column(
        "Agent's attempts", "count", help="Attempts less harness and provider errors."
    ),
    "successes": Column("Successes", "count"),
    "success_rate": Column("Success rate", "percent", help=SUCCESS_RATE_HELP, width=90),
    "agent_failures": Column("Failures", "count", help="The agent's own attempts that failed."),
    "harness_errors": Column(
        "Harness errors", "count", help="The harness's faults (not the agent's), of the ceiling."
    ),
    "provider_errors": Column(
        "Provider errors", "count", help="Attempts the model provider ended (not the agent's)."
    ),
    "provider_faults": Column(
        "Provider faults", "count", help="Every fault the gateway saw, recovered ones included."
    ),
    "interrupted_calls": Column("Interrupted calls", "count"),
    "rate_limited": Column(
        "Rate-limited", "count", help="Calls refused for the agent's own request rate."
    ),
    "run_rel_iqr": Column(
        "Run-to-run rel. IQR",
        "ratio",
        help="Median over its settings of IQR ÷ |median| of the counted scores (lower = steadier).",
    ),
    "run_settings": Column("Settings with a spread", "count"),
    # reliability under repetition (marts.setting_pass_k, marts.agent_pass_k)
    "k": Column("Attempts k", "count", help="Attempts drawn from those made (1 to the suite's N)."),
    "pass_k": Column("pass^k", "ratio", help=PASS_K_HELP),
    "mean_pass_k": Column("Mean pass^k", "ratio", help=PASS_K_HELP + " Mean over its settings."),
    "settings_with_pass_k": Column(
        "Settings with k attempts", "count", help="Settings the mean is over (n ≥ k)."
    ),
    "expected_worst_points": Column("Expected worst of k", "points", help=WORST_POINTS_HELP),
    "mean_expected_worst_points": Column(
        "Mean expected worst of k", "points", help=WORST_POINTS_HELP + " Mean over its settings."
    ),
    "settings_with_worst_points": Column("Settings with worst points", "count"),
    "n_counted": Column("Counted", "count", help="Successes that count (the first N)."),
    "missing": Column("Missing successes", "count"),
    "settings": Column("Settings", "count"),
    "incomplete_settings": Column("Incomplete settings", "count"),
    "missing_successes": Column("Missing successes", "count"),
    "stopped_at_harness_error_ceiling": Column("Stopped: harness errors", "count"),
    "stopped_at_provider_error_ceiling": Column("Stopped: provider errors", "count"),
    # duplicate submissions
    "duplicated_counted": Column(
        "Among counted", "check", help="The median is not over independent attempts."
    ),
    "n_distinct_counted_submissions": Column("Distinct counted answers", "count"),
    "n_fingerprinted": Column("Fingerprinted", "count"),
    "n_distinct_submissions": Column("Distinct answers", "count"),
    "n_shared_with_other_agents": Column("Shared with other agents", "count"),
    "relation": Column("Relation"),
    "is_counted": Column("Counted", "check"),
    # time scaling
    "monotone": Column(
        "Monotone curves",
        help="Curves whose own median score never gets worse as the budget grows / curves.",
    ),
    "share_monotone": Column("Share monotone", "bar"),
    "monotone_curves": Column("Monotone", "count"),
    "curves": Column("Curves", "count"),
    "is_monotone": Column("Monotone", "check"),
    "attributed_to": Column("Whose", help="The agent's, the harness's or the provider's."),
    # cost
    "cost_usd": Column("Cost", "usd", width=80),
    "cost_total_usd": Column("Total cost", "usd", help=UNKNOWN_COST),
    "cost_mean_usd": Column("Cost / attempt", "usd", help=UNKNOWN_COST),
    "counted_cost_mean_usd": Column("Cost / counted attempt", "usd", help=UNKNOWN_COST),
    "counted_cost_total_usd": Column("Counted cost", "usd", help=UNKNOWN_COST),
    "cost_per_success_usd": Column("Cost / success", "usd", help=UNKNOWN_COST),
    "points_per_dollar": Column(
        "Points / $", "per_dollar", help="Score ÷ the mean cost of a counted attempt."
    ),
    "attempts_with_cost": Column("Attempts with cost", "count"),
    "counted_with_cost": Column("Counted with cost", "count"),
    "attempts_with_tokens": Column("Attempts with tokens", "count"),
    "tokens_in": Column("Tokens in", "count"),
    "tokens_out": Column("Tokens out", "count"),
    "tokens_in_total": Column("Tokens in", "count"),
    "tokens_out_total": Column("Tokens out", "count"),
    "tokens_in_mean": Column("Tokens in / attempt", "count"),
    "tokens_out_mean": Column("Tokens out / attempt", "count"),
    # the run explorer's record and source fields
    "field": Column("Field", width="medium"),
    "value": Column("Value", width="large"),
}


def label(name: str) -> str:
    """A column's human label (its name, spaced, when the table has none: tests forbid that)."""
    known = COLUMNS.get(name)
    return known.label if known else name.replace("_", " ")


def tooltips(frame: pd.DataFrame, names: Iterable[str]) -> list[dict[str, str]]:
    """Vega-Lite tooltip fields for ``names`` with their human labels (and formats for numbers),
    for Altair's ``tooltip=`` and the plain Vega-Lite specs."""
    fields = []
    for name in names:
        numeric = pd.api.types.is_numeric_dtype(
            frame[name].dtype
        ) and not pd.api.types.is_bool_dtype(frame[name].dtype)
        field = {
            "field": name,
            "type": "quantitative" if numeric else "nominal",
            "title": label(name),
        }
        kind = COLUMNS[name].kind if name in COLUMNS else "text"
        if numeric and kind in TOOLTIP_FORMATS:
            field["format"] = TOOLTIP_FORMATS[kind]
        fields.append(field)
    return fields


# d3-format strings (Vega-Lite) of the same units as FORMATS
TOOLTIP_FORMATS = {
    "score": ".4~g",
    "points": ".3f",
    "ratio": ".3f",
    "mean_rank": ".2f",
    "percent": ".1%",
    "usd": "$.4f",
    "per_dollar": ".2f",
    "count": ",d",
    "seconds": ".1f",
}
