"""The three wire protocols: a neutral view of what a request says, and a reply rendered per protocol.

A request is read into ``Message``s and ``Tool``s whatever protocol carried it, so scripts and
expectations never depend on the wire format. A ``Reply`` (one step resolved for one request)
is rendered as OpenAI chat completions, the OpenAI Responses API or Anthropic Messages, either
as one JSON document or as the protocol's server-sent events.
"""

from __future__ import annotations

import json
import time
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

#: Characters per streamed delta: small, so a client must join several pieces.
_DELTA_CHARS = 24
_MAX_DELTAS = 8


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
        for m in _mappings(body.get("messages")):
            messages.extend(_anthropic_message(m))
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
) -> dict:
    """An error document in the shape of ``flavor`` (Anthropic's, or OpenAI's for both OpenAI APIs)."""
    kind = error_type or default_error_type(flavor, status)
    if flavor == ANTHROPIC_MESSAGES:
        return {"type": "error", "error": {"type": kind, "message": message}}
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}


# --- replies ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Reply:
    """A reply step resolved for one request: ids assigned, ready to render."""

    request_no: int
    model: str
    content: str | None
    calls: tuple[ToolCall, ...]  # every call has its call_id
    input_tokens: int
    output_tokens: int
    finish_reason: str  # chat completions' vocabulary: stop, tool_calls, length, ...


def call_id(protocol: str, request_no: int, index: int) -> str:
    prefix = "toolu" if protocol == ANTHROPIC_MESSAGES else "call"
    return f"{prefix}_{request_no:04d}_{index}"


def render_json(protocol: str, reply: Reply, body: Mapping[str, Any]) -> dict:
    """The non-streaming answer to ``body`` carrying ``reply``."""
    if protocol == OPENAI_CHAT:
        return _chat_completion(reply)
    if protocol == OPENAI_RESPONSES:
        return _response_object(reply, body, "completed", _responses_output(reply))
    return _anthropic_message_object(reply, _anthropic_content(reply))


def render_events(protocol: str, reply: Reply, body: Mapping[str, Any]) -> list[bytes]:
    """The streamed answer: server-sent events, each ready to write."""
    if protocol == OPENAI_CHAT:
        return [*(_sse(c) for c in _chat_chunks(reply, body)), b"data: [DONE]\n\n"]
    if protocol == OPENAI_RESPONSES:
        return [_sse(e, e["type"]) for e in _responses_events(reply, body)]
    events = _anthropic_events(reply)
    events.insert(1, {"type": "ping"})  # Anthropic pings right after message_start
    return [_sse(e, e["type"]) for e in events]


def _sse(data: Mapping[str, Any], event: str | None = None) -> bytes:
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {json.dumps(data, separators=(',', ':'))}\n\n".encode()


