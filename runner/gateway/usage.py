"""What the gateway understands of the three provider protocols.

Everything here works on bytes and JSON that came from the sandbox or from the provider,
so every function is total: odd shapes give ``None``/empty results, never an exception.

* :func:`model_call_kind` says whether a request is a model call (a POST to a generation
  endpoint) and which protocol its reply speaks.
* :func:`prepare_body` parses a model call's JSON body and, for an OpenAI chat stream, asks
  for the final usage chunk (``stream_options.include_usage``).
* :func:`summarize_request` keeps what the transcript shows of a request.
* :class:`ReplyParser` is fed the reply's bytes as they are forwarded (JSON or server-sent
  events) and extracts the token usage, the reply's text and tool calls, and an error.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal

Protocol = Literal["openai-chat", "openai-responses", "anthropic-messages"]
PROTOCOLS: tuple[str, ...] = Protocol.__args__  # type: ignore[attr-defined]

MAX_PARSE_BYTES = 16 * 1024**2  # a JSON reply or one SSE event larger than this is not parsed
MAX_TEXT_CHARS = 32 * 1024  # reply text kept for the transcript
MAX_ARGUMENT_CHARS = 8 * 1024  # per tool call
MAX_TOOL_CALLS = 64
MAX_ERROR_CHARS = 2000
LAST_MESSAGES = 4  # request messages / input items kept for the transcript
KEPT_REQUEST_KEYS = (
    "model",
    "stream",
    "max_tokens",
    "max_completion_tokens",
    "max_output_tokens",
    "temperature",
    "tool_choice",
    "reasoning_effort",
    "reasoning",
    "thinking",
    "previous_response_id",
)


def model_call_kind(method: str, relative_path: str) -> Protocol | None:
    """The protocol of a generation endpoint, or None for any other request.

    ``relative_path`` is the request path after the gateway's base path, without query.
    Detected by endpoint rather than by the configured protocol, so usage is counted even
    if a CLI uses another endpoint of the same provider.
    """
    if method != "POST":
        return None
    path = relative_path.rstrip("/")
    if path.endswith("/chat/completions"):
        return "openai-chat"
    if path.endswith("/responses"):
        return "openai-responses"
    if path in ("/messages", "/v1/messages"):
        return "anthropic-messages"
    return None


def prepare_body(kind: Protocol, body: bytes) -> tuple[bytes, Any]:
    """(body to send upstream, the parsed request JSON or None if it is not JSON)."""
    try:
        parsed = json.loads(body)
    except (ValueError, RecursionError):
        return body, None
    if kind == "openai-chat" and isinstance(parsed, dict) and parsed.get("stream") is True:
        options = parsed.get("stream_options")
        if not isinstance(options, dict) or options.get("include_usage") is not True:
            parsed["stream_options"] = {
                **(options if isinstance(options, dict) else {}),
                "include_usage": True,
            }
            try:
                body = json.dumps(parsed).encode("ascii")
            except (ValueError, RecursionError):  # pragma: no cover - it parsed, so it dumps
                return body, parsed
    return body, parsed


# -- transcript shapes ---------------------------------------------------------------------


def shrink(value: Any, max_str: int = 4000, max_items: int = 50, depth: int = 8) -> Any:
    """A copy of a JSON value with long strings cut, long lists shortened, deep nesting cut."""
    if isinstance(value, str):
        if len(value) <= max_str:
            return value
        return value[:max_str] + f" [... {len(value) - max_str} characters cut]"
    if isinstance(value, bool | int | float) or value is None:
        return value
    if depth <= 0:
        return "[...]"
    if isinstance(value, dict):
        out = {}
        for i, (k, v) in enumerate(value.items()):
            if i == max_items:
                out["..."] = f"{len(value) - max_items} more keys"
                break
            if k in ("image_url", "data") and isinstance(v, str | dict) and len(str(v)) > 200:
                out[str(k)] = "[binary data]"
            else:
                out[str(k)] = shrink(v, max_str, max_items, depth - 1)
        return out
    if isinstance(value, list):
        items = [shrink(v, max_str, max_items, depth - 1) for v in value[:max_items]]
        if len(value) > max_items:
            items.append(f"[... {len(value) - max_items} more items]")
        return items
    return str(value)[:max_str]


def _tool_name(tool: Any) -> str | None:
    if not isinstance(tool, dict):
        return None
    function = tool.get("function")
    if isinstance(function, dict) and isinstance(function.get("name"), str):
        return function["name"]
    name = tool.get("name") or tool.get("type")
    return name if isinstance(name, str) else None


def summarize_request(kind: Protocol, parsed: Any, max_str: int = 4000) -> dict | None:
    """What the transcript keeps of a model call's request (None if it was not a JSON object).

    ``{model, stream, ..., "n_messages": N, "messages": [the last few messages or input
    items], "tools": [names]}``; Responses' ``input`` is shown as ``messages`` too.
    """
    if not isinstance(parsed, dict):
        return None
    out: dict[str, Any] = {k: shrink(parsed[k], 500) for k in KEPT_REQUEST_KEYS if k in parsed}
    items = parsed.get("input" if kind == "openai-responses" else "messages")
    if isinstance(items, str):
        items = [{"role": "user", "content": items}]
    if isinstance(items, list):
        out["n_messages"] = len(items)
        out["messages"] = [shrink(m, max_str, 20, 6) for m in items[-LAST_MESSAGES:]]
    tools = parsed.get("tools")
    if isinstance(tools, list):
        out["tools"] = [_tool_name(t) for t in tools[:200]]
    return out


# -- replies -------------------------------------------------------------------------------


@dataclass
class Reply:
    """What was understood of a reply. ``usage`` is (input, output) tokens or None."""

    usage: tuple[int, int] | None = None
    text: str = ""
    tool_calls: list[dict] = field(default_factory=list)
    error: tuple[str | None, str] | None = None  # (code, message) from the body
    parsed: bool = False  # the body (or at least one event) was understood

    def transcript(self) -> dict:
        if self.error is not None and not self.text and not self.tool_calls:
            code, message = self.error
            return {"error": f"({code}) {message}" if code else message}
        out: dict[str, Any] = {"text": self.text, "tool_calls": self.tool_calls}
        if self.error is not None:
            out["error"] = self.error[1]
        return out


def _count(value: Any) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    return None


def usage_of(kind: Protocol, usage: Any) -> tuple[int, int] | None:
    """(input, output) tokens from a protocol's usage object; None if not both are known."""
    if not isinstance(usage, dict):
        return None
    if kind == "openai-chat":
        tokens_in, tokens_out = (
            _count(usage.get("prompt_tokens")),
            _count(usage.get("completion_tokens")),
        )
    else:
        tokens_in, tokens_out = (
            _count(usage.get("input_tokens")),
            _count(usage.get("output_tokens")),
        )
        if kind == "anthropic-messages" and tokens_in is not None:
            for extra in ("cache_creation_input_tokens", "cache_read_input_tokens"):
                tokens_in += _count(usage.get(extra)) or 0
    if tokens_in is None or tokens_out is None:
        return None
    return tokens_in, tokens_out


