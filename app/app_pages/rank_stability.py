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
    table,
)
from app.columns import label, tooltips

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
ranks = query("task_ranks", path, filters)
# ranks run from 1 to the number of ranked agents: the axis shows exactly those, with half a rank
# of padding so that neither the best nor the last agent sits on the chart's edge (wider only
# when a ± sd band reaches further)
worst = int(max(ranks["rank"].max() if not ranks.empty else 1, len(stability)))
rank_scale = alt.Scale(
    domain=[min(0.5, float(band["low"].min())), max(worst + 0.5, float(band["high"].max()))],
    nice=False,
    zero=False,
)
rank_axis = alt.Axis(values=list(range(1, worst + 1)), format="d")
ROW = alt.Step(26)  # pixels per agent or task row
agents = alt.Y("agent_id:N", sort=stability["agent_id"].tolist(), title=None)
base = alt.Chart(band).encode(y=agents)
st.altair_chart(
    (
        base.mark_rule(strokeWidth=2).encode(
            x=alt.X("low:Q", title="task rank (1 = best)", scale=rank_scale, axis=rank_axis),
            x2="high:Q",
        )
        + base.mark_point(filled=True, size=80).encode(
            x=alt.X("mean_rank:Q", scale=rank_scale),
            tooltip=tooltips(stability, ["agent_id", "mean_rank", "rank_std", "n_tasks"]),
        )
    ).properties(height=ROW),
    width="stretch",
)
table(stability, ["agent_id", "mean_rank", "rank_std", "n_tasks"])
download(stability, "rank_stability")

st.subheader("Rank per task")
# tasks down the side (their ids are long: full labels, never cut), agents across in the order
# of their mean rank
heat = alt.Chart(ranks).encode(
    y=alt.Y("task_id:N", title=None, axis=alt.Axis(labelLimit=0)),
    x=alt.X(
        "agent_id:N",
        sort=stability["agent_id"].tolist(),
        title=None,
        axis=alt.Axis(labelAngle=0, labelLimit=0, orient="top"),
    ),
)
st.altair_chart(
    (
        heat.mark_rect().encode(
            color=alt.Color(
                "rank:O", title=label("rank"), scale=alt.Scale(scheme="viridis", reverse=True)
            ),
            tooltip=tooltips(ranks, ["agent_id", "task_id", "rank", "best_points"]),
        )
        + heat.mark_text(color="white", size=14).encode(text="rank:Q")
    ).properties(height=ROW),
    width="stretch",
)
download(ranks, "task_ranks")
footer(path)
