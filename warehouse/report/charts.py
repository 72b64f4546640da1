"""Every chart of the dashboard and the report, defined once: a DataFrame in, an Altair chart out.

The dashboard's pages draw these with ``st.altair_chart``; the report renders the same specs to
SVG and PNG without a browser (``warehouse/report/render.py``). No Streamlit and no query here:
the caller reads the rows (a mart or display model, as they are) and passes them in; a chart
only chooses marks, scales and labels. Column names are the models' own; labels come from the
shared column table (``warehouse/report/columns.py``).
"""

from __future__ import annotations

from typing import Any, TypeAlias

import altair as alt
import pandas as pd

from warehouse.report.columns import label, tooltips

# An Altair chart (Chart or LayerChart): Altair's builder methods are untyped (Any to mypy), so
# the precise class would be a claim mypy cannot check.
Drawing: TypeAlias = Any
ROW = alt.Step(24)  # pixels per agent in the bar charts
GRID_ROW = alt.Step(26)  # pixels per agent or task row of the rank charts and grids
# a 0..1 axis padded both ends: an agent at 0 or 1 is drawn whole, off the axis
POINTS_SCALE = alt.Scale(domain=[-0.05, 1.05], nice=False)
POINTS_AXIS = alt.Axis(values=[0, 0.2, 0.4, 0.6, 0.8, 1.0])


def leaderboard_scores(board: pd.DataFrame, with_interval: bool) -> Drawing:
    """One variant's scores as bars, best first, with the primary score's 95% interval as a rule
    (``with_interval``: score_low and score_high, the bootstrap of the primary variant only), and
    the paper's min-max score as a tick when the rows have it (``score_paper``: the report's)."""
    y = alt.Y("agent_id:N", sort=alt.EncodingSortField("score", order="descending"), title=None)
    hover = [
        c for c in ("agent_id", "score", "coverage", "contamination", "duplicates") if c in board
    ]
    bars = (
        alt.Chart(board)
        .mark_bar()
        .encode(
            x=alt.X("score:Q", scale=alt.Scale(domain=[0, 1]), title="score (normalized points)"),
            y=y,
            tooltip=tooltips(board, hover),
        )
    )
    layers: list[alt.Chart] = [bars]
    if "score_paper" in board:  # the report's rows: the paper's min-max score as an orange tick
        layers.append(
            alt.Chart(board)
            .mark_tick(color="#d95f02", thickness=2)
            .encode(
                x="score_paper:Q",
                y=y,
                tooltip=tooltips(board, ["agent_id", "score_paper", "rank_paper"]),
            )
        )
    if with_interval:
        layers.append(
            alt.Chart(board)
            .mark_rule(color="black")
            .encode(x="score_low:Q", x2="score_high:Q", y=y)
        )
    return alt.layer(*layers).properties(height=ROW)


def status_shares(counts: pd.DataFrame) -> Drawing:
    """Each agent's attempts by status, as shares of its attempts (``status_counts_display``)."""
    shown = counts[counts["attempts"] > 0]
    return (
        alt.Chart(shown)
        .mark_bar()
        .encode(
            x=alt.X("attempts:Q", stack="normalize", title="share of attempts"),
            y=alt.Y("agent_id:N", title=None),
            color=alt.Color("status:N", title=label("status")),
            tooltip=tooltips(shown, ["agent_id", "status", "attributed_to", "attempts"]),
        )
        .properties(height=ROW)
    )


def success_rates(rates: pd.DataFrame) -> Drawing:
    """Each agent's success rate (successes ÷ its own attempts), best first."""
    return (
        alt.Chart(rates)
        .mark_bar()
        .encode(
            x=alt.X(
                "success_rate:Q",
                scale=alt.Scale(domain=[0, 1]),
                axis=alt.Axis(format="%"),
                title=label("success_rate"),
            ),
            y=alt.Y("agent_id:N", sort="-x", title=None),
            tooltip=tooltips(rates, ["agent_id", "success_rate", "successes", "agent_attempts"]),
        )
        .properties(height=ROW)
    )


FAULTS = ("agent_failures", "provider_errors", "provider_faults")


def provider_faults(faults: pd.DataFrame) -> Drawing:
    """Per agent, its failures beside the provider's faults: rows of agent_id, count (the label
    of one of ``FAULTS``) and n."""
    return (
        alt.Chart(faults)
        .mark_bar()
        .encode(
            x=alt.X("n:Q", title="attempts or faults"),
            y=alt.Y("agent_id:N", title=None),
            yOffset="count:N",
            color=alt.Color(
                "count:N",
                title=None,
                scale=alt.Scale(
                    domain=[label(c) for c in FAULTS], range=["#9e9e9e", "#d62728", "#ff9896"]
                ),
            ),
            tooltip=[*tooltips(faults, ["agent_id"]), "count:N", "n:Q"],
        )
        .properties(height=alt.Step(36))
    )