def error_of(body: Any) -> tuple[str | None, str] | None:
    """(code, message) of an error object in any of the protocols' shapes, or None.

    OpenAI ``{"error": {"message", "code", "type"}}``, Anthropic ``{"type": "error",
    "error": {"type", "message"}}``, Responses stream events ``{"type": "error", "code",
    "message"}`` and ``{"type": "response.failed", "response": {"error": {...}}}``.
    """
    if not isinstance(body, dict):
        return None
    error = body.get("error")
    response = body.get("response")
    if body.get("type") == "response.failed" and isinstance(response, dict):
        error = response.get("error") or error or "the response failed"
    if not error and body.get("type") == "error":
        error = {k: body[k] for k in ("code", "message") if body.get(k)} or "error"
    if not error:
        return None
    if isinstance(error, dict):
        code = error.get("code") or error.get("type")
        message = error.get("message") or json.dumps(error)
        return (str(code)[:100] if code else None), str(message)[:MAX_ERROR_CHARS]
    return None, str(error)[:MAX_ERROR_CHARS]


def error_of_bytes(data: bytes) -> tuple[str | None, str]:
    """(code, message) of an error reply's body, JSON or not."""
    try:
        found = error_of(json.loads(data))
    except (ValueError, RecursionError):
        found = None
    if found is not None:
        return found
    text = data.decode("utf-8", errors="replace").strip()
    return None, text[:MAX_ERROR_CHARS] or "(empty body)"


