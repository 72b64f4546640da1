"""The scripted provider (runner/agents/scripted_provider), driven over real HTTP on loopback.

Requests go out with urllib in the shapes the official clients send, and through the official
``openai`` and ``anthropic`` clients (dev dependencies): every protocol, streamed and not, must
parse in the client that defines it. The scripted scientist is checked call shape by call
shape, and its command is run on a prepared twin and graded.
"""

from __future__ import annotations

import json
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import anthropic
import numpy as np
import openai
import pandas as pd
import pytest

from runner.agents.scripted_provider import (
    ANTHROPIC_MESSAGES,
    OPENAI_CHAT,
    OPENAI_RESPONSES,
    ReceivedRequest,
    ScriptedProvider,
    Tool,
    call,
    error,
    hang,
    load_conversation,
    repeat,
    reply,
    save_conversation,
    shell_call_arguments,
    shell_tool,
    solve_command,
    solve_task_script,
    task_solver,
)
from runner.agents.scripted_provider.scientist import MARKER
from runner.agents.scripted_provider.transport import RequestHandler
from runner.config import REPO_ROOT
from runner.grading import grade_submission
from runner.specs.registry import load_task
from tests.support.prepared_tasks import prepared

pytestmark = pytest.mark.timeout(60)

CONVERSATIONS = REPO_ROOT / "tests" / "conversations"
KEY = "sk-test-key"
MODEL = "stub/model"

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": name,
            "description": f"the {name} tool",
            "parameters": {"type": "object", "properties": props, "required": required},
        },
    }
    for name, props, required in [
        (
            "write_file",
            {"path": {"type": "string"}, "content": {"type": "string"}},
            ["path", "content"],
        ),
        (
            "run",
            {"command": {"type": "string"}, "timeout_seconds": {"type": "integer"}},
            ["command"],
        ),
        ("read_file", {"path": {"type": "string"}}, ["path"]),
        ("finish", {"summary": {"type": "string"}}, ["summary"]),
    ]
]


def chat_body(messages: list[dict] | None = None, **extra: Any) -> dict:
    body = {
        "model": MODEL,
        "messages": messages or [{"role": "user", "content": "Solve the task."}],
        "tools": TOOLS,
    }
    return body | extra


def send(
    provider: ScriptedProvider,
    body: Any = None,
    *,
    path: str = "/chat/completions",
    key: str | None = KEY,
    raw: bytes | None = None,
    method: str | None = None,
    timeout: float = 10,
    headers: dict[str, str] | None = None,
) -> tuple[int, dict[str, str], Any]:
    """(status, headers, parsed JSON) for one request, errors included."""
    data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
    request = urllib.request.Request(provider.base_url + path, data=data, method=method)
    request.add_header("Content-Type", "application/json")
    request.add_header("User-Agent", "OpenAI/Python 1.0 (urllib test)")
    if key is not None:
        request.add_header("Authorization", f"Bearer {key}")
    for name, value in (headers or {}).items():
        request.add_header(name, value)
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, dict(response.headers), json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), json.loads(exc.read())


def assert_openai_error(payload: Any, code: str | None = None) -> dict:
    assert set(payload) == {"error"}
    err = payload["error"]
    assert isinstance(err["message"], str) and err["message"]
    assert isinstance(err["type"], str) and err["type"]
    assert "code" in err
    if code is not None:
        assert err["code"] == code
    return err


def stub_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("scripted-provider")]


# --- replies ------------------------------------------------------------------------------


def test_text_reply_is_a_chat_completion() -> None:
    with ScriptedProvider([reply("Hello.", usage=(12, 3))]) as provider:
        assert provider.base_url == f"http://127.0.0.1:{provider.port}/v1"
        status, _, payload = send(provider, chat_body())
        records = provider.requests

    assert status == 200
    assert payload["object"] == "chat.completion"
    assert payload["id"].startswith("chatcmpl-")
    assert payload["model"] == MODEL
    assert isinstance(payload["created"], int)
    (choice,) = payload["choices"]
    assert choice["index"] == 0
    assert choice["finish_reason"] == "stop"
    assert choice["message"]["role"] == "assistant"
    assert choice["message"]["content"] == "Hello."
    assert "tool_calls" not in choice["message"]
    assert payload["usage"] == {"prompt_tokens": 12, "completion_tokens": 3, "total_tokens": 15}

    (record,) = records
    assert (record.method, record.path, record.status, record.step) == (
        "POST",
        "/v1/chat/completions",
        200,
        0,
    )
    assert record.authorized is True
    assert record.headers["Authorization"] == "REDACTED"
    assert KEY not in repr(record)
    assert record.body["model"] == MODEL
    assert record.message_count == 1
    assert record.message_chars == len("Solve the task.")


def test_tool_calls_use_the_openai_format() -> None:
    step = reply(
        "Writing it.",
        [call("write_file", {"path": "a.py", "content": "print(1)"}), call("run", '{"command": ')],
        usage=(5, 5),
    )
    with ScriptedProvider([step, step]) as provider:
        _, _, first = send(provider, chat_body())
        _, _, second = send(provider, chat_body())

    message = first["choices"][0]["message"]
    assert first["choices"][0]["finish_reason"] == "tool_calls"
    assert message["content"] == "Writing it."
    write, run = message["tool_calls"]
    assert set(write) == {"id", "type", "function"}
    assert write["type"] == "function"
    assert write["function"]["name"] == "write_file"
    assert isinstance(write["function"]["arguments"], str)
    assert json.loads(write["function"]["arguments"]) == {"path": "a.py", "content": "print(1)"}
    assert run["function"]["arguments"] == '{"command": '  # malformed, sent as scripted
    ids = [c["id"] for c in message["tool_calls"] + second["choices"][0]["message"]["tool_calls"]]
    assert all(i.startswith("call_") for i in ids)
    assert len(set(ids)) == 4, "every served tool call needs its own id"


def test_explicit_call_id_and_finish_reason_are_kept() -> None:
    step = reply(tool_calls=[call("finish", {"summary": "ok"}, call_id="call_fixed")])
    with ScriptedProvider([step, reply("cut", finish_reason="length")]) as provider:
        _, _, payload = send(provider, chat_body())
        _, _, cut = send(provider, chat_body())
    assert payload["choices"][0]["message"]["tool_calls"][0]["id"] == "call_fixed"
    assert payload["choices"][0]["message"]["content"] is None
    assert cut["choices"][0]["finish_reason"] == "length"


def test_reply_delay_is_honoured() -> None:
    with ScriptedProvider([reply("slow", delay=0.4)]) as provider:
        start = time.monotonic()
        status, _, _ = send(provider, chat_body())
        elapsed = time.monotonic() - start
    assert status == 200
    assert elapsed >= 0.4


# --- rejected requests ----------------------------------------------------------------------


@pytest.mark.parametrize("key", [None, "sk-wrong", ""])
def test_bad_or_missing_key_is_401_and_consumes_no_step(key: str | None) -> None:
    with ScriptedProvider([reply("first")]) as provider:
        status, _, payload = send(provider, chat_body(), key=key)
        ok_status, _, ok = send(provider, chat_body())
        records = provider.requests
    assert status == 401
    assert assert_openai_error(payload, "invalid_api_key")["type"] == "invalid_request_error"
    assert ok_status == 200 and ok["choices"][0]["message"]["content"] == "first"
    assert [r.authorized for r in records] == [False, True]
    assert records[0].step is None
    if key is not None:
        assert records[0].headers["Authorization"] == "REDACTED"
        assert all(key not in v for v in records[0].headers.values() if key)


def test_non_bearer_scheme_is_401() -> None:
    with ScriptedProvider([]) as provider:
        request = urllib.request.Request(
            provider.base_url + "/models", headers={"Authorization": f"Basic {KEY}"}
        )
        with pytest.raises(urllib.error.HTTPError) as exc:
            urllib.request.urlopen(request, timeout=5)
    assert exc.value.code == 401


@pytest.mark.parametrize(
    ("raw", "body", "status", "code"),
    [
        (b"{not json", None, 400, None),
        (b"[1, 2]", None, 400, None),
        (None, {"messages": [{"role": "user", "content": "x"}]}, 400, "missing_required_parameter"),
        (None, {"model": MODEL}, 400, "missing_required_parameter"),
        (None, {"model": MODEL, "messages": []}, 400, None),
        (None, chat_body(stream="yes"), 400, None),
        (None, chat_body(model="gpt-4o"), 404, "model_not_found"),
    ],
    ids=["not-json", "not-object", "no-model", "no-messages", "empty-messages", "stream", "model"],
)
def test_invalid_requests_are_rejected_before_the_script(
    raw: bytes | None, body: dict | None, status: int, code: str | None
) -> None:
    with ScriptedProvider([reply("kept for the valid request")]) as provider:
        got, _, payload = send(provider, body, raw=raw)
        ok_status, _, ok = send(provider, chat_body())
        served = provider.served
    assert got == status
    assert_openai_error(payload, code)
    assert ok_status == 200
    assert ok["choices"][0]["message"]["content"] == "kept for the valid request"
    assert len(served) == 1


