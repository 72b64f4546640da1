"""Run explorer: filter attempts, open one to see its record, validation errors, logs and submission."""

from __future__ import annotations

import streamlit as st

from app import queries
from app.app_pages._common import (
    current_filters,
    filters_note,
    footer,
    query,
    snapshot_or_stop,
)

st.title("Run explorer")
path = snapshot_or_stop()
filters = current_filters()
filters_note(filters)

statuses = tuple(st.multiselect("Statuses", queries.STATUSES, key="statuses"))
# filters run in SQL; only the newest RUN_ROWS matching attempts travel to the browser
total = query("run_count", path, filters, statuses)
shown = query("runs", path, filters, statuses, queries.RUN_ROWS)
if total > len(shown):
    st.caption(
        f"{total:,} attempts match; showing the newest {len(shown):,} "
        "(narrow the sidebar filters, or download them all)."
    )
else:
    st.caption(f"{total:,} attempts match.")
st.dataframe(shown.drop(columns=["source_path"]), hide_index=True, width="stretch")
st.download_button(
    "Download the matching attempts (CSV)",
    lambda: queries.runs(path, filters, statuses).to_csv(index=False).encode("utf-8"),
    file_name="runs.csv",
    mime="text/csv",
    key="download-runs",
)

if shown.empty:
    st.stop()
run_id = st.selectbox("Open an attempt", shown["run_id"].tolist(), key="run_id")
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
