"""Leaderboard: the primary ranking (best budget per task) and the two other variants."""

from __future__ import annotations

import altair as alt
import streamlit as st

from app.app_pages._common import download, footer, query, snapshot_or_stop

VARIANT_LABELS = {
    "best_budget": "Best budget per task (primary)",
    "all_cells": "Mean over all task × budget cells",
    "largest_budget": "Largest budget only",
}

st.title("Leaderboard")
path = snapshot_or_stop()

variant = st.selectbox(
    "Variant", list(VARIANT_LABELS), format_func=VARIANT_LABELS.get, key="variant"
)
board = query("leaderboard", path, variant)

if board.empty:
    st.warning(
        "No agent is ranked yet: an agent is ranked once it has enough successes in every "
        "task × budget setting. See the coverage below, then `make run` again."
    )
else:
    st.dataframe(
        board,
        hide_index=True,
        width="stretch",
        column_config={
            "score": st.column_config.ProgressColumn(
                "score", min_value=0, max_value=1, format="%.3f"
            ),
            "success_rate": st.column_config.NumberColumn("success rate", format="percent"),
            "score_low": st.column_config.NumberColumn("95% low", format="%.3f"),
            "score_high": st.column_config.NumberColumn("95% high", format="%.3f"),
            "p_rank_1": st.column_config.NumberColumn("P(rank 1)", format="percent"),
            "run_rel_iqr": st.column_config.NumberColumn("run-to-run rel. IQR", format="%.3f"),
        },
    )
    bars = (
        alt.Chart(board)
        .mark_bar()
        .encode(
            x=alt.X("score:Q", scale=alt.Scale(domain=[0, 1]), title="score (normalized points)"),
            y=alt.Y("agent_id:N", sort="-x", title=None),
            tooltip=list(board.columns),
        )
    )
    chart = bars
    if "score_low" in board.columns:
        chart = bars + alt.Chart(board).mark_rule(color="black").encode(
            x="score_low:Q", x2="score_high:Q", y=alt.Y("agent_id:N", sort="-x")
        )
    st.altair_chart(chart, width="stretch")
    download(board, f"leaderboard_{variant}")

st.subheader("Coverage")
st.caption("Only agents with enough successes in every setting are ranked.")
coverage = query("coverage", path)
st.dataframe(coverage, hide_index=True, width="stretch")
download(coverage, "coverage")
footer(path)