def test_models_endpoint_lists_the_model_and_needs_the_key() -> None:
    with ScriptedProvider([], model="acme/tiny-1") as provider:
        status, _, listing = send(provider, path="/models")
        denied, _, _ = send(provider, path="/models", key="sk-nope")
        one_status, _, one = send(provider, path="/models/acme/tiny-1")
        other, _, missing = send(provider, path="/models/acme/huge")
        unknown, _, bad_url = send(provider, chat_body(), path="/embeddings")
    assert status == 200
    assert listing["object"] == "list"
    assert [m["id"] for m in listing["data"]] == ["acme/tiny-1"]
    assert listing["data"][0]["object"] == "model"
    assert denied == 401
    assert (one_status, one["id"]) == (200, "acme/tiny-1")
    assert other == 404 and missing["error"]["code"] == "model_not_found"
    assert unknown == 404
    assert_openai_error(bad_url)


# --- error steps ------------------------------------------------------------------------------


def test_error_steps_carry_status_body_and_retry_after() -> None:
    script = [
        error(429, "Rate limit reached", code="rate_limit_exceeded", retry_after=7),
        error(402, "Insufficient credits", code="insufficient_quota"),
        error(503),
        error(500, retry_after=0.5),
        reply("recovered", usage=(1, 1)),
    ]
    with ScriptedProvider(script) as provider:
        results = [send(provider, chat_body()) for _ in script]
        served = provider.served

    (s429, h429, b429), (s402, h402, b402), (s503, h503, b503), (s500, h500, _), (s200, _, _) = (
        results
    )
    assert s429 == 429
    assert h429["Retry-After"] == "7"
    err = assert_openai_error(b429, "rate_limit_exceeded")
    assert err["message"] == "Rate limit reached"
    assert s402 == 402 and "Retry-After" not in h402
    assert assert_openai_error(b402, "insufficient_quota")["type"] == "insufficient_quota"
    assert s503 == 503 and "Retry-After" not in h503
    assert assert_openai_error(b503)["message"] == "Service Unavailable"
    assert s500 == 500 and h500["Retry-After"] == "0.5"
    assert s200 == 200
    assert [s.status for s in served] == [429, 402, 503, 500, 200]
    assert [s.step for s in served] == [0, 1, 2, 3, 4]


def test_usage_totals_count_only_successful_responses() -> None:
    script = [reply("a", usage=(10, 2)), error(500), hang(0.05), reply("b", usage=(30, 4))]
    with ScriptedProvider(script) as provider:
        statuses = [send(provider, chat_body())[0] for _ in script]
        assert provider.usage_totals() == (40, 6)
        served = provider.served
    assert statuses == [200, 500, 504, 200]
    assert [(s.prompt_tokens, s.completion_tokens) for s in served] == [
        (10, 2),
        (0, 0),
        (0, 0),
        (30, 4),
    ]


# --- after the script -------------------------------------------------------------------------


def test_exhausted_script_answers_500_and_records_a_mismatch() -> None:
    with ScriptedProvider([reply("only")]) as provider:
        send(provider, chat_body())
        status, _, payload = send(provider, chat_body())
        mismatches = provider.mismatches
        assert provider.remaining == 0
    assert status == 500
    assert assert_openai_error(payload, "script_exhausted")["message"] == "script exhausted"
    assert len(mismatches) == 1 and "script exhausted after 1 steps" in mismatches[0]


def test_then_answers_every_request_after_the_script() -> None:
    forever = reply(tool_calls=[call("run", {"command": "sleep 1"})], usage=(100, 10))
    with ScriptedProvider([reply("start", usage=(50, 5))], then=forever) as provider:
        replies = [send(provider, chat_body())[2] for _ in range(6)]
        assert provider.mismatches == []
        assert provider.usage_totals() == (550, 55)
        served = provider.served
    assert replies[0]["choices"][0]["message"]["content"] == "start"
    calls = [r["choices"][0]["message"]["tool_calls"][0] for r in replies[1:]]
    assert {c["function"]["name"] for c in calls} == {"run"}
    assert {c["function"]["arguments"] for c in calls} == {'{"command": "sleep 1"}'}
    assert len({c["id"] for c in calls}) == 5
    assert [s.step for s in served] == [0, None, None, None, None, None]


def test_trailing_repeat_marker_serves_its_step_forever() -> None:
    script = [error(503), repeat(reply("again", usage=(2, 1)))]
    with ScriptedProvider(script) as provider:
        statuses = [send(provider, chat_body())[0] for _ in range(4)]
        assert provider.mismatches == []
        served = provider.served
    assert statuses == [503, 200, 200, 200]
    assert [s.step for s in served] == [0, 1, 1, 1]


def test_malformed_scripts_are_refused() -> None:
    with pytest.raises(ValueError, match="must be the last step"):
        ScriptedProvider([repeat(reply("x")), reply("y")])
    with pytest.raises(ValueError, match="not both"):
        ScriptedProvider([repeat(reply("x"))], then=reply("y"))
    with pytest.raises(ValueError, match="not a step"):
        ScriptedProvider([{"kind": "dance"}])
    with pytest.raises(ValueError, match="unknown checks"):
        ScriptedProvider([reply("x", expect={"last_role": "tool"})])
    with pytest.raises(ValueError, match="call"):
        ScriptedProvider([reply(tool_calls=[{"name": "run", "arguments": {}}])])


# --- expectations and context size ------------------------------------------------------------


def test_expectations_record_mismatches_and_still_answer() -> None:
    messages = [
        {"role": "system", "content": "You are a data scientist."},
        {"role": "user", "content": [{"type": "text", "text": "Solve it."}]},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "run", "arguments": '{"command": "python solve.py"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "Traceback: KeyError 'Exited'"},
    ]
    met = {
        "last_message_role": "tool",
        "last_message_contains": "Traceback",
        "any_message_contains": "data scientist",
        "messages_at_least": 4,
        "messages_at_most": 4,
        "message_chars_at_most": 1000,
        "tools_include": ["run", "finish"],
    }
    unmet = {
        "last_message_role": "user",
        "last_message_contains": "local_validation_score",
        "any_message_contains": "submission.csv written",
        "messages_at_least": 5,
        "messages_at_most": 2,
        "message_chars_at_most": 10,
        "tools_include": ["browse"],
    }
    with ScriptedProvider([reply("fine", expect=met)]) as provider:
        assert send(provider, chat_body(messages))[0] == 200
        assert provider.mismatches == []
        record = provider.requests[0]
    assert record.message_count == 4
    expected_chars = len("You are a data scientist.") + len("Solve it.")
    expected_chars += len("Traceback: KeyError 'Exited'")
    assert record.message_chars == expected_chars

    with ScriptedProvider([reply("answered anyway", expect=unmet)]) as provider:
        status, _, payload = send(provider, chat_body(messages))
        mismatches = provider.mismatches
    assert status == 200 and payload["choices"][0]["message"]["content"] == "answered anyway"
    assert len(mismatches) == len(unmet)
    assert all(m.startswith("request 0 (step 0): ") for m in mismatches)
    joined = "\n".join(mismatches)
    for fragment in ["'tool'", "local_validation_score", "submission.csv written", "['browse']"]:
        assert fragment in joined


def test_message_counts_track_a_growing_then_truncated_context() -> None:
    history = [{"role": "user", "content": "x" * 100}]
    with ScriptedProvider([reply("a"), reply("b"), reply("c")]) as provider:
        send(provider, chat_body(history))
        history += [{"role": "assistant", "content": "y" * 50}, {"role": "user", "content": "z"}]
        send(provider, chat_body(history))
        send(provider, chat_body(history[-1:]))  # the agent dropped old turns
        sizes = [(r.message_count, r.message_chars) for r in provider.requests]
    assert sizes == [(1, 100), (3, 151), (1, 1)]


# --- hangs and shutdown -----------------------------------------------------------------------


def test_short_hang_answers_504() -> None:
    with ScriptedProvider([hang(0.2)]) as provider:
        start = time.monotonic()
        status, _, payload = send(provider, chat_body())
        elapsed = time.monotonic() - start
    assert status == 504
    assert_openai_error(payload, "timeout")
    assert elapsed >= 0.2


