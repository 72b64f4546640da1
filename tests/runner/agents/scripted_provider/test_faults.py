"""The scripted provider's fault steps, on the wire, for every protocol, streamed and not.

A provider fails a call in four ways the harness must tell apart: an HTTP error before the
reply (``error``: 429 with or without Retry-After, 5xx), an error event after some of the
reply (``stream_error``), and a reply cut before its terminal event, close-delimited or
chunked (``cut``). Each is read here byte for byte (raw sockets: the framing is the point)
and through the official clients that define the protocols.
"""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

import anthropic
import httpx
import openai
import pytest

from runner.agents.scripted_provider import (
    ANTHROPIC_MESSAGES,
    OPENAI_CHAT,
    OPENAI_RESPONSES,
    PROTOCOLS,
    ScriptedProvider,
    call,
    cut,
    error,
    load_conversation,
    reply,
    save_conversation,
    stream_error,
)

pytestmark = pytest.mark.timeout(60)

KEY = "sk-test-key"
MODEL = "stub/model"
TEXT = "The answer, in several deltas: " + "forty-two " * 12
ARGS = {"command": "python solve.py && head submission.csv"}
PATHS = {
    OPENAI_CHAT: "/v1/chat/completions",
    OPENAI_RESPONSES: "/v1/responses",
    ANTHROPIC_MESSAGES: "/v1/messages",
}


def request_body(protocol: str, stream: bool) -> dict[str, Any]:
    if protocol == OPENAI_CHAT:
        body: dict[str, Any] = {"messages": [{"role": "user", "content": "Go."}]}
    elif protocol == OPENAI_RESPONSES:
        body = {"input": "Go."}
    else:
        body = {"max_tokens": 100, "messages": [{"role": "user", "content": "Go."}]}
    return {"model": MODEL, "stream": stream, **body}


class Raw:
    """One HTTP exchange as bytes: status, headers, the body as sent (framing included)."""

    def __init__(self, data: bytes):
        head, _, self.body = data.partition(b"\r\n\r\n")
        lines = head.decode().split("\r\n")
        self.status = int(lines[0].split()[1])
        self.headers = {k.lower(): v for k, v in (line.split(": ", 1) for line in lines[1:])}

    @property
    def chunked(self) -> bool:
        return self.headers.get("transfer-encoding") == "chunked"

    def payload(self) -> tuple[bytes, bool]:
        """The body without chunk framing, and whether it ended as its framing says it must."""
        if not self.chunked:
            if "content-length" in self.headers:
                return self.body, len(self.body) == int(self.headers["content-length"])
            return self.body, False  # close-delimited: nothing says it is complete
        out, rest = bytearray(), self.body
        while rest:
            size_line, sep, rest = rest.partition(b"\r\n")
            if not sep:
                return bytes(out), False
            size = int(size_line, 16)
            if size == 0:
                return bytes(out), rest == b"\r\n"
            out += rest[:size]
            rest = rest[size + 2 :]
        return bytes(out), False  # no terminating chunk

    def events(self) -> list[tuple[str | None, Any]]:
        """The (event, data) pairs of a server-sent event stream."""
        text = self.payload()[0].decode()
        pairs = []
        for block in text.split("\n\n"):
            if block.strip():
                fields = dict(line.split(": ", 1) for line in block.split("\n"))
                data = fields["data"]
                pairs.append((fields.get("event"), data if data == "[DONE]" else json.loads(data)))
        return pairs