def run_stability(stable: pd.DataFrame) -> Drawing:
    """Each agent's run-to-run relative IQR (lower = steadier), steadiest first."""
    return (
        alt.Chart(stable)
        .mark_bar()
        .encode(
            x=alt.X(
                "run_rel_iqr:Q", title="relative IQR", axis=alt.Axis(format=".3f", tickCount=6)
            ),
            y=alt.Y("agent_id:N", sort="x", title=None),
            tooltip=tooltips(stable, ["agent_id", "run_rel_iqr", "run_settings"]),
        )
        .properties(height=ROW)
    )


def performance_vs_stability(scatter: pd.DataFrame) -> Drawing:
    """Each ranked agent's primary score against its run-to-run relative IQR."""
    # both scales from 0 (a padded top): the spread's differences between agents are often a
    # few thousandths, which a domain fitted to the data would draw as a wall-to-wall gap
    widest = float(scatter["run_rel_iqr"].max()) if not scatter.empty else 0.0
    points = alt.Chart(scatter).encode(
        x=alt.X(
            "run_rel_iqr:Q",
            title="run-to-run relative IQR (lower = steadier)",
            scale=alt.Scale(domain=[0, max(widest * 1.25, 0.01)], zero=True),
            axis=alt.Axis(format=".3f", tickCount=6),
        ),
        y=alt.Y("score:Q", title="primary score", scale=POINTS_SCALE, axis=POINTS_AXIS),
        tooltip=tooltips(scatter, ["agent_id", "rank", "score", "run_rel_iqr", "run_settings"]),
    )
    return points.mark_circle(size=120) + points.mark_text(align="left", dx=8).encode(
        text="agent_id:N"
    )


def rank_std(stability: pd.DataFrame, ranks: pd.DataFrame) -> Drawing:
    """Each ranked agent's mean task rank ± the sample standard deviation over tasks, in the
    order of ``stability`` (the mart's: mean rank)."""
    band = stability.assign(
        low=stability["mean_rank"] - stability["rank_std"].fillna(0),
        high=stability["mean_rank"] + stability["rank_std"].fillna(0),
    )
    # ranks run from 1 to the number of ranked agents: the axis shows exactly those, with half a
    # rank of padding so that neither the best nor the last agent sits on the chart's edge (wider
    # only when a ± sd band reaches further)
    worst = int(max(ranks["rank"].max() if not ranks.empty else 1, len(stability)))
    scale = alt.Scale(
        domain=[min(0.5, float(band["low"].min())), max(worst + 0.5, float(band["high"].max()))],
        nice=False,
        zero=False,
    )
    axis = alt.Axis(values=list(range(1, worst + 1)), format="d")
    base = alt.Chart(band).encode(
        y=alt.Y("agent_id:N", sort=stability["agent_id"].tolist(), title=None)
    )
    return (
        base.mark_rule(strokeWidth=2).encode(
            x=alt.X("low:Q", title="task rank (1 = best)", scale=scale, axis=axis), x2="high:Q"
        )
        + base.mark_point(filled=True, size=80).encode(
            x=alt.X("mean_rank:Q", scale=scale),
            tooltip=tooltips(stability, ["agent_id", "mean_rank", "rank_std", "n_tasks"]),
        )
    ).properties(height=GRID_ROW)


def rank_heatmap(ranks: pd.DataFrame, agent_order: list[str]) -> Drawing:
    """Each ranked agent's rank on each task: tasks down the side (their ids are long: full
    labels, never cut), agents across in ``agent_order`` (their mean rank's)."""
    heat = alt.Chart(ranks).encode(
        y=alt.Y("task_id:N", title=None, axis=alt.Axis(labelLimit=0)),
        x=alt.X(
            "agent_id:N",
            sort=agent_order,
            title=None,
            axis=alt.Axis(labelAngle=0, labelLimit=0, orient="top"),
        ),
    )
    return (
        heat.mark_rect().encode(
            color=alt.Color(
                "rank:O", title=label("rank"), scale=alt.Scale(scheme="viridis", reverse=True)
            ),
            tooltip=tooltips(ranks, ["agent_id", "task_id", "rank", "best_points"]),
        )
        + heat.mark_text(color="white", size=14).encode(text="rank:Q")
    ).properties(height=GRID_ROW)