# The hangs below last 30 or 60 s and a shutdown is asserted within 10 s: what it would take if
# it waited one out is beyond any loaded host's delay, so these tests need no host to themselves.
def test_hang_does_not_block_shutdown() -> None:
    outcome: dict[str, Any] = {}

    def caller(provider: ScriptedProvider) -> None:
        try:
            outcome["status"] = send(provider, chat_body(), timeout=30)[0]
        except OSError as exc:  # the connection may close before an answer is written
            outcome["error"] = exc

    provider = ScriptedProvider([hang(60)])
    with provider:
        client = threading.Thread(target=caller, args=(provider,))
        client.start()
        deadline = time.monotonic() + 5
        while not provider.served and time.monotonic() < deadline:
            time.sleep(0.01)
        assert [s.spec["kind"] for s in provider.served] == ["hang"]
        assert any(t.name.startswith("scripted-provider-handler") for t in stub_threads())
        start = time.monotonic()
    elapsed = time.monotonic() - start
    client.join(timeout=5)

    assert elapsed < 10, f"context exit took {elapsed:.2f} s during a 60 s hang"
    assert stub_threads() == [], "a server or handler thread outlived the provider"
    assert not client.is_alive()
    assert outcome == {"status": 504}, "a hang cut short by shutdown still answers 504"


def test_silent_client_does_not_block_shutdown(monkeypatch: pytest.MonkeyPatch) -> None:
    # 30 s to read a request line, not the real 1 s: a close that waited it out would take 30 s,
    # against a few at most on a loaded host
    monkeypatch.setattr(RequestHandler, "timeout", 30.0)
    with ScriptedProvider([]) as provider, socket.create_connection(("127.0.0.1", provider.port)):
        time.sleep(0.1)  # a connection that never sends a request line
        start = time.monotonic()
        provider.close()
        elapsed = time.monotonic() - start
    assert elapsed < 10, f"close took {elapsed:.2f} s: it waited out the socket timeout"
    assert stub_threads() == []


# --- conversation files -----------------------------------------------------------------------


def test_conversation_round_trips_through_json(tmp_path: Path) -> None:
    original = CONVERSATIONS / "valid_submission.json"
    steps = load_conversation(original)
    copy = tmp_path / "copy.json"
    save_conversation(copy, steps)
    assert load_conversation(copy) == steps
    assert copy.read_text() == original.read_text(), "stored file is not in save_conversation form"

    built = [
        reply("hi", [call("run", {"command": "ls"})], usage=(3, 4), expect={"messages_at_most": 9}),
        error(429, "slow down", retry_after=2),
        hang(1.5),
        repeat(reply("bye")),
    ]
    save_conversation(tmp_path / "built.json", built)
    assert load_conversation(tmp_path / "built.json") == built


def test_load_conversation_names_the_bad_step(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps([reply("ok"), {"kind": "reply", "tool_calls": [{"id": "x"}]}]))
    with pytest.raises(ValueError, match=r"bad\.json\[1\]\.tool_calls\[0\]"):
        load_conversation(bad)


def tool_result(tool_call: dict, content: str) -> dict:
    return {"role": "tool", "tool_call_id": tool_call["id"], "content": content}


def solve_script() -> str:
    steps = load_conversation(CONVERSATIONS / "valid_submission.json")
    (write,) = steps[0]["tool_calls"]
    args = json.loads(write["function"]["arguments"])
    assert (write["function"]["name"], args["path"]) == ("write_file", "solve.py")
    return args["content"]


def test_valid_submission_conversation_replays_without_mismatch() -> None:
    steps = load_conversation(CONVERSATIONS / "valid_submission.json")
    tool_names = {"write_file", "run", "read_file", "finish"}
    messages: list[dict] = [
        {"role": "system", "content": "Use the tools to solve the task."},
        {"role": "user", "content": "Predict Exited for test.csv; write submission.csv."},
    ]
    tool_outputs = {
        "write_file": "wrote solve.py",
        "run": "8000 train rows ...\nlocal_validation_score: 0.771234\nwrote submission.csv",
    }
    finished = None
    with ScriptedProvider(steps) as provider:
        for _ in range(len(steps)):
            status, _, payload = send(provider, chat_body(messages))
            assert status == 200
            message = payload["choices"][0]["message"]
            messages.append(message)
            for tc in message.get("tool_calls") or []:
                assert tc["function"]["name"] in tool_names
                json.loads(tc["function"]["arguments"])
                if tc["function"]["name"] == "finish":
                    finished = json.loads(tc["function"]["arguments"])["summary"]
                    continue
                messages.append(tool_result(tc, tool_outputs[tc["function"]["name"]]))
        assert provider.mismatches == []
        assert provider.remaining == 0
        prompt, completion = provider.usage_totals()
    assert finished and "submission.csv" in finished
    assert prompt == sum(s["usage"][0] for s in steps) and prompt > 0
    assert completion == sum(s["usage"][1] for s in steps) and completion > 0


def test_valid_submission_conversation_flags_a_failed_run() -> None:
    steps = load_conversation(CONVERSATIONS / "valid_submission.json")
    messages: list[dict] = [{"role": "user", "content": "Solve it."}]
    with ScriptedProvider(steps) as provider:
        for _ in range(len(steps)):
            message = send(provider, chat_body(messages))[2]["choices"][0]["message"]
            messages.append(message)
            for tc in message.get("tool_calls") or []:
                messages.append(tool_result(tc, "Traceback (most recent call last): ..."))
        mismatches = provider.mismatches
    assert len(mismatches) == 1
    assert "local_validation_score:" in mismatches[0]


def write_task(directory: Path, target: pd.Series, n_test: int = 60) -> None:
    rng = np.random.default_rng(1)
    n = len(target) + n_test
    frame = pd.DataFrame(
        {
            "RowId": np.arange(1000, 1000 + n),
            "Age": rng.integers(18, 90, n).astype(float),
            "Balance": rng.normal(5e4, 2e4, n),
            "Country": rng.choice(["FR", "DE", "ES"], n),
            "TrainOnly": rng.normal(size=n),
        }
    )
    frame.loc[::5, "Age"] = np.nan
    train = frame.iloc[: len(target)].assign(Label=target.to_numpy())
    test = frame.iloc[len(target) :].drop(columns="TrainOnly")
    train.to_csv(directory / "train.csv", index=False)
    test.to_csv(directory / "test.csv", index=False)
    pd.DataFrame({"RowId": test["RowId"], "Label": 0}).to_csv(
        directory / "sample_submission.csv", index=False
    )


# integration: the recorded solve script trains its model in a real subprocess
@pytest.mark.integration
@pytest.mark.parametrize("kind", ["binary", "regression"])
def test_recorded_solve_script_writes_a_valid_submission(kind: str, tmp_path: Path) -> None:
    rng = np.random.default_rng(2)
    n = 240
    target = pd.Series(rng.integers(0, 2, n) if kind == "binary" else rng.normal(100, 15, n))
    write_task(tmp_path, target)
    (tmp_path / "solve.py").write_text(solve_script())

    done = subprocess.run(
        [sys.executable, "solve.py"], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    scores = [
        line.split(":", 1)[1] for line in done.stdout.splitlines() if line.startswith("local_")
    ]
    assert len(scores) == 1 and np.isfinite(float(scores[0]))
    assert f"({kind})" in done.stdout
    assert "2 features" in done.stdout  # Age, Balance: not the id, text, or train-only column

    submission = pd.read_csv(tmp_path / "submission.csv")
    test = pd.read_csv(tmp_path / "test.csv")
    assert list(submission.columns) == ["RowId", "Label"]
    assert submission["RowId"].tolist() == test["RowId"].tolist()
    assert submission["Label"].notna().all()
    if kind == "binary":
        assert submission["Label"].between(0, 1).all()
        assert submission["Label"].nunique() > 2  # probabilities, not hard labels
        assert 0 <= float(scores[0]) <= 1  # ROC AUC
    else:
        assert submission["Label"].between(50, 150).all()


# --- the official OpenAI client: chat completions -----------------------------------------------


def test_official_openai_client() -> None:
    script = [
        reply("thinking", [call("run", {"command": "ls"})], usage=(7, 3)),
        error(429, "Rate limit reached", code="rate_limit_exceeded", retry_after=1),
        hang(30),
    ]
    with ScriptedProvider(script) as provider:
        client = openai.OpenAI(base_url=provider.base_url, api_key=KEY, max_retries=0)
        completion = client.chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": "hi"}], tools=TOOLS
        )
        (tc,) = completion.choices[0].message.tool_calls
        assert (tc.function.name, json.loads(tc.function.arguments)) == ("run", {"command": "ls"})
        assert completion.choices[0].finish_reason == "tool_calls"
        assert completion.usage.total_tokens == 10

        with pytest.raises(openai.RateLimitError) as rate:
            client.chat.completions.create(
                model=MODEL, messages=[{"role": "user", "content": "hi"}]
            )
        assert rate.value.response.headers["retry-after"] == "1"

        with pytest.raises(openai.APITimeoutError):
            client.with_options(timeout=0.5).chat.completions.create(
                model=MODEL, messages=[{"role": "user", "content": "hi"}]
            )

        bad = openai.OpenAI(base_url=provider.base_url, api_key="sk-wrong", max_retries=0)
        with pytest.raises(openai.AuthenticationError):
            bad.models.list()
        assert [m.id for m in client.models.list()] == [MODEL]

        with pytest.raises(openai.NotFoundError):
            client.chat.completions.create(
                model="other/model", messages=[{"role": "user", "content": "hi"}]
            )
        start = time.monotonic()
    assert time.monotonic() - start < 10  # the 30 s hang was cut short
    assert provider.mismatches == []
    assert provider.usage_totals() == (7, 3)
    headers = {k.lower(): v for k, v in provider.requests[0].headers.items()}
    assert headers["authorization"] == "REDACTED"  # the official client sends it lower-case


