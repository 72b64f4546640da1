"""Rank stability: how consistent each ranked agent's rank is across tasks."""

from __future__ import annotations

import streamlit as st

from app import queries
from app.app_pages._common import NOT_RANKED, download, page, stop_if_empty, table
from warehouse.report import charts

with page("Rank stability", provisional=True) as view:
    stability = view.query(queries.rank_stability, view.filters)
    stop_if_empty(stability, NOT_RANKED)

    st.caption("Mean task rank (1 = best) ± the sample standard deviation over tasks.")
    ranks = view.query(queries.task_ranks, view.filters)
    st.altair_chart(charts.rank_std(stability, ranks), width="stretch")
    table(stability, ["agent_id", "mean_rank", "rank_std", "n_tasks"])
    download(stability, "rank_stability")

    st.subheader("Rank per task")
    st.altair_chart(charts.rank_heatmap(ranks, stability["agent_id"].tolist()), width="stretch")
    download(ranks, "task_ranks")
