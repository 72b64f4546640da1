"""Run explorer: filter attempts, open one to see its record, validation errors, logs and submission."""

from __future__ import annotations

import json

import streamlit as st

from app import queries
from app.app_pages._common import (
    current_filters,
    filters_note,
    footer,
    query,
    snapshot_or_stop,
)


def show_transcript(events: list[dict] | None) -> None:
    """An llm attempt's conversation: model replies, tool calls and their results, retries."""
    if events is None:
        st.caption("No transcript: only attempts of llm agents have one. " + NOT_HERE)
        return
    for event in events:
        kind, at = event["event"], f"{event.get('t', 0):.1f} s"
        if kind == "start":
            st.caption(f"{at} · model {event.get('model')} at {event.get('base_url')}, "
                       f"budget {event.get('budget_seconds')} s")  # fmt: skip
            with st.expander("System prompt and task"):
                st.markdown(event.get("system") or "")
                st.markdown(event.get("instructions") or "")
        elif kind == "response":
            message = event.get("message") or {}
            with st.chat_message("assistant"):
                st.caption(f"{at} · {event.get('seconds')} s · usage {event.get('usage')}")
                if message.get("content"):
                    st.markdown(message["content"])
        elif kind == "tool":
            with st.chat_message("user", avatar=":material/terminal:"):
                st.caption(f"{at} · {event.get('name')} · {event.get('seconds')} s")
                st.code(json.dumps(event.get("arguments"), indent=1)[:4000], language="json")
                st.code(str(event.get("result"))[:8000], language="text")
        elif kind in ("retry", "malformed_tool_call", "context_too_long", "nudge", "harness_fault"):
            st.warning(
                f"{at} · {kind}: "
                + json.dumps({k: v for k, v in event.items() if k not in ("t", "event")})[:2000]
            )
        elif kind == "end":
            st.info(f"{at} · end: {event.get('reason')}"
                    + (f" ({event['provider_error']})" if event.get("provider_error") else ""))  # fmt: skip


NOT_HERE = "Not available on this machine (no such file next to the loaded record)."
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
usage = queries.run_usage(record)
if usage:
    st.caption(
        " · ".join(f"{k.replace('_', ' ')}: {v:,.4g}" if isinstance(v, float) else f"{k.replace('_', ' ')}: {v:,}"
                   for k, v in usage.items())
    )  # fmt: skip
tabs = st.tabs(["Record", "stdout", "stderr", "Transcript", "Submission"])
tabs[0].json({k: (None if v != v else str(v)) for k, v in record.items()}, expanded=False)
for tab, field in zip(
    tabs[1:], ("stdout_path", "stderr_path", None, "submission_path"), strict=True
):
    if field is None:
        with tab:
            show_transcript(queries.run_transcript(record))
        continue
    text = queries.run_file_preview(record, field)
    if text is None:
        tab.caption(NOT_HERE)
    else:
        tab.code(text, language="text")
footer(path)
