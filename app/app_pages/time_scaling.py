"""Time scaling: how the mean normalized points of each ranked agent grow with the budget."""

from __future__ import annotations

import altair as alt
import streamlit as st

from app.app_pages._common import download, footer, query, snapshot_or_stop

st.title("Time scaling")
path = snapshot_or_stop()

scaling = query("time_scaling", path)
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
footer(path)
