"""How the built-in agent's client classifies each model call, on raw HTTP over loopback.

The scripted provider plays what real providers send; this raw server sends what they may
send besides (an error inside a 200, a body shorter than its length, a reply that drips, a
connection dropped before the status line), byte for byte. Each call must come out as the
provider-fault rule says (:mod:`runner.agents.provider_faults`), and never as an exception the
session does not expect.
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
from collections.abc import Iterator
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runner.agents.llm.client import CallFailed, ChatClient, OutOfTime
from tools.servers import free_port

BODY = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
COMPLETION = {
    "choices": [{"message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}],
    "usage": {"prompt_tokens": 7, "completion_tokens": 3},
}


def http(status: int, body: bytes, *headers: str, length: int | None = None) -> bytes:
    """A close-delimited reply, or one with Content-Length ``length`` (default: the body's)."""
    lines = [f"HTTP/1.1 {status} X", "Connection: close", *headers]
    if length is not None:
        lines.append(f"Content-Length: {length}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


class RawServer:
    """Answers each connection with the next of ``replies``: bytes, or (bytes, seconds) pieces
    sent with a pause before each; then closes the connection."""

    def __init__(self, replies: list[bytes | list[tuple[bytes, float]]]):
        self.replies = list(replies)
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.base_url = f"http://127.0.0.1:{self.listener.getsockname()[1]}/v1"
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        for reply in self.replies:
            conn, _ = self.listener.accept()
            with conn:
                _read_request(conn)
                pieces = [(reply, 0.0)] if isinstance(reply, bytes) else reply
                try:
                    for data, pause in pieces:
                        time.sleep(pause)
                        conn.sendall(data)
                except OSError:
                    pass  # the client gave up first

    def close(self) -> None:
        self.listener.close()


def _read_request(conn: socket.socket) -> None:
    data = b""
    while b"\r\n\r\n" not in data:
        data += conn.recv(65536)
    head, _, body = data.partition(b"\r\n\r\n")
    length = next(
        int(line.split(b":")[1])
        for line in head.split(b"\r\n")
        if line.lower().startswith(b"content-length")
    )
    while len(body) < length:
        body += conn.recv(65536)


@pytest.fixture
def serve() -> Iterator:
    servers: list[RawServer] = []

    def start(*replies: bytes | list[tuple[bytes, float]]) -> RawServer:
        servers.append(RawServer(list(replies)))
        return servers[-1]

    yield start
    for server in servers:
        server.close()


def client(url: str, retries: int = 0, timeout: float = 30) -> ChatClient:
    return ChatClient(url, "k", request_timeout=timeout, max_retries=retries, on_retry=None)


def counts(c: ChatClient) -> tuple[object, ...]:
    f = c.calls.counts().model_usage(None)
    keys = (f.requests, f.steps, f.provider_faults, f.interrupted_calls, f.tokens_in)
    return (*keys, (f.failed_tokens_in, f.failed_tokens_out))


def test_a_complete_reply_is_a_step(serve):
    body = json.dumps(COMPLETION).encode()
    c = client(serve(http(200, body, length=len(body))).base_url)
    assert c.complete(BODY, time.monotonic() + 30)["usage"]["prompt_tokens"] == 7
    assert counts(c) == (1, 1, 0, 0, 7, (0, 0))
    assert c.calls.unrecovered() == (0, ())


ERROR_200 = {
    "error": {"message": "upstream overloaded", "code": 502},
    "usage": {"prompt_tokens": 40, "completion_tokens": 5},
}
FINISH_ERROR = {
    "choices": [{"message": {"content": ""}, "finish_reason": "error", "error": {"message": "x"}}]
}


@pytest.mark.parametrize(
    ("reply", "interrupted", "fault", "failed"),
    [
        # an error event in place of the completion: a complete body, so it ended (not
        # interrupted); its tokens failed
        (
            http(200, json.dumps(ERROR_200).encode()),
            0,
            "error event in a 200 reply (502)",
            (40, 5),
        ),
        # the terminal event came, saying the generation failed
        (
            http(200, json.dumps(FINISH_ERROR).encode()),
            0,
            "error event in a 200 reply",
            (0, 0),
        ),
        # a complete JSON object that is no completion
        (
            http(200, json.dumps({"id": "x", "usage": ERROR_200["usage"]}).encode()),
            1,
            "reply cut by the provider before its end",
            (40, 5),
        ),
        # close-delimited and cut: only the broken JSON tells
        (
            http(200, json.dumps(COMPLETION).encode()[:30]),
            1,
            "reply cut by the provider before its end",
            (0, 0),
        ),
        # shorter than its Content-Length
        (
            http(200, b'{"choices": [', length=500),
            1,
            "reply cut by the provider before its end",
            (0, 0),
        ),
        # chunked, without the last chunk
        (
            http(200, b'a\r\n{"choices"\r\n', "Transfer-Encoding: chunked"),
            1,
            "reply cut by the provider before its end",
            (0, 0),
        ),
        (b"", 1, "the provider closed the connection before its reply", (0, 0)),
        (http(503, b"<html>busy</html>"), 0, "HTTP 503", (0, 0)),
        (http(429, b"{}"), 0, "HTTP 429 without Retry-After", (0, 0)),
        (http(429, b"{}", "Retry-After: 2"), 0, "HTTP 429 with Retry-After: 2", (0, 0)),
    ],
)
def test_a_provider_fault_is_counted_with_its_evidence(serve, reply, interrupted, fault, failed):
    c = client(serve(reply).base_url)
    with pytest.raises(CallFailed, match="gave up after 0 retries"):
        c.complete(BODY, time.monotonic() + 30)
    assert counts(c) == (1, 0, 1, interrupted, 0, failed)
    assert c.calls.unrecovered() == (1, (f"call 1: {fault}",))


@pytest.mark.parametrize("finish", [{}, {"finish_reason": None}, {"finish_reason": "length"}])
def test_a_complete_body_is_a_step_whatever_its_finish_reason_but_error(serve, finish):
    """As the gateway counts the JSON bodies it forwards (tests/runner/agents/test_provider_faults.py
    checks both sides agree on any body)."""
    choice = {"message": {"role": "assistant", "content": "half"}, **finish}
    body = json.dumps({**COMPLETION, "choices": [choice]}).encode()
    c = client(serve(http(200, body)).base_url)
    assert c.complete(BODY, time.monotonic() + 30)["choices"] == [choice]
    assert counts(c) == (1, 1, 0, 0, 7, (0, 0))


def test_an_unreachable_provider_is_a_fault_and_no_call_was_interrupted():
    c = client(f"http://127.0.0.1:{free_port()}/v1")
    with pytest.raises(CallFailed):
        c.complete(BODY, time.monotonic() + 30)
    assert counts(c)[:4] == (1, 0, 1, 0)
    assert c.calls.unrecovered() == (1, ("call 1: the provider could not be reached",))


def test_a_fault_then_a_step_recovers(serve, monkeypatch):
    monkeypatch.setattr("runner.agents.llm.client._backoff", lambda failures: 0.0)
    body = json.dumps(COMPLETION).encode()
    server = serve(http(500, b"{}"), http(200, body[:20]), http(200, body, length=len(body)))
    c = client(server.base_url, retries=2)
    c.complete(BODY, time.monotonic() + 30)
    assert counts(c) == (3, 1, 2, 1, 7, (0, 0))
    assert c.calls.unrecovered() == (0, ()) and c.stats.retries == 2


@pytest.mark.parametrize("status", [400, 422])
def test_another_4xx_is_the_agents_and_not_retried(serve, status):
    c = client(serve(http(status, b'{"error": {"message": "bad request"}}')).base_url, retries=3)
    with pytest.raises(CallFailed, match=f"refused the request: HTTP {status}"):
        c.complete(BODY, time.monotonic() + 30)
    assert counts(c) == (1, 0, 0, 0, 0, (0, 0))


def test_a_dripping_reply_is_cut_at_the_request_timeout_as_a_fault(serve):
    body = json.dumps(COMPLETION).encode()
    drip = [(http(200, b"", length=len(body)), 0.0)] + [(body[i : i + 1], 0.3) for i in range(8)]
    c = client(serve(drip).base_url, timeout=1.0)
    with pytest.raises(CallFailed):
        c.complete(BODY, time.monotonic() + 30)
    assert counts(c)[:4] == (1, 0, 1, 1)
    assert c.calls.unrecovered() == (1, ("call 1: the provider did not answer in time",))


def test_the_budget_ending_mid_reply_is_interrupted_and_no_fault(serve):
    body = json.dumps(COMPLETION).encode()
    drip = [(http(200, b"", length=len(body)), 0.0)] + [(body[i : i + 1], 0.3) for i in range(8)]
    c = client(serve(drip).base_url, timeout=30)
    with pytest.raises(OutOfTime):
        c.complete(BODY, time.monotonic() + 1.0)
    assert counts(c)[:4] == (1, 0, 0, 1)
    assert c.calls.unrecovered() == (0, ())


# What each reply the provider may send is, by the rule: (a step, a provider fault, interrupted).
BODY_OK = json.dumps(COMPLETION).encode()
REPLIES = {
    "step": (http(200, BODY_OK, length=len(BODY_OK)), (True, None, False)),
    "429": (http(429, b"{}"), (False, "HTTP 429 without Retry-After", False)),
    "429 retry-after": (
        http(429, b"{}", "Retry-After: 0"),
        (False, "HTTP 429 with Retry-After: 0", False),
    ),
    "503": (http(503, b"{}"), (False, "HTTP 503", False)),
    "error in 200": (
        http(200, json.dumps(ERROR_200).encode()),
        (False, "error event in a 200 reply (502)", False),
    ),
    "close cut": (
        http(200, BODY_OK[:25]),
        (False, "reply cut by the provider before its end", True),
    ),
    "chunked cut": (
        http(200, b'5\r\n{"cho\r\n', "Transfer-Encoding: chunked"),
        (False, "reply cut by the provider before its end", True),
    ),
    "lost": (b"", (False, "the provider closed the connection before its reply", True)),
    "400": (http(400, b'{"error": {"message": "no"}}'), (False, None, False)),
}


# 40 generated sequences of up to 8 replies per run, each over real loopback HTTP.
@settings(max_examples=40, deadline=None)
@given(kinds=st.lists(st.sampled_from(sorted(REPLIES)), min_size=1, max_size=8))
def test_any_sequence_of_replies_is_counted_by_the_rule(kinds: list[str]):
    server = RawServer([REPLIES[k][0] for k in kinds])
    c = client(server.base_url, retries=len(kinds))
    try:
        with mock.patch("runner.agents.llm.client._backoff", lambda failures: 0.0):
            while c.calls.calls < len(kinds):
                c.max_retries = len(kinds) - c.calls.calls - 1  # no call past the last reply
                with contextlib.suppress(CallFailed):  # a 400, or retries used up
                    c.complete(BODY, time.monotonic() + 30)
    finally:
        server.close()
    classes = [REPLIES[k][1] for k in kinds]
    trailing: list[str] = []
    for number, (_, fault, _) in reversed(list(enumerate(classes, 1))):
        if fault is None:
            break
        trailing.insert(0, f"call {number}: {fault}")
    fields = c.calls.counts().model_usage(None).model_dump()
    steps = sum(step for step, _, _ in classes)
    assert fields == fields | {
        "requests": len(kinds),
        "steps": steps,
        "tokens_in": 7 * steps,
        "provider_faults": sum(fault is not None for _, fault, _ in classes),
        "interrupted_calls": sum(interrupted for _, _, interrupted in classes),
        "failed_tokens_in": 40 * kinds.count("error in 200"),
    }
    assert c.calls.unrecovered() == (len(trailing), tuple(trailing[-5:]))


def test_evidence_never_holds_the_key(serve):
    key = "sk-live-0123abcd"
    server = serve(
        http(429, b"{}", f"Retry-After: {key}"),
        http(503, json.dumps({"error": {"code": key, "message": key}}).encode()),
    )
    c = ChatClient(server.base_url, key, request_timeout=30, max_retries=0)
    for _ in range(2):
        with pytest.raises(CallFailed):
            c.complete(BODY, time.monotonic() + 30)
    # The reply's body is redacted as it is read: its code is stars, no code to show.
    assert c.calls.unrecovered() == (
        2,
        ("call 1: HTTP 429 with Retry-After: [redacted]", "call 2: HTTP 503"),
    )


def test_nothing_read_from_the_provider_holds_the_key(serve):
    # A provider reflecting the key in its reply, an error or a broken status line: the
    # conversation (and so the sandbox's tool calls, the transcript) and the messages that
    # reach the record get its forms starred out (runner/agents/redaction.py).
    key = "sk-live-0123abcd/xyz"
    reflected = dict(
        COMPLETION,
        choices=[
            {
                "message": {"role": "assistant", "content": f"{key} \\u0073k"},
                "finish_reason": "stop",
            }
        ],
    )
    server = serve(
        http(200, json.dumps(reflected).replace("sk-", "\\u0073k-").encode()),
        http(401, json.dumps({"error": {"message": f"bad key {key}"}}).encode()),
        f"HTTP/1.1 {key}\r\n\r\n".encode(),
    )
    c = ChatClient(server.base_url, key, request_timeout=30, max_retries=0)
    content = c.complete(BODY, time.monotonic() + 30)["choices"][0]["message"]["content"]
    assert key not in content and content.startswith("*" * len(key))
    with pytest.raises(Exception) as refused:
        c.complete(BODY, time.monotonic() + 30)
    assert key not in str(refused.value) and "bad key" in str(refused.value)
    with pytest.raises(CallFailed) as broken:
        c.complete(BODY, time.monotonic() + 30)
    assert key not in str(broken.value)
