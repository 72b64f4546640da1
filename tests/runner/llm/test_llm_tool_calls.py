"""The llm agent's checks of what the model sends, without a sandbox or a provider.

A model's reply is hostile data: whatever shape its tool calls have, the session explains the
mistake to the model (or elides it from the context) and never fails as a harness fault.
"""

from __future__ import annotations

import json

import pytest

from runner.llm.conversation import ELIDED, conversation_chars, fit_context
from runner.llm.tools import MalformedCall, parse_call


@pytest.mark.parametrize("name", [["run"], {"name": "run"}, None, 3])
def test_a_tool_name_that_is_not_text_is_a_malformed_call(name):
    raw = {"id": "c1", "function": {"name": name, "arguments": '{"command": "ls"}'}}
    with pytest.raises(MalformedCall, match="there is no tool"):
        parse_call(raw)


def test_a_well_formed_call_is_parsed():
    call = parse_call({"id": "c1", "function": {"name": "run", "arguments": '{"command": "ls"}'}})
    assert (call.id, call.name, call.arguments) == ("c1", "run", {"command": "ls"})


def _conversation(*calls: object) -> list[dict]:
    """System, task, an assistant turn with ``calls`` and its result, then the latest turn."""
    return [
        {"role": "system", "content": "system prompt"},
        {"role": "user", "content": "the task"},
        {"role": "assistant", "content": "", "tool_calls": list(calls)},
        {"role": "tool", "tool_call_id": "c1", "content": "ok"},
        {"role": "assistant", "content": "latest"},
    ]


def test_tool_calls_of_any_shape_are_counted_and_fitted():
    """Calls the model sent that are not objects (or whose function is not) count nothing."""
    messages = _conversation("run ls", {"id": "c2", "function": "run"}, {"id": "c3"})
    chars = len("system prompt") + len("the task") + len("ok") + len("latest")
    assert conversation_chars(messages) == chars
    fit_context(messages, 0)
    assert messages[3]["content"] == ELIDED
    assert messages[2]["tool_calls"] == ["run ls", {"id": "c2", "function": "run"}, {"id": "c3"}]


def test_write_file_arguments_sent_as_an_object_are_elided():
    """Some providers send a call's arguments as an object, not as JSON text."""
    arguments = {"path": "train.py", "content": "x" * 1000}
    call = {"id": "c1", "function": {"name": "write_file", "arguments": arguments}}
    messages = _conversation(call)
    fit_context(messages, 100)
    written = json.loads(messages[2]["tool_calls"][0]["function"]["arguments"])
    assert written == {"path": "train.py", "content": ELIDED}
    assert conversation_chars(messages) < len(arguments["content"])


DEEP = "[" * 100_000 + "]" * 100_000  # deeper than json's parser recurses


def test_arguments_nested_past_the_parsers_depth_are_a_malformed_call():
    raw = {"id": "c1", "function": {"name": "run", "arguments": DEEP}}
    with pytest.raises(MalformedCall, match="not valid JSON"):
        parse_call(raw)


def test_write_file_arguments_nested_past_the_parsers_depth_are_left_as_sent():
    call = {"id": "c1", "function": {"name": "write_file", "arguments": DEEP}}
    messages = _conversation(call)
    fit_context(messages, 0)
    assert messages[2]["tool_calls"][0]["function"]["arguments"] == DEEP
    assert messages[3]["content"] == ELIDED