def time_scaling(scaling: pd.DataFrame) -> Drawing:
    """Each ranked agent's mean normalized points at each budget (log scale)."""
    # the axis spans the suite's budgets (a fifth of a log step of padding each side), ticked at
    # exactly those budgets: a "nice" log domain (100 to 10,000 for 240-1200 s) left it
    # two-thirds empty
    budgets = sorted(int(b) for b in scaling["budget_seconds"].unique()) or [1]
    return (
        alt.Chart(scaling)
        .mark_line(point=True)
        .encode(
            x=alt.X(
                "budget_seconds:Q",
                scale=alt.Scale(
                    type="log", domain=[budgets[0] / 1.25, budgets[-1] * 1.25], nice=False
                ),
                axis=alt.Axis(values=budgets, format="d"),
                title="budget (s)",
            ),
            y=alt.Y("mean_points:Q", scale=POINTS_SCALE, axis=POINTS_AXIS, title="mean points"),
            color=alt.Color("agent_id:N", title=label("agent_id")),
            tooltip=tooltips(scaling, ["agent_id", "budget_seconds", "mean_points", "n_tasks"]),
        )
    )


def marginal_gains(gains: pd.DataFrame) -> Drawing:
    """Each ranked agent's change of mean points per budget step (``time_scaling_gains``)."""
    steps = gains.assign(
        step=gains["from_budget_seconds"].astype(str) + "→" + gains["to_budget_seconds"].astype(str)
    )
    order = steps.sort_values("to_budget_seconds")["step"].drop_duplicates().tolist()
    return (
        alt.Chart(steps)
        .mark_bar()
        .encode(
            x=alt.X("gain:Q", title="change of mean points (larger budget − smaller)"),
            y=alt.Y("agent_id:N", title=None),
            yOffset=alt.YOffset("step:N", sort=order),
            color=alt.Color("step:N", sort=order, title="budget step (s)"),
            tooltip=[
                *tooltips(steps, ["agent_id", "from_budget_seconds", "to_budget_seconds"]),
                alt.Tooltip("gain:Q", format="+.3f"),
            ],
        )
        .properties(height=alt.Step(14))
    )


def monotonicity_rate(shares: pd.DataFrame) -> Drawing:
    """Each ranked agent's share of curves (one per task) that never get worse as the budget
    grows (``time_scaling_monotone``), best first."""
    return (
        alt.Chart(shares)
        .mark_bar()
        .encode(
            x=alt.X(
                "share_monotone:Q",
                scale=alt.Scale(domain=[0, 1]),
                axis=alt.Axis(format="%"),
                title=label("share_monotone"),
            ),
            y=alt.Y("agent_id:N", sort="-x", title=None),
            tooltip=tooltips(shares, ["agent_id", "share_monotone", "monotone_curves", "curves"]),
        )
        .properties(height=ROW)
    )


def monotone_grid(curves: pd.DataFrame) -> Drawing:
    """Each (agent, task) curve: monotone (✓) or not (✗) (``time_scaling_curves``)."""
    marked = curves.assign(mark=curves["is_monotone"].map({True: "✓", False: "✗"}))
    grid = alt.Chart(marked).encode(  # tasks down the side: full labels, never cut
        y=alt.Y("task_id:N", title=None, axis=alt.Axis(labelLimit=0)),
        x=alt.X("agent_id:N", title=None, axis=alt.Axis(labelAngle=0, labelLimit=0, orient="top")),
    )
    return (
        grid.mark_rect().encode(
            color=alt.Color(
                "is_monotone:N",
                title=label("is_monotone"),
                scale=alt.Scale(domain=[True, False], range=["#4c9a2a", "#d1495b"]),
            ),
            tooltip=tooltips(marked, ["agent_id", "task_id", "is_monotone", "points"]),
        )
        + grid.mark_text(color="white", size=16).encode(text="mark:N")
    ).properties(height=GRID_ROW)


def points_per_dollar(ratio: pd.DataFrame) -> Drawing:
    """Each agent's primary score per dollar of a counted attempt (known costs only)."""
    return (
        alt.Chart(ratio)
        .mark_bar()
        .encode(
            x=alt.X(
                "points_per_dollar:Q",
                title="primary score per dollar (counted attempt)",
                axis=alt.Axis(tickCount=8),
            ),
            y=alt.Y("agent_id:N", sort="-x", title=None),
            tooltip=tooltips(
                ratio, ["agent_id", "score", "counted_cost_mean_usd", "points_per_dollar"]
            ),
        )
    )


