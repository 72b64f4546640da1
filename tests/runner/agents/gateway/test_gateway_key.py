"""The key never leaves the gateway toward the client, whatever the provider sends.

A hostile upstream on loopback (tests/support/hostile_upstream.py) reflects the key the
gateway sends it, in every form a reflecting provider produces, written in small pieces so
that the gateway reads each reflection split at every byte offset: in JSON bodies (framed by
Content-Length, chunked, by the close), in server-sent events, in headers, in an error, in a
broken status line, and compressed. What the client gets is judged by each form's own
oracle, and the transcript and the stats must not hold the key either.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import socket
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from runner.agents.gateway import ProviderGateway
from tests.support.hostile_upstream import (
    HostileUpstream,
    Received,
    Reflection,
    Scripted,
    reflections,
    split_everywhere,
)

KEY = "sk-hostile/KEY_0123-abc"
CHAT = "/v1/chat/completions"


@dataclass
class Exchange:
    status: int
    head: str
    body: bytes


def call(sock: Path, path: str = CHAT, body: bytes | None = None, version: str = "1.1") -> Exchange:
    """One request on a fresh connection; the whole answer, the body unchunked."""
    payload = body or json.dumps({"model": "m", "messages": [], "stream": False}).encode()
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.settimeout(30)
        conn.connect(str(sock))
        conn.sendall(
            f"POST {path} HTTP/{version}\r\nHost: gw\r\nContent-Type: application/json\r\n"
            f"Authorization: Bearer placeholder\r\nConnection: close\r\n"
            f"Content-Length: {len(payload)}\r\n\r\n".encode()
            + payload
        )
        data = b""
        while chunk := conn.recv(65536):
            data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    text = head.decode("latin-1")
    if "transfer-encoding: chunked" in text.lower():
        body, rest_ = b"", rest
        while True:
            size_line, _, rest_ = rest_.partition(b"\r\n")
            size = int(size_line, 16)
            if size == 0:
                break
            body, rest_ = body + rest_[:size], rest_[size + 2 :]
        rest = body
    return Exchange(int(text.split(" ", 2)[1]), text, rest)


@contextlib.contextmanager
def hostile(
    tmp_path: Path, answer: Callable[[Received], Scripted], protocol: str = "openai-chat"
) -> Iterator[tuple[ProviderGateway, HostileUpstream]]:
    with HostileUpstream(answer) as upstream:
        gateway = ProviderGateway(
            tmp_path / "gw.sock",
            protocol=protocol,  # type: ignore[arg-type]
            base_url=upstream.url + "/v1",
            api_key=KEY,
            transcript_path=tmp_path / "transcript.jsonl",
        )
        with gateway:
            yield gateway, upstream
    transcript = (tmp_path / "transcript.jsonl").read_text()
    for form in reflections(KEY):
        assert form.text not in transcript, form.name
    assert upstream.received and all(r.key == KEY for r in upstream.received)


def segment_of(wrap: Callable[[str], str]) -> tuple[bytes, list[tuple[int, int, Reflection]]]:
    """Every reflection, each wrapped by ``wrap`` (an SSE event, a JSON string's piece),
    and where each reflection lies in the segment."""
    segment, spans = "", []
    for form in reflections(KEY):
        before, after = wrap("\0").split("\0")
        spans.append(
            (len(segment) + len(before), len(segment) + len(before) + len(form.text), form)
        )
        segment += before + form.text + after
    return segment.encode(), spans


def assert_nothing_leaked(got: bytes, sent: bytes, start: int, segment: bytes, spans) -> None:
    assert len(got) == len(sent)  # redaction keeps the length (Content-Length stays right)
    assert KEY.encode() not in got
    for copy in range(len(segment)):
        at = start + copy * len(segment)
        assert got[at : at + len(segment)].replace(b"*", b"") != segment  # something went
        for begin, end, form in spans:
            piece = got[at + begin : at + end].decode()
            assert not form.leaked(piece), (copy, form.name, piece)


@pytest.mark.parametrize("framing", ["length", "chunked", "close"])
def test_a_key_reflected_in_a_json_body_split_at_every_offset_never_reaches_the_client(
    tmp_path: Path, framing: str
):
    segment, spans = segment_of(lambda x: f"[{x}] ")
    head = b'{"id": "x", "object": "chat.completion", "choices": [{"index": 0, "message": {"role": "assistant", "content": "'
    tail = b'"}, "finish_reason": "stop"}], "usage": {"prompt_tokens": 3, "completion_tokens": 2}}'
    body, pieces = split_everywhere(head, segment, tail)
    answer = Scripted(
        headers=[("Content-Type", "application/json")], pieces=pieces, framing=framing
    )  # type: ignore[arg-type]
    with hostile(tmp_path, lambda _: answer) as (gateway, _):
        got = call(gateway.socket_path)
        stats = gateway.stats()
    assert got.status == 200
    assert_nothing_leaked(got.body, body, len(head), segment, spans)
    assert json.loads(got.body)["usage"]["completion_tokens"] == 2  # the rest passed intact
    assert (stats.steps, stats.tokens_in, stats.tokens_out) == (1, 3, 2)


def test_a_key_reflected_in_server_sent_events_split_at_every_offset_never_reaches_the_client(
    tmp_path: Path,
):
    segment, spans = segment_of(
        lambda x: 'data: {"choices": [{"index": 0, "delta": {"content": "' + x + '"}}]}\n\n'
    )
    tail = b'data: {"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 2}}\n\ndata: [DONE]\n\n'
    body, pieces = split_everywhere(b"", segment, tail)
    answer = Scripted(
        headers=[("Content-Type", "text/event-stream")], pieces=pieces, framing="chunked"
    )
    with hostile(tmp_path, lambda _: answer) as (gateway, _):
        got = call(gateway.socket_path)
        stats = gateway.stats()
    assert got.status == 200 and "text/event-stream" in got.head
    assert_nothing_leaked(got.body, body, 0, segment, spans)
    assert (stats.steps, stats.tokens_in, stats.tokens_out) == (1, 3, 2)
    text = (tmp_path / "transcript.jsonl").read_text()
    assert KEY not in text and "*" * len(KEY) in text  # the reply text, stars where the key was


def test_a_key_reflected_in_headers_and_the_status_line_never_reaches_the_client(tmp_path: Path):
    def answer(request: Received) -> Scripted:
        key = request.key
        basic = next(f.text for f in reflections(key) if f.name == "base64(user:key)")
        return Scripted(
            reason=f"OK {key}",
            headers=[
                ("Content-Type", "application/json"),
                ("x-request-id", key),
                ("X-RateLimit-Remaining-Tokens", f"Bearer {key}"),
                ("anthropic-ratelimit-tokens-reset", basic),
                ("retry-after-ms", "12"),
                ("X-Echo-Authorization", f"Bearer {key}"),
                ("WWW-Authenticate", f'Bearer realm="{key}"'),
                ("Set-Cookie", f"k={key}"),
                ("Content-Encoding", "identity"),
                ("Server", "hostile"),
            ],
            pieces=[json.dumps({"error": {"message": "no", "code": "bad"}}).encode()],
        )

    with hostile(tmp_path, answer) as (gateway, _):
        got = call(gateway.socket_path)
    head = got.head.lower()
    assert got.status == 200 and got.head.startswith("HTTP/1.1 200 OK\r\n")
    for form in reflections(KEY):
        assert form.text.lower() not in head, form.name
    stars = "*" * len(KEY)
    assert f"x-request-id: {stars}" in head
    assert f"x-ratelimit-remaining-tokens: bearer {stars}" in head
    assert "anthropic-ratelimit-tokens-reset: " in head and "retry-after-ms: 12" in head
    for dropped in (
        "x-echo-authorization",
        "www-authenticate",
        "set-cookie",
        "server",
        "content-encoding",
    ):
        assert f"\r\n{dropped}:" not in head, dropped


def test_a_key_in_an_auth_error_reaches_neither_the_client_nor_the_record(tmp_path: Path):
    def answer(request: Received) -> Scripted:
        body = json.dumps(
            {
                "error": {
                    "message": f"Incorrect API key provided: {request.key}",
                    "code": "invalid_api_key",
                }
            }
        ).encode()
        return Scripted(
            status=401,
            reason="Unauthorized",
            pieces=[body[i : i + 7] for i in range(0, len(body), 7)],
        )

    with hostile(tmp_path, answer) as (gateway, _):
        got = call(gateway.socket_path)
        stats = gateway.stats()
    assert got.status == 401 and KEY.encode() not in got.body
    assert stats.provider_error is not None and KEY not in stats.provider_error
    assert stats.provider_error.startswith("HTTP 401 (invalid_api_key): Incorrect API key provided")


def test_a_key_in_a_broken_status_line_reaches_neither_the_client_nor_the_record(tmp_path: Path):
    answer = Scripted(raw=f"HTTP/1.1 two-hundred {KEY}\r\n\r\n".encode())
    with hostile(tmp_path, lambda _: answer) as (gateway, _):
        got = call(gateway.socket_path)
        stats = gateway.stats()
    assert got.status == 502 and KEY.encode() not in got.body
    assert stats.provider_faults == 1 and KEY not in json.dumps(stats.fault_evidence)


@pytest.mark.parametrize(
    "encoding",
    [
        ("Content-Encoding", "gzip"),
        ("Content-Encoding", "identity, br"),
        ("Transfer-Encoding", "gzip, chunked"),
    ],
)
def test_an_encoded_reply_is_not_relayed_but_answered_as_a_provider_fault(
    tmp_path: Path, encoding: tuple[str, str]
):
    # Compressed, the key would pass in a form no redaction finds: the gateway asked for
    # identity, so a provider sending anything else is failing, and the client gets a 502.
    secret = gzip.compress(json.dumps({"choices": [{"message": {"content": KEY}}]}).encode())
    replies = [
        Scripted(
            headers=[("Content-Type", "application/json"), encoding],
            pieces=[secret],
            framing="close",
        ),
        Scripted(
            headers=[("Content-Type", "application/json")],
            pieces=[json.dumps({"choices": [{"index": 0, "message": {"content": "hi"}}]}).encode()],
        ),
    ]
    with hostile(tmp_path, lambda _: replies.pop(0)) as (gateway, _):
        refused = call(gateway.socket_path)
        fine = call(gateway.socket_path)
        stats = gateway.stats()
    assert refused.status == 502 and secret not in refused.body
    assert encoding[0].encode() in refused.body and b"identity" in refused.body
    assert fine.status == 200 and b'"hi"' in fine.body
    assert stats.provider_faults == 1 and stats.steps == 1
    assert stats.fault_evidence == ()  # recovered: the next call was a step
    events = [json.loads(line) for line in (tmp_path / "transcript.jsonl").read_text().splitlines()]
    assert [e.get("status") for e in events if e["event"] == "model_call"] == [502, 200]
