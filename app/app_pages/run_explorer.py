"""Run explorer: filter attempts, open one to see its record, validation errors, logs and submission."""

from __future__ import annotations

import streamlit as st

from app import queries
from app.app_pages._common import download, footer, query, snapshot_or_stop

st.title("Run explorer")
path = snapshot_or_stop()
runs = query("runs", path)

columns = st.columns(4)
filters = {
    "agent_id": columns[0].multiselect("Agents", sorted(runs["agent_id"].unique())),
    "task_id": columns[1].multiselect("Tasks", sorted(runs["task_id"].unique())),
    "budget_seconds": columns[2].multiselect(
        "Budgets (s)", sorted(runs["budget_seconds"].unique())
    ),
    "status": columns[3].multiselect("Statuses", sorted(runs["status"].unique())),
}
shown = runs
for column, chosen in filters.items():
    if chosen:
        shown = shown[shown[column].isin(chosen)]
first, last = runs["created_at"].min().date(), runs["created_at"].max().date()
dates = st.date_input("Created between", (first, last), min_value=first, max_value=last)
if isinstance(dates, tuple) and len(dates) == 2:
    day = shown["created_at"].dt.date
    shown = shown[(day >= dates[0]) & (day <= dates[1])]

st.caption(f"{len(shown):,} of {len(runs):,} attempts")
st.dataframe(shown.drop(columns=["source_path"]), hide_index=True, width="stretch")
download(shown, "runs")

if shown.empty:
    st.stop()
run_id = st.selectbox("Open an attempt", shown["run_id"].tolist())
record = queries.run_record(path, run_id)
st.subheader(run_id)
if record.get("validation_code"):
    st.error(f"{record['validation_code']}: {record['validation_message']}")
if record.get("error_message"):
    st.warning(record["error_message"])
tabs = st.tabs(["Record", "stdout", "stderr", "Transcript", "Submission"])
tabs[0].json({k: (None if v != v else str(v)) for k, v in record.items()}, expanded=False)
for tab, field in zip(
    tabs[1:], ("stdout_path", "stderr_path", "transcript_path", "submission_path"), strict=True
):
    text = queries.run_file_preview(record, field)
    if text is None:
        tab.caption("Not available on this machine (no such file next to the loaded record).")
    else:
        tab.code(text, language="text")
footer(path)