def tokens(long: pd.DataFrame) -> Drawing:
    """Each agent's tokens in and out over its attempts with a record: rows of agent_id,
    direction ("in" / "out") and tokens."""
    return (
        alt.Chart(long)
        .mark_bar()
        .encode(
            x=alt.X("tokens:Q", title="tokens (all attempts with a record)"),
            y=alt.Y("agent_id:N", title=None),
            color=alt.Color("direction:N", title="tokens"),
            tooltip=[
                *tooltips(long, ["agent_id"]),
                "direction:N",
                alt.Tooltip("tokens:Q", format=",d"),
            ],
        )
    )


def tokens_long(agents: pd.DataFrame) -> pd.DataFrame:
    """``agent_costs``' token totals as the rows ``tokens`` plots (agent_id, direction, tokens),
    agents without a token record left out (a reshape, no arithmetic)."""
    known = agents.dropna(subset=["tokens_in_total", "tokens_out_total"], how="all")
    long = known.melt(
        id_vars="agent_id",
        value_vars=["tokens_in_total", "tokens_out_total"],
        var_name="direction",
        value_name="tokens",
    ).dropna(subset=["tokens"])
    long["direction"] = long["direction"].map({"tokens_in_total": "in", "tokens_out_total": "out"})
    return long.reset_index(drop=True)


def setting_medians(one: pd.DataFrame) -> Drawing:
    """One task's median score per agent and budget, with a bar from Q1 to Q3 (raw metric)."""
    base = alt.Chart(one).encode(
        x=alt.X("budget_seconds:O", title="budget (s)", axis=alt.Axis(labelAngle=0)),
        xOffset="agent_id:N",
        color=alt.Color("agent_id:N", title=label("agent_id")),
        tooltip=tooltips(
            one, ["agent_id", "budget_seconds", "median_score", "q1", "q3", "n_counted"]
        ),
    )
    return base.mark_rule(strokeWidth=3).encode(
        y=alt.Y("q1:Q", title="median score", scale=alt.Scale(zero=False)), y2="q3:Q"
    ) + base.mark_point(filled=True, size=80).encode(y="median_score:Q")


def counted_attempts(attempts: pd.DataFrame) -> Drawing:
    """One task × budget's counted attempts per agent: a box (quartiles) and a dot per attempt,
    jittered sideways (the dashboard's only random element: for the eye, never a number)."""
    y = alt.Y("score:Q", title="score", scale=alt.Scale(zero=False))
    agent_axis = alt.X("agent_id:N", title=None, axis=alt.Axis(labelAngle=0, labelLimit=0))
    boxes = (
        alt.Chart(attempts)
        .mark_boxplot(extent="min-max", opacity=0.35)
        .encode(x=agent_axis, y=y, color=alt.Color("agent_id:N", legend=None))
    )
    dots = (
        alt.Chart(attempts)
        .mark_circle(size=60, opacity=0.9)
        .transform_calculate(jitter="(random() - 0.5) * 24")
        .encode(
            x=agent_axis,
            xOffset=alt.XOffset("jitter:Q", scale=alt.Scale(domain=[-40, 40])),
            y=y,
            color=alt.Color("agent_id:N", legend=None),
            tooltip=tooltips(attempts, ["agent_id", "success_index", "score", "run_id"]),
        )
    )
    return boxes + dots


PASS_K_COLUMNS = ("mean_pass_k", "mean_expected_worst_points")


def pass_k(frame: pd.DataFrame, value: str = "mean_pass_k") -> Drawing:
    """``value`` (mean pass^k, or the mean expected worst points of k attempts) against k, one
    line per agent, from ``queries.pass_k``'s rows; a k whose mean is over no setting is left
    out (the line stops where the agent made fewer attempts)."""
    if value not in PASS_K_COLUMNS:
        raise ValueError(f"pass_k draws one of {PASS_K_COLUMNS}, not {value!r}")
    shown = frame.dropna(subset=[value])
    counts = "settings_with_pass_k" if value == "mean_pass_k" else "settings_with_worst_points"
    return (
        alt.Chart(shown)
        .mark_line(point=True)
        .encode(
            x=alt.X("k:O", title="k (attempts drawn)", axis=alt.Axis(labelAngle=0)),
            y=alt.Y(
                f"{value}:Q",
                title=label(value),
                scale=alt.Scale(domain=[0, 1], nice=False),
                axis=alt.Axis(format=".1f"),
            ),
            color=alt.Color("agent_id:N", title=label("agent_id")),
            tooltip=tooltips(shown, ["agent_id", "k", value, counts]),
        )
    )
