"""Run explorer: filter attempts, open one to see its record, validation errors, logs and submission.

Nearly everything an attempt shows came from the agent: it is drawn with show_text / literal
(app_pages/_common.py), never as Markdown.
"""

from __future__ import annotations

import json
import numbers
from pathlib import Path

import streamlit as st

from app import queries, run_files
from app.app_pages._common import clip, connection, literal, page, query, show_text, table
from app.columns import label
from app.queries import Record
from app.run_files import Event


def _at(event: Event) -> str:
    t = event.get("t")
    return f"{t:.1f} s" if isinstance(t, int | float) else "? s"


def _last_input(request: object) -> str | None:
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
    count = request.get("n_messages") if isinstance(request, dict) else None
    return f"[{role}{f', message {count}' if isinstance(count, int) else ''}] {text}"


def show_model_call(event: Event) -> None:
    """One model call a command agent made through the harness's gateway, as plain text.

    Everything here came from the agent or its provider: shown with show_text, never as
    markdown.
    """
    request, reply = event.get("request") or {}, event.get("reply") or {}
    usage = event.get("usage")
    last = _last_input(request)
    if last:
        with st.chat_message("user", avatar=":material/input:"):
            show_text(last, code=False)
    with st.chat_message("assistant"):
        status = f"HTTP {event.get('status')} · {event.get('seconds')} s"
        used = (
            f"tokens in {usage.get('input')}, out {usage.get('output')}"
            if isinstance(usage, dict) and usage
            else "usage unknown"
        )
        broken = f" · interrupted ({event['interrupted']})" if event.get("interrupted") else ""
        show_text(
            f"{_at(event)} · {event.get('method')} {event.get('path')} · {status} · {used}{broken}",
            code=False,
        )
        if not isinstance(reply, dict):
            return
        if reply.get("error"):
            show_text(f"error: {reply['error']}", limit=4000, code=False)
        if reply.get("text"):
            show_text(reply["text"], code=False)
        calls = reply.get("tool_calls")
        for call in calls if isinstance(calls, list) else []:
            if isinstance(call, dict):
                arguments = str(call.get("arguments"))[:4000]
                show_text(f"{call.get('name')}({arguments})")


def show_transcript(events: list[Event] | None) -> None:
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
            show_text(f"{at} · {event.get('method')} {event.get('path')} · "
                      f"HTTP {event.get('status')} · {event.get('seconds')} s{error}", code=False)  # fmt: skip
        elif kind == "gateway_start":
            show_text(f"{at} · gateway for {event.get('protocol')} at {event.get('base_url')}",
                      code=False)  # fmt: skip
        elif kind == "gateway_stop":
            show_text(f"{at} · gateway stopped: {json.dumps(event.get('stats'))}", limit=2000,
                      code=False)  # fmt: skip
        elif kind == "transcript_full":
            show_text(
                f"{at} · transcript full ({event.get('max_bytes')} bytes): later calls not shown",
                code=False,
            )
        elif kind == "start":
            st.caption(f"{at} · model {literal(event.get('model'))} at "
                       f"{literal(event.get('base_url'))}, budget "
                       f"{literal(event.get('budget_seconds'))} s")  # fmt: skip
            with st.expander("System prompt and task"):
                show_text(event.get("system") or "", limit=None)
                show_text(event.get("instructions") or "", limit=None)
        elif kind == "response":
            message = event.get("message")
            with st.chat_message("assistant"):
                st.caption(f"{at} · {literal(event.get('seconds'))} s · "
                           f"usage {literal(event.get('usage'))}")  # fmt: skip
                if isinstance(message, dict) and message.get("content"):
                    show_text(message["content"], code=False)
        elif kind == "tool":
            with st.chat_message("user", avatar=":material/terminal:"):
                st.caption(f"{at} · {literal(event.get('name'))} · "
                           f"{literal(event.get('seconds'))} s")  # fmt: skip
                show_text(json.dumps(event.get("arguments"), indent=1), limit=4000)
                show_text(event.get("result"))
        elif kind in ("retry", "malformed_tool_call", "context_too_long", "nudge", "harness_fault"):
            st.warning(f"{at} · {kind}")
            rest = {k: v for k, v in event.items() if k not in ("t", "event")}
            show_text(json.dumps(rest), limit=2000)
        elif kind == "end":
            st.info(f"{at} · end: {literal(event.get('reason'))}")
            if event.get("provider_error"):
                show_text(event["provider_error"])