# --- every protocol, streamed and not, through the client that defines it ------------------------

RESPONSES_TOOLS = [
    {"type": "function", "name": t["function"]["name"], "parameters": t["function"]["parameters"]}
    for t in TOOLS
]
ANTHROPIC_TOOLS = [
    {"name": t["function"]["name"], "input_schema": t["function"]["parameters"]} for t in TOOLS
]
LONG_TEXT = "I will look at the data first, then fit a baseline and write the submission file."
LONG_ARGS = {"command": "python - <<'PY'\nimport pandas as pd\nprint(pd.read_csv('train.csv'))\nPY"}
WRITE_ARGS = {"path": "solve.py", "content": "print('hello')\n" * 6}
REPLIES = {
    "text": reply(LONG_TEXT, usage=(120, 17)),
    "tools": reply(
        "Two tools.", [call("run", LONG_ARGS), call("write_file", WRITE_ARGS)], (300, 45)
    ),
}
EXPECTED_CALLS = {"text": [], "tools": [("run", LONG_ARGS), ("write_file", WRITE_ARGS)]}
EXPECTED_STOP = {
    (OPENAI_CHAT, "text"): "stop",
    (OPENAI_CHAT, "tools"): "tool_calls",
    (OPENAI_RESPONSES, "text"): "completed",
    (OPENAI_RESPONSES, "tools"): "completed",
    (ANTHROPIC_MESSAGES, "text"): "end_turn",
    (ANTHROPIC_MESSAGES, "tools"): "tool_use",
}
USER = [{"role": "user", "content": "Solve the task."}]


def heard(text: str, calls: list, usage: tuple[int, int], stop: str | None) -> dict:
    """What a client made of one answer, in one shape for every protocol."""
    return {"text": text, "calls": calls, "usage": usage, "stop": stop}


def openai_client(provider: ScriptedProvider) -> openai.OpenAI:
    return openai.OpenAI(base_url=provider.base_url, api_key=KEY, max_retries=0, timeout=10)


def anthropic_client(provider: ScriptedProvider, **kw: Any) -> anthropic.Anthropic:
    kw.setdefault("api_key", KEY)
    return anthropic.Anthropic(base_url=provider.root_url, max_retries=0, timeout=10, **kw)


def chat_json(provider: ScriptedProvider) -> dict:
    done = openai_client(provider).chat.completions.create(model=MODEL, messages=USER, tools=TOOLS)
    return chat_heard(done)


def chat_heard(done: Any) -> dict:
    message = done.choices[0].message
    calls = [
        (tc.function.name, json.loads(tc.function.arguments), tc.id)
        for tc in message.tool_calls or []
    ]
    usage = (done.usage.prompt_tokens, done.usage.completion_tokens)
    return heard(message.content or "", calls, usage, done.choices[0].finish_reason)


def chat_events(provider: ScriptedProvider) -> dict:
    text, calls, usage, stop, chunks = "", {}, None, None, 0
    stream = openai_client(provider).chat.completions.create(
        model=MODEL, messages=USER, tools=TOOLS, stream=True, stream_options={"include_usage": True}
    )
    for chunk in stream:
        chunks += 1
        if chunk.usage is not None:
            assert chunk.choices == []  # OpenAI's usage chunk comes last, without choices
            usage = (chunk.usage.prompt_tokens, chunk.usage.completion_tokens)
        for choice in chunk.choices:
            text += choice.delta.content or ""
            for tc in choice.delta.tool_calls or []:
                entry = calls.setdefault(tc.index, {"id": None, "name": "", "arguments": ""})
                entry["id"] = tc.id or entry["id"]
                entry["name"] += (tc.function and tc.function.name) or ""
                entry["arguments"] += (tc.function and tc.function.arguments) or ""
            stop = choice.finish_reason or stop
    assert chunks > 4, "the answer should arrive in pieces"
    found = [(c["name"], json.loads(c["arguments"]), c["id"]) for _, c in sorted(calls.items())]
    return heard(text, found, usage, stop)


def chat_helper(provider: ScriptedProvider) -> dict:
    with openai_client(provider).chat.completions.stream(
        model=MODEL, messages=USER, tools=TOOLS, stream_options={"include_usage": True}
    ) as stream:
        for _ in stream:
            pass
        return chat_heard(stream.get_final_completion())


def responses_heard(response: Any) -> dict:
    calls = [
        (item.name, json.loads(item.arguments), item.call_id)
        for item in response.output
        if item.type == "function_call"
    ]
    usage = (response.usage.input_tokens, response.usage.output_tokens)
    return heard(response.output_text, calls, usage, response.status)


def responses_json(provider: ScriptedProvider) -> dict:
    client = openai_client(provider)
    return responses_heard(client.responses.create(model=MODEL, input="Go.", tools=RESPONSES_TOOLS))


def responses_events(provider: ScriptedProvider) -> dict:
    client = openai_client(provider)
    events = list(
        client.responses.create(model=MODEL, input="Go.", tools=RESPONSES_TOOLS, stream=True)
    )
    assert [e.sequence_number for e in events] == list(range(len(events)))
    assert [e.type for e in events[:2]] == ["response.created", "response.in_progress"]
    assert events[-1].type == "response.completed"
    final = events[-1].response
    assert {e.response.id for e in events if hasattr(e, "response")} == {final.id}
    streamed = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert streamed == final.output_text
    for item in final.output:
        if item.type == "function_call":
            pieces = [
                e.delta
                for e in events
                if e.type == "response.function_call_arguments.delta" and e.item_id == item.id
            ]
            assert "".join(pieces) == item.arguments
    return responses_heard(final)


def responses_helper(provider: ScriptedProvider) -> dict:
    client = openai_client(provider)
    with client.responses.stream(model=MODEL, input="Go.", tools=RESPONSES_TOOLS) as stream:
        for _ in stream:
            pass
        return responses_heard(stream.get_final_response())


def anthropic_heard(message: Any) -> dict:
    text = "".join(b.text for b in message.content if b.type == "text")
    calls = [(b.name, b.input, b.id) for b in message.content if b.type == "tool_use"]
    usage = (message.usage.input_tokens, message.usage.output_tokens)
    return heard(text, calls, usage, message.stop_reason)


def anthropic_json(provider: ScriptedProvider) -> dict:
    client = anthropic_client(provider)
    return anthropic_heard(
        client.messages.create(model=MODEL, max_tokens=1024, messages=USER, tools=ANTHROPIC_TOOLS)
    )


def anthropic_events(provider: ScriptedProvider) -> dict:
    client = anthropic_client(provider)
    stream = client.messages.create(
        model=MODEL, max_tokens=1024, messages=USER, tools=ANTHROPIC_TOOLS, stream=True
    )
    blocks: dict[int, dict] = {}
    usage_in = usage_out = stop = None
    types = []
    for event in stream:
        types.append(event.type)
        if event.type == "message_start":
            usage_in = event.message.usage.input_tokens
        elif event.type == "content_block_start":
            blocks[event.index] = {"block": event.content_block, "text": "", "json": ""}
        elif event.type == "content_block_delta":
            if event.delta.type == "text_delta":
                blocks[event.index]["text"] += event.delta.text
            else:
                blocks[event.index]["json"] += event.delta.partial_json
        elif event.type == "message_delta":
            usage_out, stop = event.usage.output_tokens, event.delta.stop_reason
    assert types[0] == "message_start" and types[-2:] == ["message_delta", "message_stop"]
    text = "".join(b["text"] for b in blocks.values() if b["block"].type == "text")
    calls = [
        (b["block"].name, json.loads(b["json"]), b["block"].id)
        for _, b in sorted(blocks.items())
        if b["block"].type == "tool_use"
    ]
    return heard(text, calls, (usage_in, usage_out), stop)


def anthropic_helper(provider: ScriptedProvider) -> dict:
    client = anthropic_client(provider)
    with client.messages.stream(
        model=MODEL, max_tokens=1024, messages=USER, tools=ANTHROPIC_TOOLS
    ) as stream:
        for _ in stream:
            pass
        return anthropic_heard(stream.get_final_message())


