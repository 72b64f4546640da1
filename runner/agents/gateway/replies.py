"""What the gateway understands of a model call's reply: usage, text, tool calls, errors.

Everything here works on JSON that came from the provider, so every function is total: odd
shapes give ``None``/empty results, never an exception. :mod:`.reply_parser` feeds it the
reply's bytes as they are forwarded.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, TypedDict

from runner.agents.gateway.model_requests import Protocol

MAX_TEXT_CHARS = 32 * 1024  # reply text kept for the transcript
MAX_ARGUMENT_CHARS = 8 * 1024  # per tool call
MAX_TOOL_CALLS = 64
MAX_ERROR_CHARS = 2000


class ShownCall(TypedDict):
    """A tool call as the transcript shows it: its name and its arguments as text, cut."""

    name: str | None
    arguments: str


class ShownReply(TypedDict, total=False):
    """What the transcript keeps of a reply (see :meth:`Reply.transcript`)."""

    text: str
    tool_calls: list[ShownCall]
    error: str


@dataclass
class Reply:
    """What was understood of a reply. ``usage`` is (input, output) tokens or None."""

    usage: tuple[int, int] | None = None
    text: str = ""
    tool_calls: list[ShownCall] = field(default_factory=list)
    error: tuple[str | None, str] | None = None  # (code, message) from the body
    parsed: bool = False  # the body (or at least one event) was understood
    # The protocol's terminal event arrived: chat ``[DONE]`` (or a complete JSON body with
    # its choices), Responses ``response.completed``/``incomplete``, Anthropic
    # ``message_stop`` (or a complete message object). Without it the reply was cut.
    terminal: bool = False
    streamed: bool = False  # server-sent events (else one JSON document)
    retry_after: str | None = None  # the Retry-After header of an error reply, as sent

    def transcript(self) -> ShownReply:
        if self.error is not None and not self.text and not self.tool_calls:
            code, message = self.error
            return {"error": f"({code}) {message}" if code else message}
        out: ShownReply = {"text": self.text, "tool_calls": self.tool_calls}
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


def text_of(content: Any) -> str:
    """Text of a message content: a string, or a list of parts with ``text``."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            p["text"] for p in content if isinstance(p, dict) and isinstance(p.get("text"), str)
        )
    return ""


def _arguments(value: object) -> str:
    text = value if isinstance(value, str) else json.dumps(value)
    if len(text) > MAX_ARGUMENT_CHARS:
        return text[:MAX_ARGUMENT_CHARS] + f" [... {len(text) - MAX_ARGUMENT_CHARS} cut]"
    return text


def tool_call(name: object, arguments: object) -> ShownCall:
    """A tool call as the transcript shows it (arguments as text, cut)."""
    return {
        "name": str(name)[:200] if name is not None else None,
        "arguments": _arguments(arguments),
    }


def cut(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters, saying how much was cut."""
    return text if len(text) <= limit else text[:limit] + f" [... {len(text) - limit} cut]"


def responses_output(response: dict[str, Any]) -> Reply | None:
    """Text and tool calls of a complete Responses ``output``; None if it has none."""
    output = response.get("output")
    if not isinstance(output, list) or not output:
        return None
    text: list[str] = []
    calls: list[ShownCall] = []
    for item in output:
        if not isinstance(item, dict):
            continue
        if item.get("type") == "message":
            text.append(text_of(item.get("content")))
        elif item.get("type") == "function_call" and len(calls) < MAX_TOOL_CALLS:
            calls.append(tool_call(item.get("name"), item.get("arguments") or ""))
        elif item.get("type") == "custom_tool_call" and len(calls) < MAX_TOOL_CALLS:
            calls.append(tool_call(item.get("name"), item.get("input") or ""))
    return Reply(text=cut("".join(text), MAX_TEXT_CHARS), tool_calls=calls)


def anthropic_content(content: Any) -> Reply:
    """Text and tool calls of an Anthropic message's ``content`` blocks."""
    if not isinstance(content, list):
        return Reply(text=cut(text_of(content), MAX_TEXT_CHARS))
    text: list[str] = []
    calls: list[ShownCall] = []
    for block in content:
        if not isinstance(block, dict):
            continue
        if block.get("type") == "text" and isinstance(block.get("text"), str):
            text.append(block["text"])
        elif block.get("type") in ("tool_use", "server_tool_use") and len(calls) < MAX_TOOL_CALLS:
            calls.append(tool_call(block.get("name"), block.get("input") or {}))
    return Reply(text=cut("".join(text), MAX_TEXT_CHARS), tool_calls=calls)
