"""The three wire protocols' requests: a neutral view of what a request says, and its checks.

A request is read into ``Message``s and ``Tool``s whatever protocol carried it, so scripts and
expectations never depend on the wire format. Requests no real provider would accept are
refused before the script (``check_request``), with errors in each provider's shape. How a
reply is rendered per protocol is in :mod:`.replies`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from http import HTTPStatus
from typing import Any

OPENAI_CHAT = "openai-chat"
OPENAI_RESPONSES = "openai-responses"
ANTHROPIC_MESSAGES = "anthropic-messages"
PROTOCOLS = (OPENAI_CHAT, OPENAI_RESPONSES, ANTHROPIC_MESSAGES)

#: POST path -> the protocol it speaks.
ENDPOINTS = {
    "/v1/chat/completions": OPENAI_CHAT,
    "/v1/responses": OPENAI_RESPONSES,
    "/v1/messages": ANTHROPIC_MESSAGES,
}

#: The text parts of list contents, in any of the three protocols.
_TEXT_PART_TYPES = ("text", "input_text", "output_text")


# --- the neutral view of a request ------------------------------------------------------------


@dataclass(frozen=True)
class ToolCall:
    """A tool call the assistant made, as it appears in a later request's history."""

    name: str
    arguments: str  # JSON text as sent (an Anthropic ``input`` object is dumped to JSON)
    call_id: str | None = None


@dataclass(frozen=True)
class Message:
    """One turn of the conversation a request carries.

    ``role`` is ``system`` (chat system/developer messages, Responses ``instructions``,
    Anthropic ``system``), ``user``, ``assistant`` or ``tool`` (a tool's result: a chat
    ``tool`` message, a Responses ``function_call_output``, an Anthropic ``tool_result``).
    """

    role: str
    text: str
    calls: tuple[ToolCall, ...] = ()
    call_id: str | None = None  # for role "tool": the call this result answers


@dataclass(frozen=True)
class Tool:
    """A tool the client offers: its name and the JSON schema of its arguments."""

    name: str
    parameters: Mapping[str, Any] = field(default_factory=dict)
    kind: str = "function"  # "function", or a built-in tool type such as "local_shell"


@dataclass
class ReceivedRequest:
    """One HTTP request as the server saw it; API keys are never kept."""

    method: str
    path: str
    protocol: str | None  # one of PROTOCOLS; None for /v1/models and unknown paths
    headers: dict[str, str]  # Authorization, x-api-key and api-key values replaced by "REDACTED"
    authorized: bool
    auth_header: str | None  # "authorization" or "x-api-key": the header that carried the key
    body: Any  # parsed JSON; None when absent, not JSON, or dropped to bound memory
    stream: bool
    status: int = 0
    step: int | None = None  # script index served; None if rejected early or answered by `then`
    messages: list[Message] = field(default_factory=list)
    tools: list[Tool] = field(default_factory=list)

    @property
    def message_count(self) -> int:
        return len(self.messages)

    @property
    def text(self) -> str:
        """Every message's text, one per line (tool-call arguments not included)."""
        return "\n".join(m.text for m in self.messages)

    @property
    def message_chars(self) -> int:
        """Characters of all message texts (tool-call arguments not included)."""
        return sum(len(m.text) for m in self.messages)