LISTENERS = {
    (OPENAI_CHAT, "json"): chat_json,
    (OPENAI_CHAT, "events"): chat_events,
    (OPENAI_CHAT, "helper"): chat_helper,
    (OPENAI_RESPONSES, "json"): responses_json,
    (OPENAI_RESPONSES, "events"): responses_events,
    (OPENAI_RESPONSES, "helper"): responses_helper,
    (ANTHROPIC_MESSAGES, "json"): anthropic_json,
    (ANTHROPIC_MESSAGES, "events"): anthropic_events,
    (ANTHROPIC_MESSAGES, "helper"): anthropic_helper,
}


@pytest.mark.parametrize("kind", ["text", "tools"])
@pytest.mark.parametrize(
    ("protocol", "mode"), list(LISTENERS), ids=[f"{p}-{m}" for p, m in LISTENERS]
)
def test_official_clients_parse_every_protocol(protocol: str, mode: str, kind: str) -> None:
    step = REPLIES[kind]
    with ScriptedProvider([step]) as provider:
        got = LISTENERS[protocol, mode](provider)
        (record,) = provider.requests
        assert provider.mismatches == []
        assert provider.usage_totals() == tuple(step["usage"])
    assert (record.protocol, record.stream, record.authorized) == (protocol, mode != "json", True)
    assert got["text"] == (step["content"] or "")
    assert [(name, args) for name, args, _ in got["calls"]] == EXPECTED_CALLS[kind]
    prefix = "toolu_" if protocol == ANTHROPIC_MESSAGES else "call_"
    ids = [call_id for _, _, call_id in got["calls"]]
    assert all(i.startswith(prefix) for i in ids) and len(set(ids)) == len(ids)
    assert got["usage"] == tuple(step["usage"])
    assert got["stop"] == EXPECTED_STOP[protocol, kind]


# --- the wire format, event by event -------------------------------------------------------------


def post_stream(
    provider: ScriptedProvider, path: str, body: dict, headers: dict | None = None
) -> tuple[dict[str, str], list[tuple[str | None, Any]]]:
    """The response headers and the (event, data) pairs of one server-sent event stream."""
    request = urllib.request.Request(
        provider.base_url + path, data=json.dumps(body).encode(), method="POST"
    )
    request.add_header("Content-Type", "application/json")
    for name, value in (headers or {"Authorization": f"Bearer {KEY}"}).items():
        request.add_header(name, value)
    with urllib.request.urlopen(request, timeout=10) as response:
        text, response_headers = response.read().decode(), dict(response.headers)
    events = []
    for block in text.split("\n\n"):
        if not block.strip():
            continue
        fields = dict(line.split(": ", 1) for line in block.split("\n"))
        data = fields["data"]
        events.append((fields.get("event"), data if data == "[DONE]" else json.loads(data)))
    return response_headers, events


def test_chat_stream_carries_usage_on_the_last_chunk_or_in_its_own() -> None:
    with ScriptedProvider([REPLIES["tools"], REPLIES["tools"]]) as provider:
        headers, plain = post_stream(provider, "/chat/completions", chat_body(stream=True))
        _, asked = post_stream(
            provider,
            "/chat/completions",
            chat_body(stream=True, stream_options={"include_usage": True}),
        )
    assert headers["Content-Type"].startswith("text/event-stream")
    usage = {"prompt_tokens": 300, "completion_tokens": 45, "total_tokens": 345}
    for events in (plain, asked):
        assert all(event is None for event, _ in events)  # chat chunks are bare data lines
        assert events[-1] == (None, "[DONE]")
        chunks = [data for _, data in events[:-1]]
        assert {c["object"] for c in chunks} == {"chat.completion.chunk"}
        assert len({c["id"] for c in chunks}) == 1
        assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
        heads = [
            tc
            for c in chunks
            for choice in c["choices"]
            for tc in choice["delta"].get("tool_calls", [])
            if "id" in tc
        ]
        assert [(h["index"], h["function"]["name"]) for h in heads] == [
            (0, "run"),
            (1, "write_file"),
        ]
    # Not asked: the usage rides on the finishing chunk, as vLLM-style servers send it.
    assert plain[-2][1]["choices"][0]["finish_reason"] == "tool_calls"
    assert plain[-2][1]["usage"] == usage
    # Asked: OpenAI's shape, a last chunk with no choices; every other chunk has usage null.
    assert asked[-2][1]["choices"] == [] and asked[-2][1]["usage"] == usage
    assert asked[-3][1]["choices"][0]["finish_reason"] == "tool_calls"
    assert all(data["usage"] is None for _, data in asked[:-2])


def test_responses_stream_is_the_real_event_sequence() -> None:
    with ScriptedProvider([REPLIES["tools"]]) as provider:
        _, events = post_stream(
            provider, "/responses", {"model": MODEL, "input": "Go.", "stream": True}
        )
    assert all(event == data["type"] for event, data in events)  # named events
    assert [d["sequence_number"] for _, d in events] == list(range(len(events)))
    kinds = [d["type"] for _, d in events]
    text, args = "response.output_text.delta", "response.function_call_arguments.delta"
    squeezed = [k for i, k in enumerate(kinds) if k not in (text, args) or kinds[i - 1] != k]
    assert squeezed == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
        text,
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.output_item.added",
        args,
        "response.function_call_arguments.done",
        "response.output_item.done",
        "response.output_item.added",
        args,
        "response.function_call_arguments.done",
        "response.output_item.done",
        "response.completed",
    ]
    created, completed = events[0][1]["response"], events[-1][1]["response"]
    assert (created["status"], created["usage"], created["output"]) == ("in_progress", None, [])
    assert completed["status"] == "completed"
    assert completed["usage"]["input_tokens"] == 300 and completed["usage"]["total_tokens"] == 345
    message, first, second = completed["output"]
    assert message["type"] == "message" and message["content"][0]["text"] == "Two tools."
    assert [(i["type"], i["name"]) for i in (first, second)] == [
        ("function_call", "run"),
        ("function_call", "write_file"),
    ]
    done = [d for _, d in events if d["type"] == "response.output_item.done"]
    assert [d["item"] for d in done] == completed["output"]


def test_anthropic_stream_names_every_event_and_pings() -> None:
    headers = {"x-api-key": KEY, "anthropic-version": "2023-06-01"}
    body = {"model": MODEL, "max_tokens": 100, "messages": USER, "stream": True}
    with ScriptedProvider([REPLIES["tools"]]) as provider:
        _, events = post_stream(provider, "/messages", body, headers)
        (record,) = provider.requests
    headers = {k.lower(): v for k, v in record.headers.items()}
    assert (record.auth_header, headers["x-api-key"]) == ("x-api-key", "REDACTED")
    assert all(event == data["type"] for event, data in events)
    kinds = [data["type"] for _, data in events]
    assert kinds[:2] == ["message_start", "ping"]
    assert kinds[-2:] == ["message_delta", "message_stop"]
    start = events[0][1]["message"]
    assert (start["content"], start["stop_reason"], start["usage"]["input_tokens"]) == (
        [],
        None,
        300,
    )
    starts = [d for _, d in events if d["type"] == "content_block_start"]
    assert [(d["index"], d["content_block"]["type"]) for d in starts] == [
        (0, "text"),
        (1, "tool_use"),
        (2, "tool_use"),
    ]
    assert starts[1]["content_block"]["input"] == {}  # the input arrives as input_json_delta
    assert kinds.count("content_block_stop") == 3
    assert events[-2][1]["delta"]["stop_reason"] == "tool_use"
    assert events[-2][1]["usage"]["output_tokens"] == 45


def test_finish_reason_length_maps_to_each_protocol() -> None:
    cut = reply("cut short", finish_reason="length", usage=(5, 9))
    with ScriptedProvider([repeat(cut)]) as provider:
        _, _, chat = send(provider, chat_body())
        _, _, response = send(provider, {"model": MODEL, "input": "Go."}, path="/responses")
        _, events = post_stream(
            provider, "/responses", {"model": MODEL, "input": "Go.", "stream": True}
        )
        message = anthropic_json(provider)
    assert chat["choices"][0]["finish_reason"] == "length"
    assert response["status"] == "incomplete"
    assert response["incomplete_details"] == {"reason": "max_output_tokens"}
    assert events[-1][0] == "response.incomplete"
    assert message["stop"] == "max_tokens"


# --- keys, errors, hangs and models in the Anthropic and Responses shapes ------------------------


