"""Settings: each agent's median score per task × budget, with its interquartile range."""

from __future__ import annotations

import altair as alt
import streamlit as st

from app.app_pages._common import download, footer, query, snapshot_or_stop

st.title("Scores per setting")
st.caption("Median of the counted successes of each agent × task × budget; bars span Q1–Q3.")
path = snapshot_or_stop()

scores = query("setting_scores", path)
task = st.selectbox("Task", sorted(scores["task_id"].unique()), key="task")
one = scores[scores["task_id"] == task]
direction = one["metric_direction"].iloc[0]
st.caption(f"Raw metric, {'higher' if direction == 'maximize' else 'lower'} is better.")

base = alt.Chart(one).encode(
    x=alt.X("budget_seconds:O", title="budget (s)"),
    xOffset="agent_id:N",
    color=alt.Color("agent_id:N", title="agent"),
    tooltip=list(one.columns),
)
chart = base.mark_rule(strokeWidth=3).encode(
    y=alt.Y("q1:Q", title="median score", scale=alt.Scale(zero=False)), y2="q3:Q"
) + base.mark_point(filled=True, size=80).encode(y="median_score:Q")
st.altair_chart(chart, width="stretch")
st.dataframe(one, hide_index=True, width="stretch")
download(scores, "setting_scores", "Download all settings (CSV)")
footer(path)
