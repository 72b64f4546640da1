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
)

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
st.altair_chart(
    alt.Chart(scaling)
    .mark_line(point=True)
    .encode(
        x=alt.X("budget_seconds:Q", scale=alt.Scale(type="log"), title="budget (s)"),
        y=alt.Y("mean_points:Q", scale=alt.Scale(domain=[0, 1]), title="mean points"),
        color=alt.Color("agent_id:N", title="agent"),
        tooltip=list(scaling.columns),
    ),
    width="stretch",
)
st.dataframe(scaling, hide_index=True, width="stretch")
download(scaling, "time_scaling")

st.subheader("Monotone curves")
st.caption(
    "A curve is one agent's normalized points on one task over the budgets; it is monotone when "
    "it never gets worse as the budget grows (✓). Per agent: monotone curves / curves."
)
shares = query("time_scaling_monotone", path, filters)
curves = query("monotone_curves", path, filters)
if curves.empty:
    st.info("No curve matches the filters.")
else:
    shares = shares.assign(
        monotone=shares["monotone_curves"].astype(str) + " / " + shares["curves"].astype(str)
    )
    st.dataframe(
        shares[["agent_id", "monotone", "share_monotone", "monotone_curves", "curves"]],
        hide_index=True,
        width="stretch",
        column_config={
            "share_monotone": st.column_config.ProgressColumn(
                "share monotone", min_value=0, max_value=1, format="percent"
            )
        },
    )
    marked = curves.assign(mark=curves["is_monotone"].map({True: "✓", False: "✗"}))
    grid = alt.Chart(marked).encode(
        x=alt.X("task_id:N", title="task"), y=alt.Y("agent_id:N", title=None)
    )
    st.altair_chart(
        grid.mark_rect().encode(
            color=alt.Color(
                "is_monotone:N",
                title="monotone",
                scale=alt.Scale(domain=[True, False], range=["#4c9a2a", "#d1495b"]),
            ),
            tooltip=["agent_id", "task_id", "is_monotone", "points"],
        )
        + grid.mark_text(color="white", size=16).encode(text="mark:N"),
        width="stretch",
    )
    download(curves, "monotone_curves")
footer(path)
