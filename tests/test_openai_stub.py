"""The scripted OpenAI-compatible server (tests/openai_stub.py), driven over real HTTP on loopback.

Requests are sent with urllib in the shape the official client sends; if the ``openai``
package is importable the same checks also run through it (it is never installed for this).
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from tests.openai_stub import (
    ScriptedProvider,
    call,
    error,
    hang,
    load_conversation,
    repeat,
    reply,
    save_conversation,
)

pytestmark = pytest.mark.timeout(60)

CONVERSATIONS = Path(__file__).parent / "conversations"
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
) -> tuple[int, dict[str, str], Any]:
    """(status, headers, parsed JSON) for one request, errors included."""
    data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
    request = urllib.request.Request(provider.base_url + path, data=data, method=method)
    request.add_header("Content-Type", "application/json")
    request.add_header("User-Agent", "OpenAI/Python 1.0 (urllib test)")
    if key is not None:
        request.add_header("Authorization", f"Bearer {key}")
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
    return [t for t in threading.enumerate() if t.name.startswith("openai-stub")]


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
        (None, chat_body(stream=True), 400, "unsupported_value"),
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
        assert any(t.name.startswith("openai-stub-handler") for t in stub_threads())
        start = time.monotonic()
    elapsed = time.monotonic() - start
    client.join(timeout=5)

    assert elapsed < 2, f"context exit took {elapsed:.2f} s during a 60 s hang"
    assert stub_threads() == [], "a server or handler thread outlived the provider"
    assert not client.is_alive()
    assert outcome == {"status": 504}, "a hang cut short by shutdown still answers 504"


def test_silent_client_does_not_block_shutdown() -> None:
    with ScriptedProvider([]) as provider, socket.create_connection(("127.0.0.1", provider.port)):
        time.sleep(0.1)  # a connection that never sends a request line
        start = time.monotonic()
        provider.close()
        elapsed = time.monotonic() - start
    assert elapsed < 0.9, f"close took {elapsed:.2f} s: it waited out the socket timeout"
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


# --- the official client (a dev dependency): the stub speaks the real protocol ----------------


def test_official_openai_client() -> None:
    import openai

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
    assert time.monotonic() - start < 2
    assert provider.mismatches == []
    assert provider.usage_totals() == (7, 3)
    headers = {k.lower(): v for k, v in provider.requests[0].headers.items()}
    assert headers["authorization"] == "REDACTED"  # the official client sends it lower-case