def pieces(text: str) -> list[str]:
    """``text`` cut into a few deltas (none for empty text)."""
    size = max(_DELTA_CHARS, -(-len(text) // _MAX_DELTAS))
    return [text[i : i + size] for i in range(0, len(text), size)]


# chat completions


def _chat_usage(reply: Reply) -> dict:
    return {
        "prompt_tokens": reply.input_tokens,
        "completion_tokens": reply.output_tokens,
        "total_tokens": reply.input_tokens + reply.output_tokens,
    }


def _chat_completion(reply: Reply) -> dict:
    message: dict[str, Any] = {"role": "assistant", "content": reply.content, "refusal": None}
    if reply.calls:
        message["tool_calls"] = [
            {
                "id": c.call_id,
                "type": "function",
                "function": {"name": c.name, "arguments": c.arguments},
            }
            for c in reply.calls
        ]
    return {
        "id": f"chatcmpl-stub-{reply.request_no:04d}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": reply.model,
        "choices": [
            {
                "index": 0,
                "message": message,
                "logprobs": None,
                "finish_reason": reply.finish_reason,
            }
        ],
        "usage": _chat_usage(reply),
    }


def _chat_chunks(reply: Reply, body: Mapping[str, Any]) -> list[dict]:
    options = body.get("stream_options")
    include_usage = isinstance(options, Mapping) and options.get("include_usage") is True
    base = {
        "id": f"chatcmpl-stub-{reply.request_no:04d}",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": reply.model,
        "system_fingerprint": None,
    }

    def chunk(delta: dict, finish_reason: str | None = None) -> dict:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
        return {**base, "choices": [choice]} | ({"usage": None} if include_usage else {})

    first = "" if reply.content else None
    chunks = [chunk({"role": "assistant", "content": first})]
    chunks += [chunk({"content": p}) for p in pieces(reply.content or "")]
    for i, c in enumerate(reply.calls):
        head = {"index": i, "id": c.call_id, "type": "function"}
        chunks.append(
            chunk({"tool_calls": [head | {"function": {"name": c.name, "arguments": ""}}]})
        )
        chunks += [
            chunk({"tool_calls": [{"index": i, "function": {"arguments": p}}]})
            for p in pieces(c.arguments)
        ]
    last = chunk({}, reply.finish_reason)
    if include_usage:  # OpenAI's way: one more chunk, with no choices, carries the usage
        return [*chunks, last, {**base, "choices": [], "usage": _chat_usage(reply)}]
    # Not asked: vLLM-style servers still put the usage on the last chunk, and gateways count it.
    return [*chunks, last | {"usage": _chat_usage(reply)}]


# responses API


def _responses_usage(reply: Reply) -> dict:
    return {
        "input_tokens": reply.input_tokens,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": reply.output_tokens,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": reply.input_tokens + reply.output_tokens,
    }


def _message_item(reply: Reply, status: str, text: str) -> dict:
    content = [] if status == "in_progress" else [_output_text(text)]
    return {
        "id": f"msg_stub{reply.request_no:04d}",
        "type": "message",
        "status": status,
        "role": "assistant",
        "content": content,
    }


def _output_text(text: str) -> dict:
    return {"type": "output_text", "text": text, "annotations": [], "logprobs": []}


def _function_item(reply: Reply, index: int, status: str, arguments: str) -> dict:
    c = reply.calls[index]
    return {
        "id": f"fc_stub{reply.request_no:04d}_{index}",
        "type": "function_call",
        "status": status,
        "call_id": c.call_id,
        "name": c.name,
        "arguments": arguments,
    }


def _responses_output(reply: Reply) -> list[dict]:
    output = [_message_item(reply, "completed", reply.content)] if reply.content else []
    return output + [
        _function_item(reply, i, "completed", c.arguments) for i, c in enumerate(reply.calls)
    ]


def _response_object(
    reply: Reply, body: Mapping[str, Any], status: str, output: list[dict]
) -> dict:
    finished = status in ("completed", "incomplete")
    if finished and reply.finish_reason == "length":
        status = "incomplete"
    tools = body.get("tools")
    return {
        "id": f"resp_stub{reply.request_no:04d}",
        "object": "response",
        "created_at": int(time.time()),
        "status": status,
        "background": False,
        "error": None,
        "incomplete_details": ({"reason": "max_output_tokens"} if status == "incomplete" else None),
        "instructions": body.get("instructions"),
        "max_output_tokens": body.get("max_output_tokens"),
        "model": reply.model,
        "output": output,
        "parallel_tool_calls": body.get("parallel_tool_calls", True),
        "previous_response_id": body.get("previous_response_id"),
        "reasoning": {"effort": None, "summary": None},
        "store": body.get("store", True),
        "temperature": body.get("temperature", 1.0),
        "text": {"format": {"type": "text"}},
        "tool_choice": body.get("tool_choice", "auto"),
        "tools": tools if isinstance(tools, list) else [],
        "top_p": body.get("top_p", 1.0),
        "truncation": "disabled",
        "usage": _responses_usage(reply) if finished else None,
        "user": None,
        "metadata": {},
    }


def _responses_events(reply: Reply, body: Mapping[str, Any]) -> list[dict]:
    events: list[dict] = []

    def emit(kind: str, **fields: Any) -> None:
        events.append({"type": kind, "sequence_number": len(events), **fields})

    emit("response.created", response=_response_object(reply, body, "in_progress", []))
    emit("response.in_progress", response=_response_object(reply, body, "in_progress", []))
    index = 0
    if reply.content:
        item_id = f"msg_stub{reply.request_no:04d}"
        at = {"item_id": item_id, "output_index": index, "content_index": 0}
        emit(
            "response.output_item.added",
            output_index=index,
            item=_message_item(reply, "in_progress", ""),
        )
        emit("response.content_part.added", **at, part=_output_text(""))
        for p in pieces(reply.content):
            emit("response.output_text.delta", **at, delta=p, logprobs=[])
        emit("response.output_text.done", **at, text=reply.content, logprobs=[])
        emit("response.content_part.done", **at, part=_output_text(reply.content))
        emit(
            "response.output_item.done",
            output_index=index,
            item=_message_item(reply, "completed", reply.content),
        )
        index += 1
    for i, c in enumerate(reply.calls):
        item_id = f"fc_stub{reply.request_no:04d}_{i}"
        at = {"item_id": item_id, "output_index": index}
        emit(
            "response.output_item.added",
            output_index=index,
            item=_function_item(reply, i, "in_progress", ""),
        )
        for p in pieces(c.arguments):
            emit("response.function_call_arguments.delta", **at, delta=p)
        emit("response.function_call_arguments.done", **at, name=c.name, arguments=c.arguments)
        emit(
            "response.output_item.done",
            output_index=index,
            item=_function_item(reply, i, "completed", c.arguments),
        )
        index += 1
    final = _response_object(reply, body, "completed", _responses_output(reply))
    emit(f"response.{final['status']}", response=final)
    return events


# anthropic messages

_STOP_REASONS = {
    "stop": "end_turn",
    "tool_calls": "tool_use",
    "length": "max_tokens",
    "content_filter": "refusal",
}


def _anthropic_input(arguments: str) -> dict:
    """A tool_use ``input`` object; malformed scripted arguments become ``{}`` (they stream as-is)."""
    try:
        value = json.loads(arguments)
    except json.JSONDecodeError:
        return {}
    return value if isinstance(value, dict) else {}


def _anthropic_content(reply: Reply) -> list[dict]:
    content = [{"type": "text", "text": reply.content}] if reply.content else []
    return content + [
        {
            "type": "tool_use",
            "id": c.call_id,
            "name": c.name,
            "input": _anthropic_input(c.arguments),
        }
        for c in reply.calls
    ]


def _anthropic_message_object(reply: Reply, content: list[dict], *, started: bool = False) -> dict:
    stop_reason = _STOP_REASONS.get(reply.finish_reason, reply.finish_reason)
    usage = {
        "input_tokens": reply.input_tokens,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
        # message_start carries a token or so of output, as Anthropic's does; message_delta the total.
        "output_tokens": min(1, reply.output_tokens) if started else reply.output_tokens,
    }
    return {
        "id": f"msg_stub{reply.request_no:04d}",
        "type": "message",
        "role": "assistant",
        "model": reply.model,
        "content": content,
        "stop_reason": None if started else stop_reason,
        "stop_sequence": None,
        "usage": usage,
    }


def _anthropic_events(reply: Reply) -> list[dict]:
    events: list[dict] = [
        {"type": "message_start", "message": _anthropic_message_object(reply, [], started=True)}
    ]
    blocks: list[tuple[dict, dict, list[str]]] = []  # (start block, delta template, pieces)
    if reply.content:
        blocks.append(({"type": "text", "text": ""}, {"type": "text_delta"}, pieces(reply.content)))
    for c in reply.calls:
        start = {"type": "tool_use", "id": c.call_id, "name": c.name, "input": {}}
        blocks.append((start, {"type": "input_json_delta"}, pieces(c.arguments)))
    for index, (start, delta, parts) in enumerate(blocks):
        events.append({"type": "content_block_start", "index": index, "content_block": start})
        key = "text" if delta["type"] == "text_delta" else "partial_json"
        events += [
            {"type": "content_block_delta", "index": index, "delta": delta | {key: p}}
            for p in parts
        ]
        events.append({"type": "content_block_stop", "index": index})
    stop_reason = _STOP_REASONS.get(reply.finish_reason, reply.finish_reason)
    events.append(
        {
            "type": "message_delta",
            "delta": {"stop_reason": stop_reason, "stop_sequence": None},
            "usage": {"output_tokens": reply.output_tokens},
        }
    )
    events.append({"type": "message_stop"})
    return events
