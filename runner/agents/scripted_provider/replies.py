"""A reply rendered per protocol: OpenAI chat completions, the OpenAI Responses API or
Anthropic Messages, either as one JSON document or as the protocol's server-sent events.

A ``Reply`` is one script step resolved for one request (ids assigned, ready to render).
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .protocols import (
    ANTHROPIC_MESSAGES,
    OPENAI_CHAT,
    OPENAI_RESPONSES,
    ToolCall,
    default_error_type,
)
from .steps import Step

#: Characters per streamed delta: small, so a client must join several pieces.
_DELTA_CHARS = 24
_MAX_DELTAS = 8


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


def resolve_reply(step: Step, protocol: str, request_no: int, model: str) -> Reply:
    """The reply ``step`` makes to request ``request_no``: tool call ids assigned."""
    calls = tuple(
        ToolCall(
            c["function"]["name"],
            c["function"]["arguments"],
            c.get("id") or call_id(protocol, request_no, i),
        )
        for i, c in enumerate(step.get("tool_calls") or [])
    )
    input_tokens, output_tokens = (int(n) for n in step.get("usage", (0, 0)))
    return Reply(
        request_no=request_no,
        model=model,
        content=step.get("content"),
        calls=calls,
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        finish_reason=step.get("finish_reason") or ("tool_calls" if calls else "stop"),
    )


def render_json(protocol: str, reply: Reply, body: Mapping[str, Any]) -> dict[str, object]:
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
        return [_typed_sse(e) for e in _responses_events(reply, body)]
    events = _anthropic_events(reply)
    events.insert(1, {"type": "ping"})  # Anthropic pings right after message_start
    return [_typed_sse(e) for e in events]


def partial_events(
    protocol: str, reply: Reply, body: Mapping[str, Any], after: int
) -> tuple[list[bytes], tuple[int, int]]:
    """The start of ``reply``'s stream, cut after its first ``after`` deltas, and the usage
    (input, output tokens) those events reported.

    The cut always falls before the terminal part (chat's finishing chunk and ``[DONE]``,
    ``response.completed``, Anthropic's ``message_delta``/``message_stop``); ``after=0``
    keeps only the opening events (chat's role chunk, ``response.created``/``in_progress``,
    ``message_start`` and its ping). Only Anthropic reports usage that early.
    """
    if protocol == OPENAI_CHAT:
        chunks = _chat_chunks(reply, body)
        closing = next(i for i, c in enumerate(chunks) if c["choices"] and _finished(c))
        events, opening = [_sse(c) for c in chunks], 1
        deltas = list(range(opening, closing))
        usage = (0, 0)
    elif protocol == OPENAI_RESPONSES:
        typed = _responses_events(reply, body)
        events, opening, closing = [_typed_sse(e) for e in typed], 2, len(typed) - 1
        deltas = [i for i, e in enumerate(typed) if str(e["type"]).endswith(".delta")]
        usage = (0, 0)
    else:
        typed = _anthropic_events(reply)
        typed.insert(1, {"type": "ping"})
        events, opening = [_typed_sse(e) for e in typed], 2
        closing = next(i for i, e in enumerate(typed) if e["type"] == "message_delta")
        deltas = [i for i, e in enumerate(typed) if e["type"] == "content_block_delta"]
        usage = (reply.input_tokens, min(1, reply.output_tokens))  # message_start's usage
    if after == 0:
        end = opening
    elif len(deltas) >= after:
        end = deltas[after - 1] + 1
    else:
        end = closing
    return events[:end], usage


def _finished(chunk: Mapping[str, Any]) -> bool:
    choices = chunk["choices"]
    return isinstance(choices, list) and choices[0].get("finish_reason") is not None


def error_event(
    protocol: str,
    reply: Reply,
    body: Mapping[str, Any],
    sequence_number: int,
    status: int,
    message: str,
    error_type: str | None,
    code: str | None,
) -> bytes:
    """How ``protocol`` says, inside a 200 stream, that the reply failed with ``status``."""
    kind = error_type or default_error_type(protocol, status)
    if protocol == OPENAI_CHAT:  # OpenAI's error chunk: the SDK raises APIError on it
        return _sse({"error": {"message": message, "type": kind, "param": None, "code": code}})
    if protocol == OPENAI_RESPONSES:  # the terminal event of a failed response
        failed = _response_object(reply, body, "failed", [])
        failed["error"] = {"code": code or kind, "message": message}
        event = {"type": "response.failed", "sequence_number": sequence_number}
        return _typed_sse(event | {"response": failed})
    return _typed_sse({"type": "error", "error": {"type": kind, "message": message}})


def _sse(data: Mapping[str, object], event: str | None = None) -> bytes:
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {json.dumps(data, separators=(',', ':'))}\n\n".encode()


def _typed_sse(data: Mapping[str, object]) -> bytes:
    """An event named on its ``event:`` line by its ``type`` (Responses API, Anthropic)."""
    kind = data["type"]
    return _sse(data, kind if isinstance(kind, str) else None)


def pieces(text: str) -> list[str]:
    """``text`` cut into a few deltas (none for empty text)."""
    size = max(_DELTA_CHARS, -(-len(text) // _MAX_DELTAS))
    return [text[i : i + size] for i in range(0, len(text), size)]


# chat completions


def _chat_usage(reply: Reply) -> dict[str, int]:
    return {
        "prompt_tokens": reply.input_tokens,
        "completion_tokens": reply.output_tokens,
        "total_tokens": reply.input_tokens + reply.output_tokens,
    }


def _chat_completion(reply: Reply) -> dict[str, object]:
    message: dict[str, object] = {"role": "assistant", "content": reply.content, "refusal": None}
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


def _chat_chunks(reply: Reply, body: Mapping[str, Any]) -> list[dict[str, object]]:
    options = body.get("stream_options")
    include_usage = isinstance(options, Mapping) and options.get("include_usage") is True
    base = {
        "id": f"chatcmpl-stub-{reply.request_no:04d}",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": reply.model,
        "system_fingerprint": None,
    }

    def chunk(delta: dict[str, object], finish_reason: str | None = None) -> dict[str, object]:
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


def _responses_usage(reply: Reply) -> dict[str, object]:
    return {
        "input_tokens": reply.input_tokens,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": reply.output_tokens,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": reply.input_tokens + reply.output_tokens,
    }


def _message_item(reply: Reply, status: str, text: str) -> dict[str, object]:
    content = [] if status == "in_progress" else [_output_text(text)]
    return {
        "id": f"msg_stub{reply.request_no:04d}",
        "type": "message",
        "status": status,
        "role": "assistant",
        "content": content,
    }


def _output_text(text: str) -> dict[str, object]:
    return {"type": "output_text", "text": text, "annotations": [], "logprobs": []}


def _function_item(reply: Reply, index: int, status: str, arguments: str) -> dict[str, object]:
    c = reply.calls[index]
    return {
        "id": f"fc_stub{reply.request_no:04d}_{index}",
        "type": "function_call",
        "status": status,
        "call_id": c.call_id,
        "name": c.name,
        "arguments": arguments,
    }


def _responses_output(reply: Reply) -> list[dict[str, object]]:
    output = [_message_item(reply, "completed", reply.content)] if reply.content else []
    return output + [
        _function_item(reply, i, "completed", c.arguments) for i, c in enumerate(reply.calls)
    ]


def _response_object(
    reply: Reply, body: Mapping[str, Any], status: str, output: list[dict[str, object]]
) -> dict[str, object]:
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


def _responses_events(reply: Reply, body: Mapping[str, Any]) -> list[dict[str, object]]:
    events: list[dict[str, object]] = []

    def emit(kind: str, **fields: object) -> None:
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


def _anthropic_input(arguments: str) -> dict[str, object]:
    """A tool_use ``input`` object; malformed scripted arguments become ``{}`` (they stream as-is)."""
    try:
        value = json.loads(arguments)
    except json.JSONDecodeError:
        return {}
    return value if isinstance(value, dict) else {}


def _anthropic_content(reply: Reply) -> list[dict[str, object]]:
    content: list[dict[str, object]] = (
        [{"type": "text", "text": reply.content}] if reply.content else []
    )
    return content + [
        {
            "type": "tool_use",
            "id": c.call_id,
            "name": c.name,
            "input": _anthropic_input(c.arguments),
        }
        for c in reply.calls
    ]


def _anthropic_message_object(
    reply: Reply, content: list[dict[str, object]], *, started: bool = False
) -> dict[str, object]:
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


def _anthropic_events(reply: Reply) -> list[dict[str, object]]:
    events: list[dict[str, object]] = [
        {"type": "message_start", "message": _anthropic_message_object(reply, [], started=True)}
    ]
    # (start block, delta template, pieces)
    blocks: list[tuple[dict[str, object], dict[str, object], list[str]]] = []
    if reply.content:
        blocks.append(({"type": "text", "text": ""}, {"type": "text_delta"}, pieces(reply.content)))
    for c in reply.calls:
        start: dict[str, object] = {
            "type": "tool_use",
            "id": c.call_id,
            "name": c.name,
            "input": {},
        }
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
