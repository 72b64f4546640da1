"""Settings: each agent's median score per task × budget, and every counted attempt behind it."""

from __future__ import annotations

import streamlit as st

from app import queries
from app.app_pages._common import download, page, resume_hint, stop_if_empty, table
from warehouse.report import charts

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

CAPTION = "Median of the counted successes of each agent × task × budget; bars span Q1–Q3."

with page("Scores per setting", caption=CAPTION) as view:
    scores = view.query(queries.setting_scores, view.filters)
    stop_if_empty(scores, "No setting matches the filters.")
    task = st.selectbox("Task", sorted(scores["task_id"].unique()), key="task")
    one = scores[scores["task_id"] == task]
    direction = one["metric_direction"].iloc[0]
    better = "higher" if direction == "maximize" else "lower"
    st.caption(f"Raw metric, {better} is better.")

    st.altair_chart(charts.setting_medians(one), width="stretch")
    for ceiling, column, whose in (
        ("harness-error", "Harness errors", "the harness failed that often"),
        (
            "provider-error",
            "Provider errors",
            "the model provider failed that often (not the agent)",
        ),
    ):
        stopped = int(one[f"stopped_at_{ceiling.replace('-', '_')}_ceiling"].sum())
        if stopped:
            st.warning(
                f"⊘ {stopped} setting(s) of this task stopped at the {ceiling} ceiling (column "
                f"{column}): {whose}, so the setting gets no more attempts. "
                + resume_hint(view.filters.suite)
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
    attempts = view.query(queries.counted_attempts, task, int(budget), view.filters)
    if attempts.empty:
        st.info("No counted attempt for this task and budget (with the current filters).")
    else:
        st.altair_chart(charts.counted_attempts(attempts), width="stretch")
        table(attempts, ATTEMPT_COLUMNS)
        download(attempts, f"counted_attempts_{task}_{budget}")