def exchange(provider: ScriptedProvider, protocol: str, stream: bool) -> Raw:
    body = json.dumps(request_body(protocol, stream)).encode()
    head = (
        f"POST {PATHS[protocol]} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {KEY}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    with socket.create_connection(("127.0.0.1", provider.port), timeout=10) as sock:
        sock.sendall(head.encode() + body)
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    return Raw(data)


def delta_count(protocol: str, events: list[tuple[str | None, Any]]) -> int:
    if protocol == OPENAI_CHAT:
        return sum(
            1
            for _, d in events[1:]
            if isinstance(d, dict) and d.get("choices") and d["choices"][0]["delta"]
        )
    kind = ".delta" if protocol == OPENAI_RESPONSES else "content_block_delta"
    return sum(1 for _, d in events if str(d.get("type", "")).endswith(kind))


def terminal_seen(protocol: str, events: list[tuple[str | None, Any]]) -> bool:
    if protocol == OPENAI_CHAT:
        return any(d == "[DONE]" for _, d in events)
    if protocol == OPENAI_RESPONSES:
        return any(d["type"] in ("response.completed", "response.incomplete") for _, d in events)
    return any(d["type"] == "message_stop" for _, d in events)


# --- HTTP errors before the reply --------------------------------------------------------------


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_http_errors_before_the_reply_with_and_without_retry_after(protocol: str) -> None:
    script = [error(429, retry_after=3), error(429), error(500), error(503, retry_after=0.5)]
    script += [error(529)] if protocol == ANTHROPIC_MESSAGES else []
    with ScriptedProvider(script) as provider:
        answers = [exchange(provider, protocol, stream=i % 2 == 0) for i in range(len(script))]
    assert [a.status for a in answers] == [s["status"] for s in script]
    assert [a.headers.get("retry-after") for a in answers[:4]] == ["3", None, None, "0.5"]
    for answer in answers:  # an HTTP error is one complete JSON document, streamed or not
        body, complete = answer.payload()
        assert complete and answer.headers["content-type"] == "application/json"
        document = json.loads(body)
        kind = document["error"]["type"]
        if protocol == ANTHROPIC_MESSAGES:
            assert document["type"] == "error"
    assert kind == ("overloaded_error" if protocol == ANTHROPIC_MESSAGES else "server_error")


# --- an error event after some of the reply ---------------------------------------------------


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("after", [0, 2])
def test_a_stream_error_comes_after_some_deltas_instead_of_the_terminal_event(
    protocol: str, after: int
) -> None:
    status = 529 if protocol == ANTHROPIC_MESSAGES else 500
    step = stream_error(
        TEXT, [call("run", ARGS)], (300, 45), after=after, status=status, message="overloaded"
    )
    with ScriptedProvider([step, step]) as provider:
        streamed = exchange(provider, protocol, stream=True)
        plain = exchange(provider, protocol, stream=False)
        served = provider.served
        assert provider.usage_totals() == (0, 0)  # no complete reply
    assert streamed.status == 200 and streamed.payload()[1]  # the stream itself ends cleanly
    events = streamed.events()
    assert delta_count(protocol, events) == after
    assert not terminal_seen(protocol, events)
    event, last = events[-1]
    if protocol == OPENAI_CHAT:
        assert last == {
            "error": {"message": "overloaded", "type": "server_error", "param": None, "code": None}
        }
    elif protocol == OPENAI_RESPONSES:
        assert event == last["type"] == "response.failed"
        assert last["response"]["status"] == "failed" and last["response"]["usage"] is None
        assert last["response"]["error"] == {"code": "server_error", "message": "overloaded"}
        assert last["sequence_number"] == len(events) - 1
    else:
        assert event == "error"
        assert last == {
            "type": "error",
            "error": {"type": "overloaded_error", "message": "overloaded"},
        }
        assert events[0][1]["message"]["usage"]["input_tokens"] == 300
    # The usage the provider had reported by the fault: only Anthropic's message_start says any.
    reported = (300, 1) if protocol == ANTHROPIC_MESSAGES else (0, 0)
    assert (served[0].status, served[0].prompt_tokens, served[0].completion_tokens) == (
        200,
        *reported,
    )
    # Not streamed, a provider cannot fail after its 200: the error is the HTTP status.
    assert plain.status == status and json.loads(plain.payload()[0])["error"]["message"] == (
        "overloaded"
    )
    assert (served[1].status, served[1].prompt_tokens) == (status, 0)


def test_official_clients_raise_on_an_error_event() -> None:
    steps = [stream_error(TEXT, status=500, message="upstream fell over")] * 2
    steps.append(stream_error(TEXT, status=529, message="Overloaded"))
    with ScriptedProvider(steps) as provider:
        client = openai.OpenAI(base_url=provider.base_url, api_key=KEY, max_retries=0)
        with pytest.raises(openai.APIError, match="upstream fell over"):
            for _ in client.chat.completions.create(
                model=MODEL, messages=[{"role": "user", "content": "Go."}], stream=True
            ):
                pass
        kinds = [e.type for e in client.responses.create(model=MODEL, input="Go.", stream=True)]
        claude = anthropic.Anthropic(base_url=provider.root_url, api_key=KEY, max_retries=0)
        with pytest.raises(anthropic.APIStatusError) as overloaded:
            for _ in claude.messages.create(
                model=MODEL,
                max_tokens=10,
                messages=[{"role": "user", "content": "Go."}],
                stream=True,
            ):
                pass
    assert kinds[-1] == "response.failed" and "response.completed" not in kinds
    assert isinstance(overloaded.value.body, dict)
    assert overloaded.value.body["error"]["type"] == "overloaded_error"


# --- a reply cut before its terminal event ----------------------------------------------------


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("framing", ["close", "chunked"])
def test_a_cut_stream_stops_before_the_terminal_event(protocol: str, framing: str) -> None:
    step = cut(TEXT, [call("run", ARGS)], (300, 45), after=3, framing=framing)  # type: ignore[arg-type]
    with ScriptedProvider([step, step]) as provider:
        streamed = exchange(provider, protocol, stream=True)
        plain = exchange(provider, protocol, stream=False)
        served = provider.served
        assert provider.usage_totals() == (0, 0)
    for answer in (streamed, plain):
        assert answer.status == 200 and "content-length" not in answer.headers
        assert answer.chunked is (framing == "chunked")
        assert answer.payload()[1] is False  # never complete by its framing
    events = streamed.events()  # every event sent is whole: the cut falls between events
    assert delta_count(protocol, events) == 3
    assert not terminal_seen(protocol, events)
    with pytest.raises(json.JSONDecodeError):  # half a JSON document
        json.loads(plain.payload()[0])
    reported = (300, 1) if protocol == ANTHROPIC_MESSAGES else (0, 0)
    assert [(s.prompt_tokens, s.completion_tokens) for s in served] == [reported, (0, 0)]


def test_a_cut_with_more_deltas_asked_than_sent_stops_before_the_terminal_part() -> None:
    step = cut("short", after=50)
    with ScriptedProvider([step] * 3) as provider:
        answers = {p: exchange(provider, p, stream=True).events() for p in PROTOCOLS}
    chat = answers[OPENAI_CHAT]
    assert [d["choices"][0]["finish_reason"] for _, d in chat] == [None, None]
    assert answers[OPENAI_RESPONSES][-1][1]["type"] == "response.output_item.done"
    assert answers[ANTHROPIC_MESSAGES][-1][1]["type"] == "content_block_stop"


def test_official_clients_on_cut_streams() -> None:
    """A chunked cut is an error to the client; a close-delimited one just ends early."""
    steps = [cut(TEXT, framing="chunked"), cut(TEXT, framing="close")]
    with ScriptedProvider(steps) as provider:
        client = openai.OpenAI(base_url=provider.base_url, api_key=KEY, max_retries=0)
        messages: Any = [{"role": "user", "content": "Go."}]
        with pytest.raises((openai.APIError, httpx.HTTPError)):
            for _ in client.chat.completions.create(model=MODEL, messages=messages, stream=True):
                pass
        chunks = list(client.chat.completions.create(model=MODEL, messages=messages, stream=True))
    assert chunks and all(c.choices[0].finish_reason is None for c in chunks)


# --- scripts ----------------------------------------------------------------------------------


def test_fault_steps_round_trip_and_bad_ones_are_refused(tmp_path: Path) -> None:
    steps = [
        stream_error("a", usage=(5, 1), after=1, status=529, error_type="overloaded_error"),
        cut(None, [call("run", ARGS)], framing="chunked"),
        reply("done"),
    ]
    path = tmp_path / "faults.json"
    save_conversation(path, steps)
    assert load_conversation(path) == steps
    for bad, field in [
        (cut("x", framing="lost"), "framing"),  # type: ignore[arg-type]
        (cut("x", after=-1), "after"),
        (stream_error("x", status=200), "status"),
        ({**stream_error("x"), "usage": [1]}, "usage"),
    ]:
        with pytest.raises(ValueError, match=rf"script\[0\]\.{field}"):
            ScriptedProvider([bad])