def show_sandbox(record: Record) -> None:
    """What the sandbox noted, the workspace's use at the end, and, when the disk cap ended the
    attempt, the listing of what it held (file names are the agent's: shown as text)."""
    recorded = record.get("sandbox_notes")
    notes = list(recorded) if isinstance(recorded, list | tuple) else []  # NULL: None
    if not notes:
        st.caption("No sandbox notes (records before schema 4 have none).")
    else:
        show_text("\n".join(str(n) for n in notes), limit=None)
    size, files = record.get("workspace_bytes"), record.get("workspace_files")
    if isinstance(size, int) and isinstance(files, int):
        st.caption(f"workspace at the end: {size:,} bytes in {files:,} files")
    if record.get("workspace_removed"):
        st.warning("The disk cap ended this attempt: nothing it wrote was kept. Its listing:")
        listing = run_files.run_file_preview(record, "workspace_listing_path")
        if listing is None:
            st.caption(NOT_HERE)
        else:
            show_text(listing, limit=None)


def _usage_value(value: object) -> str:
    """A number as a number; anything else (the hosts an agent tried to reach, ...) literally."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):  # numpy ints are Real
        return literal(value)
    return f"{value:,.4g}" if isinstance(value, float) else f"{value:,}"


def show_twins(path: Path, suite: str | None, record: Record) -> None:
    """The other attempts of the task, in the suite shown, that submitted the same answer (same
    canonical fingerprint): a replay when of the same setting. Ids are shown in a table, never as
    Markdown."""
    fingerprint, budget = record.get("submission_normalized_sha256"), record.get("budget_seconds")
    if fingerprint is None:
        st.caption(
            "Twins: this attempt has no submission fingerprint (only successful attempts of "
            "records from schema 5 on, and imported runs whose source recorded one, have it)."
        )
        return
    if not isinstance(budget, int):  # NULL
        st.caption("Twins: this imported attempt has no budget, so it belongs to no setting and "
                   "is not compared with others.")  # fmt: skip
        return
    twin_key = (suite, str(record["task_id"]), str(fingerprint), str(record["agent_id"]), budget)
    twins = query(queries.submission_twins, path, str(record["run_id"]), twin_key)
    if twins.empty:
        st.caption("Twins: none. No other attempt of this task submitted the same answer.")
        return
    total = int(twins["total"].iloc[0])
    replays = int((twins["relation"] == "same setting (replay)").sum())
    more = f" (the first {len(twins):,} shown)" if total > len(twins) else ""
    st.warning(
        f"Twins: {total:,} other attempt(s) of this task submitted the same answer{more}"
        + (f", {replays:,} of them in the same setting: a replayed or cached answer." if replays
           else ".")
    )  # fmt: skip
    table(twins, TWIN_COLUMNS)


def show_source_fields(record: Record) -> None:
    """An imported attempt's extra fields from its source, as a field/value table (the values
    are the source's data: shown as table cells, clipped, never as Markdown)."""
    fields = run_files.run_source_fields(record)
    if fields is None:
        return
    st.caption("Fields of the imported source that have no column here (`source_fields`):")
    fields["value"] = fields["value"].map(lambda v: clip(v, 2000))
    table(fields)


def show_record(record: Record) -> None:
    """Every field the attempt recorded, one per row (values an agent controls are table cells,
    never Markdown; long ones clipped)."""
    fields = run_files.record_fields(record)
    fields["value"] = fields["value"].map(lambda v: clip(v, 2000))
    st.caption(
        f"{len(fields)} of {len(record)} fields recorded (the others are empty for this attempt)."
    )
    table(fields, height=min(35 * (len(fields) + 1) + 3, 900))


