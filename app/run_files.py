"""An attempt's own files and fields, read for the run explorer (no Streamlit, no SQL here).

The files (logs, submission, transcript, workspace listing) were written by the agent or its
sandbox: only a regular file inside the attempt's run folder is read, reached through folder
descriptors without following a link (``runner.agent_files.read_head``), and only its head.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping
from pathlib import Path

import pandas as pd

from runner.agent_files import read_head

LOG_PREVIEW_BYTES = 64 * 1024


Record = Mapping[str, object]  # one attempt's row (app.queries.run_record)
Event = dict[str, object]  # one transcript event: a JSON object with a string "event"


def run_file_preview(record: Record, field: str, limit: int = LOG_PREVIEW_BYTES) -> str | None:
    """The head of a file the record points to (``stdout_path``, ``submission_path``, ...).

    Paths are relative to the run folder, which is where the loaded record file lives. Files an
    agent wrote are untrusted: only a regular file inside the run folder, reached without
    following a link, is read, and at most ``limit`` bytes. None when the record has no such
    file on this machine.
    """
    relative, source = record.get(field), record.get("source_path")
    if not isinstance(relative, str) or not isinstance(source, str) or not relative or not source:
        return None
    head = read_head(Path(source).parent, relative, limit)
    if head is None:
        return None
    text = head[:limit].decode("utf-8", errors="replace")
    return text + ("\n… (truncated)" if len(head) > limit else "")


TRANSCRIPT_PREVIEW_BYTES = 2 * 1024**2


def run_transcript(record: Record, limit: int = TRANSCRIPT_PREVIEW_BYTES) -> list[Event] | None:
    """An attempt's transcript as events: the built-in llm agent's (start, request, response,
    tool, retry, end, ...) or the provider gateway's for command agents (gateway_start,
    model_call, request, transcript_full, gateway_stop; see runner.agents.gateway).

    Read like any other run file (regular file inside the run folder, at most ``limit`` bytes);
    a line that is not a JSON object with a string ``event`` (e.g. cut by the limit) is
    skipped. None without one.
    """
    text = run_file_preview(record, "transcript_path", limit)
    if text is None:
        return None
    events: list[Event] = []
    for line in text.splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if isinstance(event, dict) and isinstance(event.get("event"), str):
            events.append(event)
    return events


USAGE_FIELDS = (
    "tokens_in", "tokens_out", "cost_usd", "requests", "retries", "steps",
    "provider_seconds", "tool_seconds", "egress_requests", "egress_denied",
    "egress_denied_hosts", "egress_bytes_up", "egress_bytes_down",
)  # fmt: skip


def run_usage(record: Record) -> dict[str, object]:
    """The model-usage and egress fields an attempt recorded (unknown ones left out)."""
    return {
        k: record[k] for k in USAGE_FIELDS if record.get(k) is not None and record[k] == record[k]
    }


def run_source_fields(record: Record) -> pd.DataFrame | None:
    """An imported attempt's ``source_fields`` (the source's fields raw.runs has no column for) as
    rows of field and value: strings as they are, anything else as compact JSON. A value that is
    not a JSON object becomes one row named "(value)". None when the attempt has none."""
    raw = record.get("source_fields")
    if raw is None or (isinstance(raw, float) and raw != raw):  # NULL: None or NaN
        return None
    try:
        value = json.loads(raw) if isinstance(raw, str) else raw
    except ValueError:
        value = raw  # not JSON after all: shown as the text it is
    items = value.items() if isinstance(value, dict) else [("(value)", value)]
    return pd.DataFrame(
        [(str(k), v if isinstance(v, str) else json.dumps(v, default=str)) for k, v in items],
        columns=["field", "value"],
    )


def _is_missing(value: object) -> bool:
    """NULL in the warehouse: None, or NaN / NaT in pandas."""
    try:
        return value is None or bool(value != value)
    except (TypeError, ValueError):  # an array compares element-wise: not missing
        return False


def _as_text(value: object) -> str:
    tolist = getattr(value, "tolist", None)  # numpy arrays (list columns such as sandbox_notes)
    if callable(tolist) and not isinstance(value, pd.Timestamp):
        value = tolist()
    if isinstance(value, list | dict):
        return json.dumps(value, default=str)
    if isinstance(value, dt.datetime):
        return value.isoformat()
    return str(value)


# What a reader of one attempt asks first: how it ended, its score, and why (the limit it broke,
# the grader's verdict, the error), then whose attempt it is; the other fields follow in the
# warehouse's column order.
LEAD_FIELDS = (
    "status", "score", "limit_exceeded", "validation_code", "validation_message", "error_message",
    "exit_code", "agent_id", "task_id", "budget_seconds", "attempt_index", "created_at",
    "wall_seconds", "run_id",
)  # fmt: skip


def record_fields(record: Record) -> pd.DataFrame:
    """An attempt's record as rows of field and value (as text: lists and maps as JSON, times in
    ISO form): LEAD_FIELDS first (status, score, the reason), then the rest in the warehouse's
    column order; fields the attempt did not record are left out."""
    names = [*(n for n in LEAD_FIELDS if n in record), *(n for n in record if n not in LEAD_FIELDS)]
    rows = [(n, _as_text(record[n])) for n in names if not _is_missing(record[n])]
    return pd.DataFrame(rows, columns=["field", "value"])
