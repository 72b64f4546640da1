"""Time scaling: how the mean normalized points of each ranked agent grow with the budget."""

from __future__ import annotations

import altair as alt
import streamlit as st

from app.app_pages._common import (
    current_filters,
    download,
    filters_note,
    footer,
    provisional_note,
    query,
    snapshot_or_stop,
    table,
)
from app.columns import label, tooltips

st.title("Time scaling")
path = snapshot_or_stop()
filters = current_filters(path)
filters_note(filters)
provisional_note(path, filters)

scaling = query("time_scaling", path, filters)
if scaling.empty:
    st.warning("No agent is ranked yet (see the coverage on the Leaderboard page).")
    st.stop()

st.caption("Mean normalized points over tasks at each time budget (log scale).")
# the axis spans the suite's budgets (a fifth of a log step of padding each side), ticked at
# exactly those budgets: a "nice" log domain (100 to 10,000 for 240-1200 s) left it two-thirds empty
budgets = sorted(int(b) for b in scaling["budget_seconds"].unique())
st.altair_chart(
    alt.Chart(scaling)
    .mark_line(point=True)
    .encode(
        x=alt.X(
            "budget_seconds:Q",
            scale=alt.Scale(type="log", domain=[budgets[0] / 1.25, budgets[-1] * 1.25], nice=False),
            axis=alt.Axis(values=budgets, format="d"),
            title="budget (s)",
        ),
        y=alt.Y(  # padded both ends: a curve at 0 or 1 is drawn whole, off the axis
            "mean_points:Q",
            scale=alt.Scale(domain=[-0.05, 1.05], nice=False),
            axis=alt.Axis(values=[0, 0.2, 0.4, 0.6, 0.8, 1.0]),
            title="mean points",
        ),
        color=alt.Color("agent_id:N", title=label("agent_id")),
        tooltip=tooltips(scaling, ["agent_id", "budget_seconds", "mean_points", "n_tasks"]),
    ),
    width="stretch",
)
table(scaling, ["agent_id", "budget_seconds", "mean_points", "n_tasks"])
download(scaling, "time_scaling")

st.subheader("Monotone curves")
st.caption(
    "A curve is one agent on one task over the budgets; it is monotone (✓) when the agent's own "
    "median score never gets worse as the budget grows (equal is not worse). The points shown "
    "beside it also move with the other agents, so a monotone curve's points may fall. "
    "Per agent: monotone curves / curves."
)
shares = query("time_scaling_monotone", path, filters)
curves = query("monotone_curves", path, filters)
if curves.empty:
    st.info("No curve matches the filters.")
else:
    shares = shares.assign(
        monotone=shares["monotone_curves"].astype(str) + " / " + shares["curves"].astype(str)
    )
    table(shares, ["agent_id", "monotone", "share_monotone"])
    marked = curves.assign(mark=curves["is_monotone"].map({True: "✓", False: "✗"}))
    grid = alt.Chart(marked).encode(  # tasks down the side: full labels, never cut
        y=alt.Y("task_id:N", title=None, axis=alt.Axis(labelLimit=0)),
        x=alt.X("agent_id:N", title=None, axis=alt.Axis(labelAngle=0, labelLimit=0, orient="top")),
    )
    st.altair_chart(
        (
            grid.mark_rect().encode(
                color=alt.Color(
                    "is_monotone:N",
                    title=label("is_monotone"),
                    scale=alt.Scale(domain=[True, False], range=["#4c9a2a", "#d1495b"]),
                ),
                tooltip=tooltips(marked, ["agent_id", "task_id", "is_monotone", "points"]),
            )
            + grid.mark_text(color="white", size=16).encode(text="mark:N")
        ).properties(height=alt.Step(26)),
        width="stretch",
    )
    download(curves, "monotone_curves")
footer(path)
