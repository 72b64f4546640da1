"""Rank stability: how consistent each ranked agent's rank is across tasks."""

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
ranks = query("task_ranks", path, filters)
st.altair_chart(charts.rank_std(stability, ranks), width="stretch")
table(stability, ["agent_id", "mean_rank", "rank_std", "n_tasks"])
download(stability, "rank_stability")

st.subheader("Rank per task")
st.altair_chart(charts.rank_heatmap(ranks, stability["agent_id"].tolist()), width="stretch")
download(ranks, "task_ranks")
footer(path)
