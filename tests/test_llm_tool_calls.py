"""The llm agent's checks of what the model sends, without a sandbox or a provider.

A model's reply is hostile data: whatever shape its tool calls have, the session explains the
mistake to the model (or elides it from the context) and never fails as a harness fault.
"""

from __future__ import annotations

import pytest

from runner.llm.tools import MalformedCall, parse_call


@pytest.mark.parametrize("name", [["run"], {"name": "run"}, None, 3])
def test_a_tool_name_that_is_not_text_is_a_malformed_call(name):
    raw = {"id": "c1", "function": {"name": name, "arguments": '{"command": "ls"}'}}
    with pytest.raises(MalformedCall, match="there is no tool"):
        parse_call(raw)


def test_a_well_formed_call_is_parsed():
    call = parse_call({"id": "c1", "function": {"name": "run", "arguments": '{"command": "ls"}'}})
    assert (call.id, call.name, call.arguments) == ("c1", "run", {"command": "ls"})
