"""``transcript.jsonl``: what the gateway writes of each request (see the package doc)."""

from __future__ import annotations

import contextlib
import json
import logging
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TextIO

from runner.agents.gateway.client_connection import ClientRequest
from runner.agents.gateway.model_requests import Protocol, shrink, summarize_request
from runner.agents.gateway.replies import Reply, ShownReply
from runner.agents.gateway.stats import redact_masked
from runner.agents.redaction import SecretForms

log = logging.getLogger(__name__)

# The transcript's host budget per attempt, like the logs' (5 MiB a stream): it is written on
# the host from what the agent sends, so it is the agent's to fill. A model_call line holds at
# most ~128 KiB (request and reply cut to MAX_TRANSCRIPT_BODY each) and a working CLI's lines
# are a few KiB, so 16 MiB holds a whole attempt of hundreds of calls (the spend ceilings'
# default is 30 calls a minute of budget). It was 128 MiB: an agent looping calls filled that in
# 40 s, per attempt, on a host running several at once, for a file the run explorer shows 2 MiB
# of.
MAX_TRANSCRIPT_BYTES = 16 * 1024**2
MAX_TRANSCRIPT_BODY = 64 * 1024  # serialized request / reply per transcript line
# Kept for the closing lines (transcript_full, gateway_stop with its stats), so a full
# transcript still ends with what the gateway counted.
CLOSING_BYTES = 8 * 1024


class Transcript:
    """``transcript.jsonl``, appended line by line; bounded, never holding the key.

    At ``max_bytes`` (less :data:`CLOSING_BYTES` kept for the closing lines) it writes a
    ``transcript_full`` line and then nothing but the closing ``gateway_stop``: the events
    after it are only counted (``dropped``), never serialized, so a full transcript costs no
    further memory or disk whatever the agent sends.
    """

    def __init__(self, path: Path, forms: SecretForms, max_bytes: int):
        self.path = path
        self.forms = forms
        self.max_bytes = max_bytes
        self.written = 0
        self.full = False
        self.dropped = 0  # events not written once full
        self.started = time.monotonic()
        self._lock = threading.Lock()
        self._fh: TextIO | None = None

    def open(self) -> None:
        self.started = time.monotonic()
        self._fh = self.path.open("a", encoding="utf-8")

    def write(self, event: str, **data: object) -> None:
        """Append one event (once full: only count it)."""
        self._append(event, data, closing=False)

    def write_closing(self, event: str, **data: object) -> None:
        """Append the last event (``gateway_stop``), which may use the room kept for it."""
        self._append(event, data, closing=True)

    def _append(self, event: str, data: dict[str, object], closing: bool) -> None:
        if self.full and not closing:
            with self._lock:
                self.dropped += 1
            return
        entry = {"event": event, "t": round(time.monotonic() - self.started, 3), **data}
        line = json.dumps(entry, default=str) + "\n"
        line = self.forms.redact_text(line)  # the reply's text, joined across its events
        room = self.max_bytes - (0 if closing else min(CLOSING_BYTES, self.max_bytes // 2))
        with self._lock:
            if self._fh is None or (self.full and not closing):
                self.dropped += self._fh is not None
                return
            if self.written + len(line) > room:
                if self.full or closing:  # no room even for the closing line: leave it out
                    return
                self.full = True
                self.dropped += 1
                line = (
                    json.dumps(
                        {"event": "transcript_full", "t": entry["t"], "max_bytes": self.max_bytes}
                    )
                    + "\n"
                )
            try:
                self._fh.write(line)
                self._fh.flush()
                self.written += len(line)
            except (OSError, ValueError):
                log.warning("cannot write the gateway transcript %s", self.path)
                self.full = True

    def note(self) -> str | None:
        """What the record notes of a truncated transcript (None: it is whole)."""
        if not self.full:
            return None
        return (
            f"{self.path.name} truncated at its host budget of {self.max_bytes:,} bytes: "
            f"{self.dropped:,} later event(s) not written (the record's counts are complete)"
        )

    def close(self) -> None:
        with self._lock:
            fh, self._fh = self._fh, None
        if fh is not None:
            with contextlib.suppress(OSError):
                fh.close()

    def forwarded(
        self,
        kind: Protocol | None,
        call: int | None,
        request: ClientRequest,
        *,
        status: int,
        seconds: float,
        summary: Mapping[str, object] | None,
        event_stream: bool,
        reply: Reply | None,
        interrupted: str | None,
        usage_unknown: bool = False,
    ) -> None:
        """The line of one forwarded request: ``model_call`` or ``request`` (see the package doc).

        ``call``: a model call's number; ``summary``: the request body's summary
        (:func:`capped_request`), None if not JSON; ``usage_unknown``: the provider owed the
        call's usage and did not report it.
        """
        error = reply.error if reply is not None else None
        path = request.path[:500]
        if kind is None:
            extra: dict[str, str] = {}
            if error is not None:
                extra["error"] = redact_masked(error[1])[:500]
            self.write(
                "request",
                method=request.method,
                path=path,
                status=status,
                seconds=round(seconds, 3),
                **extra,
            )
            return
        usage = reply.usage if reply is not None else None
        shown: ShownReply = reply.transcript() if reply is not None else {"error": "no reply"}
        if "error" in shown:
            shown["error"] = redact_masked(shown["error"])
        entry: dict[str, object] = {
            "call": call,
            "protocol": kind,
            "method": request.method,
            "path": path,
            "status": status,
            "seconds": round(seconds, 3),
            "stream": event_stream,
            "usage": {"input": usage[0], "output": usage[1]} if usage is not None else None,
            "request": summary,
            "reply": capped(shown),
        }
        if interrupted is not None:
            entry["interrupted"] = interrupted
        if usage_unknown:
            entry["usage_unknown"] = True
        self.write("model_call", **entry)


def capped(value: Mapping[str, object], limit: int = MAX_TRANSCRIPT_BODY) -> Mapping[str, object]:
    """``value`` if it serializes within ``limit``; else with its strings cut harder."""
    if len(json.dumps(value, default=str)) <= limit:
        return value
    for max_str in (2000, 300):
        cut = shrink(value, max_str, 64, 8)  # a dict: shrink keeps an object 8 levels deep
        if isinstance(cut, dict) and len(json.dumps(cut, default=str)) <= limit:
            return cut
    return {"cut": f"larger than {limit} bytes"}


def capped_request(kind: Protocol, parsed: Any) -> dict[str, object] | None:
    """The transcript's summary of a parsed request body, cut to fit one line."""
    if parsed is None:
        return None
    for max_str in (4000, 500, 100):
        summary = summarize_request(kind, parsed, max_str)
        if summary is None:
            return {"cut": "the request body was not a JSON object"}
        if len(json.dumps(summary, default=str)) <= MAX_TRANSCRIPT_BODY:
            return summary
    return {
        "model": str(parsed.get("model"))[:200],
        "cut": f"larger than {MAX_TRANSCRIPT_BODY} bytes",
    }
