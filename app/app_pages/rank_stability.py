"""Rank stability: how consistent each ranked agent's rank is across tasks."""

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

st.title("Rank stability")
path = snapshot_or_stop()
filters = current_filters(path)
filters_note(filters)
provisional_note(path, filters)

stability = query("rank_stability", path, filters)
if stability.empty:
    st.warning("No agent is ranked yet (see the coverage on the Leaderboard page).")
    st.stop()

st.caption("Mean task rank (1 = best) ± the sample standard deviation over tasks.")
band = stability.assign(
    low=stability["mean_rank"] - stability["rank_std"].fillna(0),
    high=stability["mean_rank"] + stability["rank_std"].fillna(0),
)
base = alt.Chart(band).encode(y=alt.Y("agent_id:N", sort="x", title=None))
st.altair_chart(
    base.mark_rule().encode(x=alt.X("low:Q", title="task rank"), x2="high:Q")
    + base.mark_point(filled=True, size=80).encode(
        x="mean_rank:Q", tooltip=["agent_id", "mean_rank", "rank_std", "n_tasks"]
    ),
    width="stretch",
)
st.dataframe(stability, hide_index=True, width="stretch")
download(stability, "rank_stability")

st.subheader("Rank per task")
ranks = query("task_ranks", path, filters)
heat = alt.Chart(ranks).encode(
    x=alt.X("task_id:N", title="task"), y=alt.Y("agent_id:N", title=None)
)
st.altair_chart(
    heat.mark_rect().encode(
        color=alt.Color("rank:O", scale=alt.Scale(scheme="viridis", reverse=True)),
        tooltip=["agent_id", "task_id", "rank", "best_points"],
    )
    + heat.mark_text(color="white").encode(text="rank:Q"),
    width="stretch",
)
download(ranks, "task_ranks")
footer(path)
