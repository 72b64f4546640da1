"""Time scaling: how the mean normalized points of each ranked agent grow with the budget."""

from __future__ import annotations

import streamlit as st

from app import queries
from app.app_pages._common import NOT_RANKED, download, page, stop_if_empty, table
from warehouse.report import charts

with page("Time scaling", provisional=True) as view:
    scaling = view.query(queries.time_scaling, view.filters)
    stop_if_empty(scaling, NOT_RANKED)

    st.caption("Mean normalized points over tasks at each time budget (log scale).")
    st.altair_chart(charts.time_scaling(scaling), width="stretch")
    table(scaling, ["agent_id", "budget_seconds", "mean_points", "n_tasks"])
    download(scaling, "time_scaling")

    st.subheader("Monotone curves")
    st.caption(
        "A curve is one agent on one task over the budgets; it is monotone (✓) when the agent's "
        "own median score never gets worse as the budget grows (equal is not worse). The points "
        "shown beside it also move with the other agents, so a monotone curve's points may fall. "
        "Per agent: monotone curves / curves."
    )
    shares = view.query(queries.time_scaling_monotone, view.filters)
    curves = view.query(queries.monotone_curves, view.filters)
    if curves.empty:
        st.info("No curve matches the filters.")
    else:
        shares = shares.assign(
            monotone=shares["monotone_curves"].astype(str) + " / " + shares["curves"].astype(str)
        )
        table(shares, ["agent_id", "monotone", "share_monotone"])
        st.altair_chart(charts.monotone_grid(curves), width="stretch")
        download(curves, "monotone_curves")