def test_anthropic_accepts_x_api_key_or_bearer_and_openai_only_bearer() -> None:
    body = {"model": MODEL, "max_tokens": 10, "messages": USER}
    version = {"anthropic-version": "2023-06-01"}
    with ScriptedProvider([repeat(reply("ok"))]) as provider:
        by_key = send(
            provider, body, path="/messages", key=None, headers={"x-api-key": KEY, **version}
        )
        # The official client (2.x) sends its API key as a bearer token, not as x-api-key.
        by_client = anthropic_client(provider).messages.create(**body)
        with pytest.raises(anthropic.AuthenticationError) as denied:
            anthropic_client(provider, api_key="sk-wrong").messages.create(**body)
        wrong_key = send(provider, body, path="/messages", key=None, headers={"x-api-key": "sk-no"})
        no_bearer, _, openai_denied = send(provider, chat_body(), key=None)
        records = provider.requests
    assert by_key[0] == 200 and by_key[2]["content"] == [{"type": "text", "text": "ok"}]
    assert by_client.content[0].text == "ok"
    assert denied.value.body == {
        "type": "error",
        "error": {"type": "authentication_error", "message": "invalid x-api-key"},
    }
    assert wrong_key[0] == 401 and wrong_key[2]["error"]["type"] == "authentication_error"
    assert [r.auth_header for r in records] == ["x-api-key", "authorization", None, None, None]
    assert all(KEY not in json.dumps(r.headers) for r in records)
    assert no_bearer == 401 and openai_denied["error"]["code"] == "invalid_api_key"


def test_chat_completions_refuse_a_key_sent_as_x_api_key() -> None:
    with ScriptedProvider([reply("never")]) as provider:
        request = urllib.request.Request(
            provider.base_url + "/chat/completions",
            data=json.dumps(chat_body()).encode(),
            headers={"x-api-key": KEY, "Content-Type": "application/json"},
        )
        with pytest.raises(urllib.error.HTTPError) as exc:
            urllib.request.urlopen(request, timeout=5)
        (record,) = provider.requests
    assert exc.value.code == 401
    assert (record.authorized, record.auth_header) == (False, None)
    assert provider.remaining == 1


def test_anthropic_errors_hangs_and_models() -> None:
    script = [
        error(429, "Number of requests has exceeded your rate limit", retry_after=3),
        error(529, "Overloaded"),
        error(400, "prompt is too long", error_type="invalid_request_error"),
        error(429, retry_after=2),  # met by a streaming request: an HTTP error, not an event
        hang(30),
        reply("after all that", usage=(3, 2)),
    ]
    body = {"model": MODEL, "max_tokens": 10, "messages": USER}
    with ScriptedProvider(script) as provider:
        client = anthropic_client(provider)
        with pytest.raises(anthropic.RateLimitError) as rate:
            client.messages.create(**body)
        with pytest.raises(anthropic.OverloadedError) as overloaded:
            client.messages.create(**body)
        with pytest.raises(anthropic.BadRequestError) as bad:
            client.messages.create(**body)
        with pytest.raises(anthropic.RateLimitError) as streamed:
            client.messages.create(**body, stream=True)
        with pytest.raises(anthropic.APITimeoutError):
            client.with_options(timeout=0.5).messages.create(**body)
        assert client.messages.create(**body).content[0].text == "after all that"
        with pytest.raises(anthropic.NotFoundError) as missing:
            client.messages.create(**{**body, "model": "claude-other"})
        models = client.models.list()
        one = client.models.retrieve(MODEL)
        start = time.monotonic()
    assert time.monotonic() - start < 10  # the 30 s hang was cut short
    assert rate.value.response.headers["retry-after"] == "3"
    assert rate.value.body == {
        "type": "error",
        "error": {
            "type": "rate_limit_error",
            "message": "Number of requests has exceeded your rate limit",
        },
    }
    assert overloaded.value.body["error"]["type"] == "overloaded_error"
    assert bad.value.body["error"] == {
        "type": "invalid_request_error",
        "message": "prompt is too long",
    }
    assert streamed.value.response.headers["retry-after"] == "2"
    assert missing.value.body["error"]["type"] == "not_found_error"
    assert [m.id for m in models.data] == [MODEL] and models.has_more is False
    assert (one.id, one.display_name, one.type) == (MODEL, MODEL, "model")
    assert [s.status for s in provider.served] == [429, 529, 400, 429, 504, 200]
    assert provider.mismatches == []


def test_responses_errors_and_hangs() -> None:
    script = [error(429, "slow down", code="rate_limit_exceeded", retry_after=1), hang(30)]
    with ScriptedProvider(script) as provider:
        client = openai_client(provider)
        with pytest.raises(openai.RateLimitError) as rate:
            client.responses.create(model=MODEL, input="Go.", stream=True)
        with pytest.raises(openai.APITimeoutError):
            client.with_options(timeout=0.5).responses.create(model=MODEL, input="Go.")
        with pytest.raises(openai.BadRequestError):
            client.responses.create(model=MODEL, input=42)  # type: ignore[arg-type]
    assert rate.value.response.headers["retry-after"] == "1"
    assert rate.value.body["code"] == "rate_limit_exceeded"
    assert provider.remaining == 0


def test_models_listing_suits_both_clients() -> None:
    with ScriptedProvider([]) as provider:
        status, _, listing = send(provider, path="/models")
        by_key = anthropic_client(provider).models.list()
        by_openai = [m.id for m in openai_client(provider).models.list()]
    assert status == 200
    (model,) = listing["data"]
    assert {"id", "object", "created", "owned_by", "type", "display_name"} <= set(model)
    assert (listing["object"], listing["has_more"], listing["first_id"], listing["last_id"]) == (
        "list",
        False,
        MODEL,
        MODEL,
    )
    assert [m.id for m in by_key.data] == by_openai == [MODEL]


# --- the neutral view of a request, callable steps, bounds ---------------------------------------

TOOL_TURN = {
    OPENAI_CHAT: chat_body(
        [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Solve it."},
            {
                "role": "assistant",
                "content": "Looking.",
                "tool_calls": [
                    {
                        "id": "c1",
                        "type": "function",
                        "function": {"name": "run", "arguments": '{"command": "ls"}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "content": "train.csv"},
        ]
    ),
    OPENAI_RESPONSES: {
        "model": MODEL,
        "instructions": "Be brief.",
        "input": [
            {
                "type": "message",
                "role": "user",
                "content": [{"type": "input_text", "text": "Solve it."}],
            },
            {"type": "reasoning", "id": "rs_1", "summary": []},
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "Looking."}],
            },
            {
                "type": "function_call",
                "call_id": "c1",
                "name": "run",
                "arguments": '{"command": "ls"}',
            },
            {"type": "function_call_output", "call_id": "c1", "output": "train.csv"},
        ],
        "tools": RESPONSES_TOOLS,
    },
    ANTHROPIC_MESSAGES: {
        "model": MODEL,
        "max_tokens": 100,
        "system": [{"type": "text", "text": "Be brief."}],
        "messages": [
            {"role": "user", "content": "Solve it."},
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "Looking."},
                    {"type": "tool_use", "id": "c1", "name": "run", "input": {"command": "ls"}},
                ],
            },
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "c1", "content": "train.csv"}],
            },
        ],
        "tools": ANTHROPIC_TOOLS,
    },
}
PATHS = {
    OPENAI_CHAT: "/chat/completions",
    OPENAI_RESPONSES: "/responses",
    ANTHROPIC_MESSAGES: "/messages",
}


@pytest.mark.parametrize("protocol", list(TOOL_TURN))
def test_every_protocol_reads_into_the_same_conversation(protocol: str) -> None:
    expect = {
        "last_message_role": "tool",
        "last_message_contains": "train.csv",
        "any_message_contains": "Be brief.",
        "messages_at_least": 4,
        "messages_at_most": 4,
        "tools_include": ["run", "finish"],
    }
    with ScriptedProvider([reply("ok", expect=expect)]) as provider:
        status, _, _ = send(provider, TOOL_TURN[protocol], path=PATHS[protocol])
        (record,) = provider.requests
        assert provider.mismatches == []
    assert status == 200
    assert [(m.role, m.text) for m in record.messages] == [
        ("system", "Be brief."),
        ("user", "Solve it."),
        ("assistant", "Looking."),
        ("tool", "train.csv"),
    ]
    calls = [(c.name, json.loads(c.arguments), c.call_id) for m in record.messages for c in m.calls]
    assert calls == [("run", {"command": "ls"}, "c1")]
    assert record.messages[-1].call_id == "c1"
    assert [t.name for t in record.tools] == ["write_file", "run", "read_file", "finish"]
    assert record.tools[1].parameters["required"] == ["command"]
    assert record.text.endswith("train.csv") and record.message_chars == len(
        "Be brief.Solve it.Looking.train.csv"
    )


