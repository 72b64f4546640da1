"""Settings: each agent's median score per task × budget, and every counted attempt behind it."""

from __future__ import annotations

import altair as alt
import streamlit as st

from app.app_pages._common import (
    current_filters,
    download,
    filters_note,
    footer,
    query,
    resume_hint,
    snapshot_or_stop,
    table,
)
from app.columns import label, tooltips

# the task is chosen above the table: not a column
SETTING_COLUMNS = [
    "agent_id",
    "budget_seconds",
    "median_score",
    "q1",
    "q3",
    "iqr",
    "n_counted",
    "successes",
    "attempts",
    "harness_errors",
    "provider_errors",
]
ATTEMPT_COLUMNS = ["agent_id", "success_index", "score", "created_at", "run_id"]

st.title("Scores per setting")
st.caption("Median of the counted successes of each agent × task × budget; bars span Q1–Q3.")
path = snapshot_or_stop()
filters = current_filters(path)
filters_note(filters)

scores = query("setting_scores", path, filters)
if scores.empty:
    st.warning("No setting matches the filters.")
    st.stop()
task = st.selectbox("Task", sorted(scores["task_id"].unique()), key="task")
one = scores[scores["task_id"] == task]
direction = one["metric_direction"].iloc[0]
better = "higher" if direction == "maximize" else "lower"
st.caption(f"Raw metric, {better} is better.")

base = alt.Chart(one).encode(
    x=alt.X("budget_seconds:O", title="budget (s)", axis=alt.Axis(labelAngle=0)),
    xOffset="agent_id:N",
    color=alt.Color("agent_id:N", title=label("agent_id")),
    tooltip=tooltips(one, ["agent_id", "budget_seconds", "median_score", "q1", "q3", "n_counted"]),
)
chart = base.mark_rule(strokeWidth=3).encode(
    y=alt.Y("q1:Q", title="median score", scale=alt.Scale(zero=False)), y2="q3:Q"
) + base.mark_point(filled=True, size=80).encode(y="median_score:Q")
st.altair_chart(chart, width="stretch")
for ceiling, column, whose in (
    ("harness-error", "Harness errors", "the harness failed that often"),
    ("provider-error", "Provider errors", "the model provider failed that often (not the agent)"),
):
    stopped = int(one[f"stopped_at_{ceiling.replace('-', '_')}_ceiling"].sum())
    if stopped:
        st.warning(
            f"⊘ {stopped} setting(s) of this task stopped at the {ceiling} ceiling (column "
            f"{column}): {whose}, so the setting gets no more attempts. "
            + resume_hint(filters.suite)
        )
table(one, SETTING_COLUMNS)
download(scores, "setting_scores", "Download all settings (CSV)")

st.subheader("Counted attempts")
st.caption(
    "Every counted attempt (the first successes by creation time that make up the setting's "
    f"median) of each agent at one task × budget: a box (quartiles) and one dot per attempt. "
    f"Raw metric, {better} is better. The date range filter applies here."
)
budget = st.selectbox("Budget (s)", sorted(one["budget_seconds"].unique()), key="budget")
attempts = query("counted_attempts", path, task, int(budget), filters)
if attempts.empty:
    st.info("No counted attempt for this task and budget (with the current filters).")
else:
    y = alt.Y("score:Q", title="score", scale=alt.Scale(zero=False))
    agent_axis = alt.X("agent_id:N", title=None, axis=alt.Axis(labelAngle=0, labelLimit=0))
    boxes = (
        alt.Chart(attempts)
        .mark_boxplot(extent="min-max", opacity=0.35)
        .encode(x=agent_axis, y=y, color=alt.Color("agent_id:N", legend=None))
    )
    dots = (
        alt.Chart(attempts)
        .mark_circle(size=60, opacity=0.9)
        .transform_calculate(jitter="(random() - 0.5) * 24")
        .encode(
            x=agent_axis,
            xOffset=alt.XOffset("jitter:Q", scale=alt.Scale(domain=[-40, 40])),
            y=y,
            color=alt.Color("agent_id:N", legend=None),
            tooltip=tooltips(attempts, ["agent_id", "success_index", "score", "run_id"]),
        )
    )
    st.altair_chart(boxes + dots, width="stretch")
    table(attempts, ATTEMPT_COLUMNS)
    download(attempts, f"counted_attempts_{task}_{budget}")
footer(path)
