"""The llm agent's checks of what the model sends, without a sandbox or a provider.

A model's reply is hostile data: whatever shape its tool calls have, the session explains the
mistake to the model (or elides it from the context) and never fails as a harness fault.
"""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from runner.agents.drivers import TOOLHOST_DIR
from runner.agents.llm.conversation import ELIDED, conversation_chars, fit_context
from runner.agents.llm.session import LlmSession
from runner.agents.llm.tools import MalformedCall, ToolHostChannel, parse_call
from runner.sandbox.views import private_dir
from runner.specs import AgentSpec


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


# --------------------------------------------------------------------------- any text, both sides
#
# Whatever the model puts in a call (a lone surrogate, text that was never UTF-8, NULs, huge
# or non-finite numbers, megabytes of text), the harness answers with a tool result and the
# real tool host (here outside a sandbox: these calls touch nothing but their own folder)
# stays up. Commands are `: '<text>'`, a shell no-op, and paths stay under out/.

ANY_TEXT = st.text(st.characters(codec=None, categories=None), max_size=40)  # Cs included
HUGE = st.sampled_from(["x" * 200_000, "\ud800" * 50_000, "\0" * 10_000])
TEXT = ANY_TEXT | HUGE
NUMBER = (
    st.floats(allow_nan=True, allow_infinity=True)
    | st.integers(min_value=-(10**400), max_value=10**400)
    | st.sampled_from([1e999, -1e999, 10**400])
)
VALUE = st.recursive(
    st.none() | st.booleans() | NUMBER | TEXT,
    lambda inner: st.lists(inner, max_size=3),
    max_leaves=5,
)


def _name(text: str) -> str:
    return "out/" + text.replace("/", "_")  # any name, one level under out/


@st.composite
def tool_calls(draw: st.DrawFn) -> object:
    name = draw(st.sampled_from(["run", "write_file", "read_file", "finish"]) | ANY_TEXT)
    fields: dict[str, object] = {
        "run": {"command": ": " + shlex.quote(draw(TEXT))},
        "write_file": {"path": _name(draw(TEXT)), "content": draw(TEXT)},
        "read_file": {"path": _name(draw(TEXT))},
    }.get(name, {"summary": draw(TEXT)})
    if draw(st.booleans()):
        fields["timeout_seconds" if name == "run" else draw(ANY_TEXT)] = draw(VALUE)
    if draw(st.booleans()) and fields:
        fields.pop(draw(st.sampled_from(sorted(fields))))  # a missing argument
    encoding = draw(st.sampled_from(["ascii", "raw", "object", "garbage"]))
    if encoding == "garbage":
        arguments: object = draw(TEXT)
    elif encoding == "object":  # some providers send the object itself
        arguments = fields
    else:  # escaped (\\ud800), or the characters themselves; NaN/Infinity are not JSON
        arguments = json.dumps(fields, ensure_ascii=encoding == "ascii")
    return {
        "id": draw(ANY_TEXT),
        "type": "function",
        "function": {"name": name, "arguments": arguments},
    }


@pytest.fixture(scope="module")
def session_with_tool_host(tmp_path_factory) -> Iterator[tuple[LlmSession, subprocess.Popen]]:
    root = tmp_path_factory.mktemp("toolhost")
    (root / "work" / "out").mkdir(parents=True)
    agent = AgentSpec.model_validate(
        {
            "id": "llm-props",
            "kind": "llm",
            "title": "hostile tool calls",
            "harness": "tmlbench-llm",
            "model": {"provider": "stub", "model_id": "m"},
            "llm": {"base_url": "http://127.0.0.1:9/v1"},  # never called here
        }
    )
    control = private_dir("tmlbench-props-")
    session = LlmSession(agent, "task", 600, control / "tools.sock", root / "t.jsonl", None)
    session.deadline = time.monotonic() + 600
    toolhost = subprocess.Popen(
        [sys.executable, str(TOOLHOST_DIR / "toolhost.py"), str(control / "tools.sock")],
        cwd=root / "work",
        stdout=subprocess.DEVNULL,
        start_new_session=True,
    )
    session._conn = session._accept()
    session._channel = ToolHostChannel(session._conn, session._frame_cap)
    yield session, toolhost
    session._send_exit()
    assert toolhost.wait(timeout=10) == 0  # it never crashed, and it left when asked
    session.stop()
    shutil.rmtree(control, ignore_errors=True)


# 300 generated calls per run, against one real tool host.
@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(raw=tool_calls())
def test_any_tool_call_gets_a_result_and_the_tool_host_stays_up(session_with_tool_host, raw):
    session, toolhost = session_with_tool_host
    result, finished = session._tool_result(raw)
    assert isinstance(result, str) and result
    assert finished == (raw["function"]["name"] == "finish" and not result.startswith("Error"))
    assert toolhost.poll() is None, "the tool host died"
    json.dumps(result)  # the result goes back to the model as JSON: always encodable


def test_a_lone_surrogate_is_a_tool_error_on_every_route(session_with_tool_host):
    session, toolhost = session_with_tool_host
    for name, arguments in [
        ("run", {"command": "echo \ud800"}),
        ("write_file", {"path": "out/a.txt", "content": "x\ud800"}),
        ("write_file", {"path": "out/\ud800.txt", "content": "x"}),
        ("read_file", {"path": "out/\udfff"}),
    ]:
        raw = {"id": "c", "function": {"name": name, "arguments": json.dumps(arguments)}}
        result, _ = session._tool_result(raw)
        assert result.startswith("Error: the text holds '\\ud") and "lone surrogate" in result
    assert not (session.transcript_path.parent / "work" / "out" / "a.txt").exists()
    assert toolhost.poll() is None