def test_a_callable_step_answers_from_what_the_client_sent(tmp_path: Path) -> None:
    def echo(request: ReceivedRequest) -> dict:
        return reply(f"{request.protocol} said {request.messages[-1].text!r}", usage=(1, 1))

    with ScriptedProvider([echo, repeat(echo)]) as provider:
        answers = [
            chat_json(provider)["text"],
            responses_json(provider)["text"],
            anthropic_json(provider)["text"],
        ]
        assert provider.mismatches == []
        served = provider.served
    assert answers == [
        "openai-chat said 'Solve the task.'",
        "openai-responses said 'Go.'",
        "anthropic-messages said 'Solve the task.'",
    ]
    assert [s.spec["content"] for s in served] == answers  # the played step, not the callable
    assert [s.step for s in served] == [0, 1, 1]
    with pytest.raises(ValueError, match="callable"):
        save_conversation(tmp_path / "c.json", [echo])


def test_a_broken_callable_step_is_a_500_and_a_mismatch() -> None:
    def broken(request: ReceivedRequest) -> dict:
        raise KeyError("no such thing")

    with ScriptedProvider([broken, lambda r: repeat(reply("x")), lambda r: {"kind": "?"}]) as p:
        statuses = [send(p, chat_body())[0] for _ in range(3)]
        mismatches = p.mismatches
    assert statuses == [500, 500, 500]
    assert len(mismatches) == 3 and all("callable step failed" in m for m in mismatches)


def raw_exchange(port: int, head: str, body: bytes = b"") -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(head.encode() + body)
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    return data


def test_an_oversized_request_is_refused_unread_and_a_chunked_one_is_read() -> None:
    from runner.agents.scripted_provider import MAX_REQUEST_BYTES

    with ScriptedProvider([reply("chunked is fine")]) as provider:
        refused = raw_exchange(
            provider.port,
            "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
            f"Authorization: Bearer {KEY}\r\nContent-Length: {MAX_REQUEST_BYTES + 1}\r\n\r\n",
        )
        body = json.dumps(chat_body()).encode()
        chunks = (
            b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in (body[:10], body[10:])) + b"0\r\n\r\n"
        )
        chunked = raw_exchange(
            provider.port,
            "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
            f"Authorization: Bearer {KEY}\r\nTransfer-Encoding: chunked\r\n\r\n",
            chunks,
        )
        assert provider.remaining == 0
    assert refused.startswith(b"HTTP/1.1 413 ")
    assert chunked.startswith(b"HTTP/1.1 200 ") and b"chunked is fine" in chunked


def test_any_model_and_count_tokens() -> None:
    with ScriptedProvider([reply("small model here")], any_model=True) as provider:
        client = anthropic_client(provider)
        counted = client.messages.count_tokens(model="claude-haiku-x", messages=USER)
        message = client.messages.create(model="claude-haiku-x", max_tokens=5, messages=USER)
        assert provider.remaining == 0 and len(provider.served) == 1
    assert counted.input_tokens > 0
    assert (message.model, message.content[0].text) == ("claude-haiku-x", "small model here")


# --- the scripted scientist ----------------------------------------------------------------------


def fn_tool(name: str, properties: dict, required: list[str]) -> Tool:
    return Tool(name, {"type": "object", "properties": properties, "required": required})


STRING, NUMBER = {"type": "string"}, {"type": "number"}


def test_the_shell_tool_is_found_by_name() -> None:
    other = fn_tool("read_file", {"path": STRING}, ["path"])
    for name in ["bash", "Bash", "shell", "shell_command", "exec_command", "run_shell_command",
                 "execute_command", "Terminal", "developer__shell", "run"]:  # fmt: skip
        found = shell_tool([other, fn_tool(name, {"command": STRING}, ["command"])])
        assert found is not None and found.name == name
    assert shell_tool([other]) is None
    assert shell_tool([Tool("local_shell", kind="local_shell")]) is None  # not a function
    both = [fn_tool("run", {}, []), fn_tool("Bash", {}, [])]
    assert shell_tool(both).name == "Bash"  # bash beats run


def test_shell_call_arguments_follow_the_schema() -> None:
    cmd = "echo hi"
    assert shell_call_arguments(fn_tool("bash", {"command": STRING}, ["command"]), cmd) == {
        "command": cmd
    }
    codex = fn_tool(
        "shell",
        {
            "command": {"type": "array", "items": STRING},
            "workdir": STRING,
            "timeout_ms": NUMBER,
        },
        ["command"],
    )
    assert shell_call_arguments(codex, cmd) == {
        "command": ["bash", "-lc", cmd],
        "workdir": ".",
        "timeout_ms": 600_000,
    }
    claude = fn_tool(
        "Bash",
        {
            "command": STRING,
            "timeout": {
                "type": "number",
                "description": "Optional timeout in milliseconds (max 600000)",
            },
            "description": STRING,
            "run_in_background": {"type": "boolean"},
        },
        ["command"],
    )
    args = shell_call_arguments(claude, cmd)
    assert args["timeout"] == 600_000 and args["description"]
    assert "run_in_background" not in args  # optional and unknown: left out
    exec_command = fn_tool(
        "exec_command",
        {
            "cmd": STRING,
            "yield_time_ms": {"type": "integer", "maximum": 30_000},
            "login": {"type": "boolean"},
        },
        ["cmd", "login"],
    )
    assert shell_call_arguments(exec_command, cmd) == {
        "cmd": cmd,
        "yield_time_ms": 30_000,
        "login": False,
    }
    seconds = fn_tool("run", {"command": STRING, "timeout_seconds": {"type": "integer"}}, [])
    assert shell_call_arguments(seconds, cmd)["timeout_seconds"] == 600
    assert shell_call_arguments(Tool("run"), cmd) == {"command": cmd}  # no schema at all


def solver_request(provider: ScriptedProvider, protocol: str, body: dict) -> dict:
    status, _, payload = send(provider, body, path=PATHS[protocol])
    assert status == 200, payload
    return payload


def test_the_scientist_calls_a_chat_bash_tool_then_stops() -> None:
    bash = {"type": "function", "function": {"name": "bash", "parameters": {
        "type": "object", "properties": {"command": STRING}, "required": ["command"]}}}  # fmt: skip
    messages = [{"role": "user", "content": "Solve the task in INSTRUCTIONS.md"}]
    with ScriptedProvider(solve_task_script()) as provider:
        client = openai_client(provider)
        first = client.chat.completions.create(model=MODEL, messages=messages, tools=[*TOOLS, bash])
        (tc,) = first.choices[0].message.tool_calls
        messages += [
            first.choices[0].message.model_dump(exclude_none=True),
            {"role": "tool", "tool_call_id": tc.id, "content": "local_validation_score: 0.8123\n"},
        ]
        second = client.chat.completions.create(
            model=MODEL, messages=messages, tools=[*TOOLS, bash]
        )
        assert provider.mismatches == []
        usage = provider.usage_totals()
    assert tc.function.name == "bash"
    assert json.loads(tc.function.arguments) == {"command": solve_command()}
    assert second.choices[0].message.tool_calls is None
    assert second.choices[0].finish_reason == "stop"
    assert "0.8123" in second.choices[0].message.content
    assert "local_validation_score" not in second.choices[0].message.content
    assert usage[0] > 0 and usage[1] > 0


def test_the_scientist_calls_a_responses_shell_tool_then_stops() -> None:
    shell = {
        "type": "function",
        "name": "shell",
        "parameters": {
            "type": "object",
            "properties": {
                "command": {"type": "array", "items": STRING},
                "workdir": STRING,
                "timeout_ms": NUMBER,
            },
            "required": ["command"],
        },
    }
    tools = [shell, {"type": "custom", "name": "apply_patch"}, {"type": "web_search"}]
    with ScriptedProvider(solve_task_script()) as provider:
        client = openai_client(provider)
        with client.responses.stream(model=MODEL, input="Solve it.", tools=tools) as stream:
            first = stream.get_final_response()
        (item,) = first.output
        follow_up = [
            {"role": "user", "content": "Solve it."},
            {
                "type": "function_call",
                "call_id": item.call_id,
                "name": item.name,
                "arguments": item.arguments,
            },
            {"type": "function_call_output", "call_id": item.call_id, "output": "boom: Traceback"},
        ]
        second = client.responses.create(model=MODEL, input=follow_up, tools=tools)
    assert (item.type, item.name) == ("function_call", "shell")
    args = json.loads(item.arguments)
    assert args["command"][:2] == ["bash", "-lc"] and MARKER in args["command"][2]
    assert (args["workdir"], args["timeout_ms"]) == (".", 600_000)
    assert [o.type for o in second.output] == ["message"]
    assert "Done" in second.output_text and "local_validation_score" not in second.output_text


