"""What the gateway understands of a model call's request, in the three provider protocols.

Everything here works on bytes and JSON that came from the sandbox, so every function is
total: odd shapes give ``None``/empty results, never an exception. Which requests are model
calls is :mod:`.routes`' table.

* :func:`prepare_body` parses a model call's JSON body and, for an OpenAI chat stream, asks
  for the final usage chunk (``stream_options.include_usage``).
* :func:`summarize_request` keeps what the transcript shows of a request.
"""

from __future__ import annotations

import json
from typing import Any, Literal

Protocol = Literal["openai-chat", "openai-responses", "anthropic-messages"]
PROTOCOLS: tuple[str, ...] = Protocol.__args__  # type: ignore[attr-defined]

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


def shrink(value: object, max_str: int = 4000, max_items: int = 50, depth: int = 8) -> object:
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
        out: dict[str, object] = {}
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
    name = function.get("name") if isinstance(function, dict) else None
    if isinstance(name, str):
        return name
    name = tool.get("name") or tool.get("type")
    return name if isinstance(name, str) else None


def summarize_request(kind: Protocol, parsed: Any, max_str: int = 4000) -> dict[str, object] | None:
    """What the transcript keeps of a model call's request (None if it was not a JSON object).

    ``{model, stream, ..., "n_messages": N, "messages": [the last few messages or input
    items], "tools": [names]}``; Responses' ``input`` is shown as ``messages`` too.
    """
    if not isinstance(parsed, dict):
        return None
    out: dict[str, object] = {k: shrink(parsed[k], 500) for k in KEPT_REQUEST_KEYS if k in parsed}
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
