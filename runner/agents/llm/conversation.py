"""The llm agent's conversation as a list of chat messages: checking replies, fitting the context."""

from __future__ import annotations

import json
from typing import Any, Literal, Required, TypedDict

from runner.agents.llm.client import ProviderFailure

ELIDED = "[older tool output elided to keep the conversation within the context limit]"


class ChatMessage(TypedDict, total=False):
    """One message of the conversation, in chat completions' shape, as it is sent each call."""

    role: Required[Literal["system", "user", "assistant", "tool"]]
    content: Required[str | list[object]]  # text, or the content parts the model sent
    tool_calls: list[object]  # the model's calls as it sent them (parse_call checks each)
    tool_call_id: str  # role "tool": the call this result answers


def message_of(reply: dict[str, Any]) -> dict[str, Any]:
    """The reply's message, checked: a malformed one is the provider's failure, not ours."""
    choices = reply.get("choices")
    choice = choices[0] if isinstance(choices, list) and choices else None
    message = choice.get("message") if isinstance(choice, dict) else None
    message = message or {}
    problem = None
    if not isinstance(choice, dict) or not isinstance(message, dict):
        problem = "choices[0].message is not an object"
    elif not isinstance(message.get("content") or "", (str, list)):  # text, or content parts
        problem = "the message's content is neither text nor a list of parts"
    elif not isinstance(message.get("tool_calls") or [], list):
        problem = "the message's tool_calls is not a list"
    if problem:
        raise ProviderFailure(f"the provider's reply is malformed: {problem}")
    return message


def assistant_message(message: dict[str, Any]) -> ChatMessage:
    """The reply as it goes back into the conversation (role, content, tool calls only)."""
    kept: ChatMessage = {"role": "assistant", "content": message.get("content") or ""}
    if message.get("tool_calls"):
        kept["tool_calls"] = message["tool_calls"]
    return kept


def conversation_chars(messages: list[ChatMessage]) -> int:
    """Characters of content and tool-call arguments: what the context limit counts."""
    total = 0
    for m in messages:
        total += len(m.get("content") or "")
        for call in m.get("tool_calls") or []:
            function = call.get("function") if isinstance(call, dict) else None
            if isinstance(function, dict):  # the model's calls, as it sent them: any shape
                total += len(str(function.get("arguments") or ""))
    return total


def fit_context(messages: list[ChatMessage], limit: int) -> None:
    """Elide the oldest tool outputs (and old file contents the model wrote) until under limit.

    The system prompt, the task, and the latest exchange (the last assistant message and the
    results of its tool calls) are always kept whole.
    """
    if conversation_chars(messages) <= limit:
        return
    last_assistant = max(
        (i for i, m in enumerate(messages) if m["role"] == "assistant"), default=len(messages)
    )
    for m in messages[2:last_assistant]:
        if m["role"] == "tool" and m["content"] != ELIDED:
            m["content"] = ELIDED
        for call in m.get("tool_calls") or []:
            function = call.get("function") if isinstance(call, dict) else None
            if isinstance(function, dict) and function.get("name") == "write_file":
                args = _arguments(function.get("arguments"))
                if isinstance(args, dict) and args.get("content") not in (None, ELIDED):
                    args["content"] = ELIDED
                    function["arguments"] = json.dumps(args)
        if conversation_chars(messages) <= limit:
            return


def _arguments(value: object) -> object:
    """A call's arguments: JSON text parsed (None if it is not JSON), or the object some
    providers send instead of text (a copy)."""
    if isinstance(value, dict):
        return dict(value)
    if not isinstance(value, str):
        return None
    try:
        return json.loads(value or "{}")
    except (ValueError, RecursionError):
        return None


def truncate(text: str, limit: int) -> str:
    """``text`` within ``limit`` characters: its head and tail, saying how much was cut."""
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]}\n[... {len(text) - 2 * half} characters cut ...]\n{text[-half:]}"