def content_text(content: Any) -> str:
    """The text of a message content: a string, or the text parts of a list."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            str(p.get("text") or "")
            for p in content
            if isinstance(p, Mapping) and p.get("type") in _TEXT_PART_TYPES
        )
    return ""


def _mappings(value: Any) -> list[Mapping[str, Any]]:
    return [v for v in value if isinstance(v, Mapping)] if isinstance(value, list) else []


def _role(role: Any) -> str:
    return "system" if role in ("system", "developer") else str(role or "user")


def read_messages(protocol: str | None, body: Any) -> list[Message]:
    """The conversation in ``body``, in the neutral form."""
    if not isinstance(body, Mapping):
        return []
    if protocol == OPENAI_CHAT:
        return [_chat_message(m) for m in _mappings(body.get("messages"))]
    if protocol == OPENAI_RESPONSES:
        messages = []
        if body.get("instructions"):
            messages.append(Message("system", content_text(body["instructions"])))
        items = body.get("input")
        if isinstance(items, str):
            return [*messages, Message("user", items)]
        for m in map(_responses_item, _mappings(items)):
            if m is not None and m.calls and messages and messages[-1].role == "assistant":
                # One assistant turn is several items (text, calls): read it as one message.
                last = messages.pop()
                m = replace(last, calls=last.calls + m.calls)
            if m is not None:
                messages.append(m)
        return messages
    if protocol == ANTHROPIC_MESSAGES:
        messages = []
        if body.get("system"):
            messages.append(Message("system", content_text(body["system"])))
        for message in _mappings(body.get("messages")):
            messages.extend(_anthropic_message(message))
        return messages
    return []


def _chat_message(m: Mapping[str, Any]) -> Message:
    role = "tool" if m.get("role") in ("tool", "function") else _role(m.get("role"))
    calls = tuple(
        ToolCall(
            str(fn.get("name") or ""),
            str(fn.get("arguments") or ""),
            c.get("id"),
        )
        for c in _mappings(m.get("tool_calls"))
        if isinstance(fn := c.get("function"), Mapping)
    )
    return Message(role, content_text(m.get("content")), calls, m.get("tool_call_id"))


def _responses_item(item: Mapping[str, Any]) -> Message | None:
    kind = item.get("type", "message")
    if kind == "message":
        return Message(_role(item.get("role")), content_text(item.get("content")))
    if kind in ("function_call", "custom_tool_call"):
        arguments = item.get("arguments", item.get("input", ""))
        call = ToolCall(str(item.get("name") or ""), str(arguments or ""), item.get("call_id"))
        return Message("assistant", "", (call,))
    if kind in ("function_call_output", "custom_tool_call_output", "local_shell_call_output"):
        output = item.get("output")
        return Message("tool", content_text(output), call_id=item.get("call_id"))
    return None  # reasoning, web search and other items carry no conversation text


def _anthropic_message(m: Mapping[str, Any]) -> list[Message]:
    role, content = _role(m.get("role")), m.get("content")
    if isinstance(content, str):
        return [Message(role, content)]
    blocks = _mappings(content)
    results = [
        Message("tool", content_text(b.get("content")), call_id=b.get("tool_use_id"))
        for b in blocks
        if b.get("type") == "tool_result"
    ]
    calls = tuple(
        ToolCall(str(b.get("name") or ""), json.dumps(b.get("input") or {}), b.get("id"))
        for b in blocks
        if b.get("type") == "tool_use"
    )
    text = content_text(blocks)
    if results and not text and not calls:
        return results
    return [*results, Message(role, text, calls)]


def read_tools(protocol: str | None, body: Any) -> list[Tool]:
    """The tools ``body`` offers, in the neutral form."""
    if not isinstance(body, Mapping):
        return []
    tools = []
    for t in _mappings(body.get("tools")):
        if isinstance(t.get("function"), Mapping):  # chat completions (also tolerated elsewhere)
            fn = t["function"]
            tools.append(Tool(str(fn.get("name") or ""), fn.get("parameters") or {}))
        elif protocol == ANTHROPIC_MESSAGES:
            schema = t.get("input_schema")
            if schema is None and str(t.get("type", "")).startswith("bash_"):
                # Anthropic's client-side bash tool: no schema is sent, the input is {command}.
                schema = {"type": "object", "properties": {"command": {"type": "string"}}}
            tools.append(Tool(str(t.get("name") or ""), schema or {}))
        elif t.get("type") == "function":
            tools.append(Tool(str(t.get("name") or ""), t.get("parameters") or {}))
        elif t.get("type"):
            tools.append(Tool(str(t.get("name") or t["type"]), {}, kind=str(t["type"])))
    return tools


# --- requests rejected before the script ------------------------------------------------------


@dataclass(frozen=True)
class Problem:
    """Why a request is refused before it reaches the script."""

    status: int
    message: str
    param: str | None = None
    code: str | None = None


def check_request(protocol: str, body: Any, raw: bytes) -> Problem | None:
    """A Problem if ``body`` is not a well-formed request of ``protocol`` (the model is not checked)."""
    if not isinstance(body, Mapping):
        what = "empty" if not raw else "not a JSON object"
        return Problem(400, f"The request body is {what}; send a JSON object.")
    required = {
        OPENAI_CHAT: ("model", "messages"),
        OPENAI_RESPONSES: ("model", "input"),
        ANTHROPIC_MESSAGES: ("model", "max_tokens", "messages"),
    }[protocol]
    for name in required:
        if name not in body:
            return Problem(
                400, f"Missing required parameter: '{name}'.", name, "missing_required_parameter"
            )
    if protocol == OPENAI_RESPONSES:
        if not isinstance(body["input"], str | list):
            return Problem(400, "'input' must be a string or an array of items.", "input")
    elif not isinstance(body["messages"], list) or not body["messages"]:
        return Problem(400, "'messages' must be a non-empty array.", "messages")
    if protocol == ANTHROPIC_MESSAGES and not (
        isinstance(body["max_tokens"], int) and body["max_tokens"] > 0
    ):
        return Problem(400, "max_tokens: must be a positive integer.", "max_tokens")
    if "stream" in body and not isinstance(body["stream"], bool):
        return Problem(400, "'stream' must be a boolean.", "stream")
    return None


# --- errors -------------------------------------------------------------------------------------


def status_phrase(status: int) -> str:
    if status == 529:
        return "Overloaded"  # Anthropic's status, unknown to http.HTTPStatus
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "Error"


def default_error_type(flavor: str, status: int) -> str:
    """The ``type`` a real provider of ``flavor`` puts in an error of ``status``."""
    if flavor == ANTHROPIC_MESSAGES:
        return {
            401: "authentication_error",
            402: "billing_error",
            403: "permission_error",
            404: "not_found_error",
            413: "request_too_large",
            429: "rate_limit_error",
            504: "timeout_error",
            529: "overloaded_error",
        }.get(status, "api_error" if status >= 500 else "invalid_request_error")
    if status == 429:
        return "rate_limit_error"
    if status == 402:
        return "insufficient_quota"
    return "server_error" if status >= 500 else "invalid_request_error"


def error_body(
    flavor: str,
    status: int,
    message: str,
    error_type: str | None = None,
    code: str | None = None,
    param: str | None = None,
) -> dict[str, object]:
    """An error document in the shape of ``flavor`` (Anthropic's, or OpenAI's for both OpenAI APIs)."""
    kind = error_type or default_error_type(flavor, status)
    if flavor == ANTHROPIC_MESSAGES:
        return {"type": "error", "error": {"type": kind, "message": message}}
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}