def test_the_scientist_calls_an_anthropic_bash_tool_then_stops() -> None:
    bash = {
        "name": "Bash",
        "description": "Executes a bash command",
        "input_schema": {
            "type": "object",
            "properties": {"command": STRING, "description": STRING, "timeout": NUMBER},
            "required": ["command", "description"],
        },
    }
    tools = [*ANTHROPIC_TOOLS, bash]
    with ScriptedProvider(solve_task_script()) as provider:
        client = anthropic_client(provider)
        messages: list[dict] = [{"role": "user", "content": "Solve it."}]
        with client.messages.stream(
            model=MODEL, max_tokens=4096, messages=messages, tools=tools
        ) as s:
            first = s.get_final_message()
        (use,) = first.content
        messages += [
            {"role": "assistant", "content": [use.model_dump(exclude_none=True)]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use.id,
                                          "content": [{"type": "text", "text": "local_validation_score: 0.7"}]}]},
        ]  # fmt: skip
        second = client.messages.create(
            model=MODEL, max_tokens=4096, messages=messages, tools=tools
        )
    assert (use.type, use.name, first.stop_reason) == ("tool_use", "Bash", "tool_use")
    assert use.input["command"] == solve_command() and use.input["description"]
    assert use.input["timeout"] == 600  # seconds: nothing says milliseconds
    assert second.stop_reason == "end_turn"
    assert [b.type for b in second.content] == ["text"] and "0.7" in second.content[0].text


BLOCK = re.compile(r"```bash\n(.*?)\n```", re.DOTALL)


def test_the_scientist_without_tools_writes_one_bash_block_then_the_sentinel() -> None:
    system = "Reply with one bash block. When done, run: echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"
    with ScriptedProvider(solve_task_script()) as provider:
        history = [{"role": "system", "content": system}, {"role": "user", "content": "Solve it."}]
        first = send(provider, chat_body(history, tools=[]))[2]["choices"][0]["message"]
        history += [
            {"role": "assistant", "content": first["content"]},
            {"role": "user", "content": "<returncode>0</returncode><output>ok</output>"},
        ]
        second = send(provider, chat_body(history, tools=[]))[2]["choices"][0]["message"]
        plain = [{"role": "user", "content": "Solve it."}, *history[2:]]
        third = send(provider, chat_body(plain, tools=[]))[2]["choices"][0][
            "message"
        ]  # no sentinel
    assert first["content"].startswith("THOUGHT: ") and "tool_calls" not in first
    assert BLOCK.findall(first["content"]) == [solve_command()]
    assert BLOCK.findall(second["content"]) == ["echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"]
    assert BLOCK.findall(third["content"]) == [] and "Done" in third["content"]


def test_the_solving_command_never_prints_its_marker_as_source() -> None:
    # `agents check` looks for the score line in later requests; the command itself is echoed
    # back in them, so its source must not contain the line it prints.
    assert "local_validation_score" not in solve_command()
    assert MARKER in solve_command()
    assert "py=/opt/venv/bin/python;" in solve_command("/opt/venv/bin/python")
    assert task_solver(python="/x/python").command == solve_command("/x/python")


@pytest.mark.parametrize("has_sklearn", [True, False])
def test_the_solving_command_keeps_an_interpreter_with_sklearn_else_the_venvs(
    has_sklearn: bool, tmp_path: Path
) -> None:
    # Only the choice runs (the command's first line), as a login shell with another PATH would.
    # Without site-packages (-S), this interpreter has no scikit-learn.
    python = tmp_path / "python"
    python.write_text(f'#!/bin/sh\nexec {sys.executable} {"" if has_sklearn else "-S"} "$@"\n')
    python.chmod(0o755)
    choice = solve_command(str(python)).splitlines()[0]
    env = {"PATH": "/usr/bin:/bin", "VIRTUAL_ENV": str(tmp_path / "venv")}
    shown = subprocess.run(
        ["bash", "-c", f'{choice}\nprintf %s "$py"'], env=env, capture_output=True, text=True
    )
    chosen = str(python) if has_sklearn else f"{tmp_path}/venv/bin/python"
    assert shown.stdout == chosen, shown


# integration: a whole attempt of the scripted scientist on a prepared twin
@pytest.mark.integration
@pytest.mark.timeout(300)
@pytest.mark.parametrize("task_id", ["bank-customer-churn-ict-u-ai", "playground-series-s6e1"])
def test_the_scientist_solves_a_prepared_twin_end_to_end(small_paths, tmp_path, task_id) -> None:
    """A minimal tool-running CLI loop (the official client, ``bash -lc`` under ``uv run``)."""
    task = prepared(small_paths, task_id)
    for path in task.public.iterdir():
        shutil.copy(path, tmp_path / path.name)
    bash = {"type": "function", "function": {"name": "bash", "parameters": {
        "type": "object", "properties": {"command": STRING}, "required": ["command"]}}}  # fmt: skip
    messages: list[dict] = [{"role": "user", "content": "Solve the task in this folder."}]
    outputs = []
    with ScriptedProvider(solve_task_script()) as provider:
        client = openai_client(provider)
        for _ in range(4):
            message = (
                client.chat.completions.create(model=MODEL, messages=messages, tools=[bash])
                .choices[0]
                .message
            )
            messages.append(message.model_dump(exclude_none=True))
            if not message.tool_calls:
                break
            for tc in message.tool_calls:
                ran = subprocess.run(
                    ["uv", "run", "--frozen", "--no-sync", "--project", str(REPO_ROOT),
                     "bash", "-lc", json.loads(tc.function.arguments)["command"]],
                    cwd=tmp_path, capture_output=True, text=True, timeout=240,
                )  # fmt: skip
                outputs.append(ran)
                messages.append(
                    {"role": "tool", "tool_call_id": tc.id, "content": ran.stdout + ran.stderr}
                )
        requests = len(provider.requests)
    (ran,) = outputs
    assert ran.returncode == 0, ran.stderr
    assert requests == 2 and "local_validation_score: " in messages[-2]["content"]
    assert "validation score" in messages[-1]["content"] and "tool_calls" not in messages[-1]
    spec = load_task(small_paths.tasks_dir, task_id)
    answers = pd.read_csv(task.answers_path)
    score = grade_submission(tmp_path / "submission.csv", spec, answers).score
    constant = task.meta().constant_score
    better = score - constant if spec.metric.direction == "maximize" else constant - score
    assert better > 0.05 * abs(constant), (score, constant)


# --- per-CLI modes of the scientist: mini-swe-agent v2, aider ------------------------------------

BASH_TOOL = {"type": "function", "function": {"name": "bash", "parameters": {
    "type": "object", "properties": {"command": STRING}, "required": ["command"]}}}  # fmt: skip


def test_the_scientist_ends_a_mini_swe_agent_run_with_the_sentinel_as_a_tool_call() -> None:
    system = "Finish by issuing the command: `echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT`."
    history: list[dict] = [
        {"role": "system", "content": system},
        {"role": "user", "content": "Please solve this issue: ..."},
    ]
    with ScriptedProvider(solve_task_script()) as provider:
        replies = []
        for output in ("local_validation_score: 0.7\n", "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT\n"):
            body = chat_body(history, tools=[BASH_TOOL])
            message = send(provider, body)[2]["choices"][0]["message"]
            replies.append(message)
            (tc,) = message["tool_calls"]
            history += [message, {"role": "tool", "tool_call_id": tc["id"], "content": output}]
        last = send(provider, chat_body(history, tools=[BASH_TOOL]))[2]["choices"][0]["message"]
    first, submit = (json.loads(r["tool_calls"][0]["function"]["arguments"]) for r in replies)
    assert MARKER in first["command"]
    assert submit == {"command": "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"}
    assert "tool_calls" not in last and "Done" in last["content"]  # the sentinel only once


def test_the_scientist_writes_solve_py_for_aider_then_stops_editing() -> None:
    from runner.agents.scripted_provider import SOLVE_PROGRAM

    system = "Act as an expert software developer.\n... *SEARCH/REPLACE block* Rules: ..."
    history: list[dict] = [
        {"role": "system", "content": system},
        {"role": "user", "content": "Change get_factorial() to use math.factorial"},
        {"role": "assistant", "content": "mathweb/flask/app.py\n```python\n<<<<<<< SEARCH\n..."},
        {"role": "user", "content": "# Your task: ... local_validation_score: <number> ..."},
    ]
    with ScriptedProvider(solve_task_script()) as provider:
        edit = send(provider, chat_body(history, tools=[]))[2]["choices"][0]["message"]
        history += [
            {"role": "assistant", "content": edit["content"]},
            {"role": "user", "content": "I updated the files."},
            {"role": "assistant", "content": "Ok."},
            {"role": "user", "content": "I ran this command:\n\npython solve.py\n\nAnd got this "
                                        "output:\n\nlocal_validation_score: 0.721689\n"},
        ]  # fmt: skip
        done = send(provider, chat_body(history, tools=[]))[2]["choices"][0]["message"]
    block = (
        "solve.py\n```python\n<<<<<<< SEARCH\n=======\n" + SOLVE_PROGRAM + ">>>>>>> REPLACE\n```"
    )
    assert block in edit["content"] and "tool_calls" not in edit
    assert "<<<<<<<" not in done["content"] and "```" not in done["content"]
    assert "Done" in done["content"] and "0.721689" in done["content"]
