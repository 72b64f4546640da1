"""Reading a model call's reply as it is forwarded: one JSON document or server-sent events."""

from __future__ import annotations

import json
from typing import Any, TypedDict

from runner.agents.gateway.model_requests import Protocol
from runner.agents.gateway.replies import (
    MAX_ARGUMENT_CHARS,
    MAX_TEXT_CHARS,
    MAX_TOOL_CALLS,
    Reply,
    anthropic_content,
    cut,
    error_of,
    responses_output,
    text_of,
    tool_call,
    usage_of,
)

MAX_PARSE_BYTES = 16 * 1024**2  # a JSON reply or one SSE event larger than this is not parsed


class _StreamedCall(TypedDict):
    """A tool call as its stream events arrive: the name, the argument pieces, their size."""

    name: str | None
    arguments: list[str]
    size: int


class ReplyParser:
    """Fed a reply's bytes in order; :meth:`finish` says what they meant.

    ``event_stream``: the reply is ``text/event-stream`` (else one JSON document). Memory
    is bounded: a JSON body or an SSE event over ``MAX_PARSE_BYTES`` is skipped (its usage
    is then unknown), and text and tool calls are cut for the transcript.
    """

    def __init__(self, kind: Protocol, *, event_stream: bool, max_bytes: int = MAX_PARSE_BYTES):
        self.kind = kind
        self.event_stream = event_stream
        self.max_bytes = max_bytes
        self.reply = Reply(streamed=event_stream)
        self._body = bytearray()
        self._overflow = False
        # SSE state
        self._line = bytearray()
        self._skip_line = False
        self._data: list[bytes] = []
        self._data_size = 0
        self._text: list[str] = []
        self._text_size = 0
        self._calls: dict[object, _StreamedCall] = {}  # by the stream's index of the call
        self._anthropic_usage: dict[str, Any] = {}

    # -- feeding ---------------------------------------------------------------------------

    def feed(self, data: bytes) -> None:
        if not self.event_stream:
            if not self._overflow:
                if len(self._body) + len(data) > self.max_bytes:
                    self._overflow = True
                    self._body.clear()
                else:
                    self._body += data
            return
        start = 0
        while True:
            end = data.find(b"\n", start)
            if end < 0:
                rest = data[start:]
                if not self._skip_line:
                    if len(self._line) + len(rest) > self.max_bytes:
                        self._skip_line = True
                        self._line.clear()
                    else:
                        self._line += rest
                return
            piece = data[start:end]
            start = end + 1
            if self._skip_line:
                self._skip_line = False
                self._drop_event()
                continue
            if self._line:
                self._line += piece
                line = bytes(self._line)
                self._line.clear()
            else:
                line = piece
            self._sse_line(line.rstrip(b"\r"))

    def _drop_event(self) -> None:
        self._data = []
        self._data_size = -1  # the event lost a line: ignore it when it ends

    def _sse_line(self, line: bytes) -> None:
        if not line:
            if self._data and self._data_size >= 0:
                self._event(b"\n".join(self._data))
            self._data, self._data_size = [], 0
            return
        if line.startswith(b"data:") and self._data_size >= 0:
            value = line[5:]
            if value.startswith(b" "):
                value = value[1:]
            self._data_size += len(value)
            if self._data_size > self.max_bytes:
                self._drop_event()
            else:
                self._data.append(value)
        # "event:", "id:", "retry:" and comments carry nothing the payload does not

    def _event(self, data: bytes) -> None:
        if data.strip() == b"[DONE]":
            self.reply.terminal = self.kind == "openai-chat"
            return
        try:
            event = json.loads(data)
        except (ValueError, RecursionError):
            return
        if not isinstance(event, dict):
            return
        self.reply.parsed = True
        try:
            if self.kind == "openai-chat":
                self._chat_chunk(event)
            elif self.kind == "openai-responses":
                self._responses_event(event)
            else:
                self._anthropic_event(event)
        except (TypeError, AttributeError, KeyError, ValueError):
            pass  # a shape we do not know: ignore the event

    # -- stream events ---------------------------------------------------------------------

    def _add_text(self, text: Any) -> None:
        if isinstance(text, str) and text and self._text_size < MAX_TEXT_CHARS:
            self._text.append(text)
            self._text_size += len(text)

    def _call_part(self, key: Any, name: Any = None, arguments: Any = None) -> None:
        call = self._calls.get(key)
        if call is None:
            if len(self._calls) >= MAX_TOOL_CALLS:
                return
            call = self._calls[key] = {"name": None, "arguments": [], "size": 0}
        if isinstance(name, str) and name:
            call["name"] = name
        if isinstance(arguments, str) and call["size"] < MAX_ARGUMENT_CHARS + 1:
            call["arguments"].append(arguments)
            call["size"] += len(arguments)

    def _set_error(self, event: dict[str, Any]) -> None:
        if self.reply.error is None:
            self.reply.error = error_of(event)

    def _chat_chunk(self, event: dict[str, Any]) -> None:
        self._set_error(event)
        found = usage_of("openai-chat", event.get("usage"))
        if found is not None:
            self.reply.usage = found
        for choice in event.get("choices") or []:
            if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                continue
            if choice.get("error") or choice.get("finish_reason") == "error":
                # an error event, as in a complete body (_json_body): never a step
                self._set_error({"error": choice.get("error") or "finish_reason is error"})
            delta = choice.get("delta") or {}
            self._add_text(delta.get("content"))
            for call in delta.get("tool_calls") or []:
                function = call.get("function") or {}
                self._call_part(
                    call.get("index", 0), function.get("name"), function.get("arguments")
                )

    def _responses_event(self, event: dict[str, Any]) -> None:
        kind = event.get("type")
        if kind == "response.output_text.delta":
            self._add_text(event.get("delta"))
        elif kind == "response.output_item.added":
            item = event.get("item") or {}
            if item.get("type") in ("function_call", "custom_tool_call"):
                self._call_part(event.get("output_index"), item.get("name"))
        elif kind == "response.function_call_arguments.delta":
            self._call_part(event.get("output_index"), arguments=event.get("delta"))
        elif kind in ("response.completed", "response.incomplete", "response.failed"):
            self.reply.terminal = kind != "response.failed"
            response = event.get("response") or {}
            found = usage_of("openai-responses", response.get("usage"))
            if found is not None:
                self.reply.usage = found
            if kind == "response.failed":
                self._set_error(event)
            final = responses_output(response)
            if final is not None:  # the complete output replaces what the deltas built
                self._text, self._text_size = [final.text], len(final.text)
                self._calls = {
                    i: {"name": c["name"], "arguments": [c["arguments"]], "size": 0}
                    for i, c in enumerate(final.tool_calls)
                }
        elif kind == "error":
            self._set_error(event)

    def _anthropic_event(self, event: dict[str, Any]) -> None:
        kind = event.get("type")
        if kind == "message_start":
            usage = (event.get("message") or {}).get("usage")
            if isinstance(usage, dict):
                self._anthropic_usage.update(usage)
        elif kind == "message_delta":
            usage = event.get("usage")
            if isinstance(usage, dict):  # cumulative counts
                self._anthropic_usage.update({k: v for k, v in usage.items() if v is not None})
        elif kind == "content_block_start":
            block = event.get("content_block") or {}
            if block.get("type") in ("tool_use", "server_tool_use"):
                initial = block.get("input")
                self._call_part(event.get("index"), block.get("name"))
                if initial:  # usually {}: the arguments come as input_json_delta
                    self._call_part(event.get("index"), arguments=json.dumps(initial))
            elif block.get("type") == "text":
                self._add_text(block.get("text"))
        elif kind == "content_block_delta":
            delta = event.get("delta") or {}
            if delta.get("type") == "text_delta":
                self._add_text(delta.get("text"))
            elif delta.get("type") == "input_json_delta":
                self._call_part(event.get("index"), arguments=delta.get("partial_json"))
        elif kind == "message_stop":
            self.reply.terminal = True
        elif kind == "error":
            self._set_error(event)
        found = usage_of("anthropic-messages", self._anthropic_usage)
        if found is not None:
            self.reply.usage = found

    # -- the end -----------------------------------------------------------------------------

    def finish(self) -> Reply:
        """What the bytes fed so far meant (call once, after the last byte)."""
        reply = self.reply
        if not self.event_stream:
            if self._overflow:
                reply.terminal = True  # too big to parse, not known to be cut: a step
            elif self._body:
                self._json_body(bytes(self._body))
            self._body.clear()
            return reply
        if self._line and not self._skip_line:  # a last event without its blank line
            self._sse_line(bytes(self._line).rstrip(b"\r"))
            self._line.clear()
        self._sse_line(b"")
        text = "".join(self._text)
        reply.text = cut(text, MAX_TEXT_CHARS)
        reply.tool_calls = [
            tool_call(c["name"], "".join(c["arguments"])) for c in self._calls.values()
        ]
        return reply

    def _json_body(self, data: bytes) -> None:
        try:
            body = json.loads(data)
        except (ValueError, RecursionError):
            return
        if not isinstance(body, dict):
            return
        reply = self.reply
        reply.parsed = True
        reply.error = error_of(body)
        # A JSON reply cut short does not parse; one that parses is complete if it is a reply.
        if self.kind == "openai-chat":
            # Whatever its finish_reason (length, or none): only "error" makes it an error
            # event, as the built-in agent's client judges the bodies it reads.
            choices = body.get("choices")
            reply.terminal = isinstance(choices, list)
            first = choices[0] if isinstance(choices, list) and choices else None
            choice = first if isinstance(first, dict) else {}
            failed = choice.get("error") or choice.get("finish_reason") == "error"
            if reply.error is None and failed:
                reply.error = error_of({"error": choice.get("error") or "finish_reason is error"})
        elif self.kind == "openai-responses":
            # A response, or what responses/compact answers: a "response.compaction" object
            # (no status) with its output items and a Responses usage.
            reply.terminal = body.get("status") in ("completed", "incomplete") or (
                body.get("object") == "response.compaction" and isinstance(body.get("output"), list)
            )
        else:
            reply.terminal = body.get("type") == "message"
        try:
            if self.kind == "openai-chat":
                reply.usage = usage_of("openai-chat", body.get("usage"))
                choices = body.get("choices") or [{}]
                message = choices[0].get("message") or {}
                reply.text = cut(text_of(message.get("content")), MAX_TEXT_CHARS)
                calls = message.get("tool_calls") or []
                reply.tool_calls = [
                    tool_call(
                        (c.get("function") or {}).get("name"),
                        (c.get("function") or {}).get("arguments") or "",
                    )
                    for c in calls[:MAX_TOOL_CALLS]
                    if isinstance(c, dict)
                ]
            elif self.kind == "openai-responses":
                reply.usage = usage_of("openai-responses", body.get("usage"))
                final = responses_output(body)
                if final is not None:
                    reply.text, reply.tool_calls = final.text, final.tool_calls
            else:
                reply.usage = usage_of("anthropic-messages", body.get("usage"))
                final = anthropic_content(body.get("content"))
                reply.text, reply.tool_calls = final.text, final.tool_calls
        except (TypeError, AttributeError, KeyError, ValueError, IndexError):
            pass