NOT_HERE = "Not available on this machine (no such file next to the loaded record)."
# Key columns first, the wide run id last: what a reader scans for (how it ended, its score,
# whose setting) fits a 1600-px screen; the rest behind the "every column" toggle (and the CSV).
RUN_COLUMNS = [
    "status",
    "score",
    "agent_id",
    "task_id",
    "budget_seconds",
    "created_at",
    "wall_seconds",
    "cost_usd",
    "run_id",
]
MORE_RUN_COLUMNS = [
    "validation_code",
    "local_validation_score",
    "attempt_index",
    "instruction_profile",
    "tokens_in",
    "tokens_out",
    "peak_memory_bytes",
]
TWIN_COLUMNS = [
    "relation",
    "status",
    "score",
    "is_counted",
    "agent_id",
    "budget_seconds",
    "created_at",
    "run_id",
]


@st.fragment
def show_attempt(path: Path, suite: str | None, spaces: dict[str, str]) -> None:
    """The attempt chosen in the box, with its record, messages, twins and files. A fragment:
    choosing another attempt reruns only this, not the router, the sidebar and the attempts
    table above (2,000 rows sent to the browser again).

    spaces: run id -> run space of the attempts shown (a suite's run ids are unique)."""
    run_id = st.selectbox("Open an attempt", list(spaces), key="run_id")
    record = queries.run_record(connection(path), spaces[run_id], run_id)  # ~10 ms: not cached
    st.subheader(literal(run_id))
    if record.get("validation_code"):
        # the grader's message quotes the submission (its header, its ids): the agent's text
        st.error(
            f"Validation failed: {literal(record['validation_code'])} (message below, as text)"
        )
        show_text(record.get("validation_message") or "")
    if record.get("error_message"):
        st.warning("Error message (as recorded; it may quote the agent's output):")
        show_text(record["error_message"])
    usage = run_files.run_usage(record)
    if usage:
        st.caption(
            " · ".join(f"{k.replace('_', ' ')}: {_usage_value(v)}" for k, v in usage.items())
        )
    show_twins(path, suite, record)
    show_source_fields(record)
    tabs = st.tabs(["Record", "stdout", "stderr", "Transcript", "Submission", "Sandbox"])
    with tabs[0]:
        show_record(record)
    with tabs[5]:
        show_sandbox(record)
    for tab, field in zip(
        tabs[1:5], ("stdout_path", "stderr_path", None, "submission_path"), strict=True
    ):
        if field is None:
            with tab:
                show_transcript(run_files.run_transcript(record))
            continue
        text = run_files.run_file_preview(record, field)
        if text is None:
            tab.caption(NOT_HERE)
        else:  # the file is at most run_files.LOG_PREVIEW_BYTES already
            show_text(text, limit=None, where=tab)


with page("Run explorer") as view:
    options = view.query(queries.filter_options, view.filters.suite)
    statuses = tuple(st.multiselect("Statuses", options["statuses"], key="statuses"))
    # filters run in SQL; only the newest RUN_ROWS matching attempts travel to the browser
    total = view.query(queries.run_count, view.filters, statuses)
    shown = view.query(queries.runs, view.filters, statuses, queries.RUN_ROWS)
    if total > len(shown):
        st.caption(
            f"{total:,} attempts match; showing the newest {len(shown):,} "
            "(narrow the sidebar filters, or download them all)."
        )
    else:
        st.caption(f"{total:,} attempts match.")
    every = st.toggle("Every column", key="run_columns_all", help=", ".join(
        label(c) for c in MORE_RUN_COLUMNS))  # fmt: skip
    table(
        shown,
        [*RUN_COLUMNS[:-1], *MORE_RUN_COLUMNS, RUN_COLUMNS[-1]] if every else RUN_COLUMNS,
    )
    path, filters = view.path, view.filters
    st.download_button(
        "Download the matching attempts (CSV)",
        lambda: queries.runs(connection(path), filters, statuses).to_csv(index=False).encode(),
        file_name="runs.csv",
        mime="text/csv",
        key="download-runs",
    )
    if not shown.empty:
        spaces = dict(zip(shown["run_id"].astype(str), shown["run_space"].astype(str), strict=True))
        show_attempt(view.path, view.filters.suite, spaces)
