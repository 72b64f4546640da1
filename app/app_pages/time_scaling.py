"""Time scaling: how the mean normalized points of each ranked agent grow with the budget."""

from __future__ import annotations

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
from warehouse.report import charts

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
st.altair_chart(charts.time_scaling(scaling), width="stretch")
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
    st.altair_chart(charts.monotone_grid(curves), width="stretch")
    download(curves, "monotone_curves")
footer(path)
