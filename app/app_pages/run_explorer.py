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


def _at(event: dict) -> str:
    t = event.get("t")
    return f"{t:.1f} s" if isinstance(t, int | float) else "? s"


def _last_input(request: dict) -> str | None:
    """The last message / input item a model call sent, as plain text with its role."""
    messages = request.get("messages") if isinstance(request, dict) else None
    if not isinstance(messages, list) or not messages:
        return None
    last = messages[-1]
    if not isinstance(last, dict):
        return str(last)
    role = last.get("role") or last.get("type") or "input"
    content = last.get("content", last.get("output"))
    text = content if isinstance(content, str) else json.dumps(content, indent=1)
    count = request.get("n_messages")
    return f"[{role}{f', message {count}' if isinstance(count, int) else ''}] {text}"


def show_model_call(event: dict) -> None:
    """One model call a command agent made through the harness's gateway, as plain text.

    Everything here came from the agent or its provider: shown with st.text / st.code,
    never as markdown.
    """
    request, reply = event.get("request") or {}, event.get("reply") or {}
    usage = event.get("usage") if isinstance(event.get("usage"), dict) else None
    last = _last_input(request)
    if last:
        with st.chat_message("user", avatar=":material/input:"):
            st.text(last[:8000])
    with st.chat_message("assistant"):
        status = f"HTTP {event.get('status')} · {event.get('seconds')} s"
        used = (
            f"tokens in {usage.get('input')}, out {usage.get('output')}"
            if usage
            else "usage unknown"
        )
        broken = f" · interrupted ({event['interrupted']})" if event.get("interrupted") else ""
        st.text(
            f"{_at(event)} · {event.get('method')} {event.get('path')} · {status} · {used}{broken}"
        )
        if not isinstance(reply, dict):
            return
        if reply.get("error"):
            st.text(f"error: {str(reply['error'])[:4000]}")
        if reply.get("text"):
            st.text(str(reply["text"])[:8000])
        for call in reply.get("tool_calls") or []:
            if isinstance(call, dict):
                st.code(
                    f"{call.get('name')}({str(call.get('arguments'))[:4000]})",
                    language="text",
                    wrap_lines=True,
                )


def show_transcript(events: list[dict] | None) -> None:
    """An attempt's conversation: the built-in llm agent's replies, tool calls and retries, or
    the model calls a command agent made through the harness's provider gateway."""
    if events is None:
        st.caption(
            "No transcript: only attempts of llm agents, and of command agents that reach their "
            "model through the harness's gateway, have one. " + NOT_HERE
        )
        return
    for event in events:
        kind, at = event["event"], _at(event)
        if kind == "model_call":
            show_model_call(event)
        elif kind == "request":
            error = f" · {str(event['error'])[:500]}" if event.get("error") else ""
            st.text(f"{at} · {event.get('method')} {event.get('path')} · HTTP {event.get('status')}"
                    f" · {event.get('seconds')} s{error}")  # fmt: skip
        elif kind == "gateway_start":
            st.text(f"{at} · gateway for {event.get('protocol')} at {event.get('base_url')}")
        elif kind == "gateway_stop":
            st.text(f"{at} · gateway stopped: {json.dumps(event.get('stats'))[:2000]}")
        elif kind == "transcript_full":
            st.text(
                f"{at} · transcript full ({event.get('max_bytes')} bytes): later calls not shown"
            )
        elif kind == "start":
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