def _text_of(content: Any) -> str:
    """Text of a message content: a string, or a list of parts with ``text``."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            p["text"] for p in content if isinstance(p, dict) and isinstance(p.get("text"), str)
        )
    return ""


def _arguments(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value)
    if len(text) > MAX_ARGUMENT_CHARS:
        return text[:MAX_ARGUMENT_CHARS] + f" [... {len(text) - MAX_ARGUMENT_CHARS} cut]"
    return text


def _call(name: Any, arguments: Any) -> dict:
    return {
        "name": str(name)[:200] if name is not None else None,
        "arguments": _arguments(arguments),
    }


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
        self.reply = Reply()
        self._body = bytearray()
        self._overflow = False
        # SSE state
        self._line = bytearray()
        self._skip_line = False
        self._data: list[bytes] = []
        self._data_size = 0
        self._text: list[str] = []
        self._text_size = 0
        self._calls: dict[Any, dict] = {}  # stream index → {"name", "arguments": [parts]}
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

    def _set_error(self, event: dict) -> None:
        if self.reply.error is None:
            self.reply.error = error_of(event)

    def _chat_chunk(self, event: dict) -> None:
        self._set_error(event)
        found = usage_of("openai-chat", event.get("usage"))
        if found is not None:
            self.reply.usage = found
        for choice in event.get("choices") or []:
            if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                continue
            delta = choice.get("delta") or {}
            self._add_text(delta.get("content"))
            for call in delta.get("tool_calls") or []:
                function = call.get("function") or {}
                self._call_part(
                    call.get("index", 0), function.get("name"), function.get("arguments")
                )

    def _responses_event(self, event: dict) -> None:
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
            response = event.get("response") or {}
            found = usage_of("openai-responses", response.get("usage"))
            if found is not None:
                self.reply.usage = found
            if kind == "response.failed":
                self._set_error(event)
            final = _responses_output(response)
            if final is not None:  # the complete output replaces what the deltas built
                self._text, self._text_size = [final.text], len(final.text)
                self._calls = {
                    i: {"name": c["name"], "arguments": [c["arguments"]], "size": 0}
                    for i, c in enumerate(final.tool_calls)
                }
        elif kind == "error":
            self._set_error(event)

    def _anthropic_event(self, event: dict) -> None:
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
            if not self._overflow and self._body:
                self._json_body(bytes(self._body))
            self._body.clear()
            return reply
        if self._line and not self._skip_line:  # a last event without its blank line
            self._sse_line(bytes(self._line).rstrip(b"\r"))
            self._line.clear()
        self._sse_line(b"")
        text = "".join(self._text)
        reply.text = _cut(text, MAX_TEXT_CHARS)
        reply.tool_calls = [_call(c["name"], "".join(c["arguments"])) for c in self._calls.values()]
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
        try:
            if self.kind == "openai-chat":
                reply.usage = usage_of("openai-chat", body.get("usage"))
                choices = body.get("choices") or [{}]
                message = choices[0].get("message") or {}
                reply.text = _cut(_text_of(message.get("content")), MAX_TEXT_CHARS)
                calls = message.get("tool_calls") or []
                reply.tool_calls = [
                    _call(
                        (c.get("function") or {}).get("name"),
                        (c.get("function") or {}).get("arguments") or "",
                    )
                    for c in calls[:MAX_TOOL_CALLS]
                    if isinstance(c, dict)
                ]
            elif self.kind == "openai-responses":
                reply.usage = usage_of("openai-responses", body.get("usage"))
                final = _responses_output(body)
                if final is not None:
                    reply.text, reply.tool_calls = final.text, final.tool_calls
            else:
                reply.usage = usage_of("anthropic-messages", body.get("usage"))
                final = _anthropic_content(body.get("content"))
                reply.text, reply.tool_calls = final.text, final.tool_calls
        except (TypeError, AttributeError, KeyError, ValueError, IndexError):
            pass


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + f" [... {len(text) - limit} cut]"


def _responses_output(response: dict) -> Reply | None:
    output = response.get("output")
    if not isinstance(output, list) or not output:
        return None
    text, calls = [], []
    for item in output:
        if not isinstance(item, dict):
            continue
        if item.get("type") == "message":
            text.append(_text_of(item.get("content")))
        elif item.get("type") == "function_call" and len(calls) < MAX_TOOL_CALLS:
            calls.append(_call(item.get("name"), item.get("arguments") or ""))
        elif item.get("type") == "custom_tool_call" and len(calls) < MAX_TOOL_CALLS:
            calls.append(_call(item.get("name"), item.get("input") or ""))
    return Reply(text=_cut("".join(text), MAX_TEXT_CHARS), tool_calls=calls)


def _anthropic_content(content: Any) -> Reply:
    if not isinstance(content, list):
        return Reply(text=_cut(_text_of(content), MAX_TEXT_CHARS))
    text, calls = [], []
    for block in content:
        if not isinstance(block, dict):
            continue
        if block.get("type") == "text" and isinstance(block.get("text"), str):
            text.append(block["text"])
        elif block.get("type") in ("tool_use", "server_tool_use") and len(calls) < MAX_TOOL_CALLS:
            calls.append(_call(block.get("name"), block.get("input") or {}))
    return Reply(text=_cut("".join(text), MAX_TEXT_CHARS), tool_calls=calls)
