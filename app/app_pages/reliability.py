"""Reliability: how often attempts succeed (by status) and how much repeated runs vary."""

from __future__ import annotations

import altair as alt
import streamlit as st

from app.app_pages._common import download, footer, query, snapshot_or_stop

st.title("Reliability")
path = snapshot_or_stop()

st.subheader("Attempts by status")
counts = query("status_counts", path)
chart = (
    alt.Chart(counts[counts["attempts"] > 0])
    .mark_bar()
    .encode(
        x=alt.X("attempts:Q", stack="normalize", title="share of attempts"),
        y=alt.Y("agent_id:N", title=None),
        color=alt.Color("status:N"),
        tooltip=["agent_id", "status", "attempts"],
    )
)
st.altair_chart(chart, width="stretch")
download(counts, "status_counts")

rates = query("success_rates", path)
st.dataframe(
    rates,
    hide_index=True,
    width="stretch",
    column_config={
        "success_rate": st.column_config.NumberColumn("success rate", format="percent"),
        "run_rel_iqr": st.column_config.NumberColumn("run-to-run rel. IQR", format="%.3f"),
    },
)
download(rates, "success_rates")

st.subheader("Run-to-run stability")
st.caption(
    "Median over an agent's settings of IQR ÷ |median| of its counted scores (lower = steadier)."
)
stable = rates.dropna(subset=["run_rel_iqr"])
if stable.empty:
    st.info("No setting has counted successes yet.")
else:
    st.altair_chart(
        alt.Chart(stable)
        .mark_bar()
        .encode(
            x=alt.X("run_rel_iqr:Q", title="relative IQR"),
            y=alt.Y("agent_id:N", sort="x", title=None),
            tooltip=["agent_id", "run_rel_iqr", "run_settings"],
        ),
        width="stretch",
    )
footer(path)
