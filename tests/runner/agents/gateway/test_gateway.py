"""The provider gateway: key swap, streaming, usage per protocol, failures, hostile clients."""

from __future__ import annotations

import contextlib
import http.client
import json
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from runner.agents.gateway import PLACEHOLDER_KEY, ProviderGateway, gateway_url
from runner.agents.gateway import server as gateway_server
from runner.agents.gateway.reply_parser import ReplyParser
from tests.support.recording_upstream import UnixHTTPConnection
from tests.support.recording_upstream import send_raw as raw

REAL_KEY = "sk-real-SECRET-0123456789abcdef"


# -- a tiny scripted upstream ----------------------------------------------------------------


@dataclass
class Answer:
    status: int = 200
    body: bytes = b"{}"
    content_type: str = "application/json"
    headers: dict[str, str] = field(default_factory=dict)
    chunks: list[bytes] | None = None  # sent chunked, one write each
    wait_after_first: threading.Event | None = None  # hold the rest of the chunks until set
    hang: bool = False  # never answer
    drop: bool = False  # close the connection after answering, without saying so
    abort_after_first: bool = False  # close in the middle of a chunked reply


@dataclass
class Seen:
    method: str
    path: str
    headers: http.client.HTTPMessage
    body: bytes
    peer: tuple


class Upstream:
    """A loopback HTTP/1.1 server answering a queue of :class:`Answer`s (default: 200 {})."""

    def __init__(self) -> None:
        self.answers: list[Answer] = []
        self.seen: list[Seen] = []
        self.release = threading.Event()  # ends hangs
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def _any(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                outer.seen.append(
                    Seen(self.command, self.path, self.headers, body, self.client_address)
                )
                answer = outer.answers.pop(0) if outer.answers else Answer()
                if answer.hang:
                    outer.release.wait(30)
                    self.close_connection = True
                    return
                self.send_response(answer.status)
                self.send_header("Content-Type", answer.content_type)
                for name, value in answer.headers.items():
                    self.send_header(name, value)
                if answer.chunks is None:
                    self.send_header("Content-Length", str(len(answer.body)))
                    self.end_headers()
                    if self.command != "HEAD":
                        self.wfile.write(answer.body)
                    self.close_connection = answer.drop
                    return
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                for i, chunk in enumerate(answer.chunks):
                    self.wfile.write(b"%x\r\n%b\r\n" % (len(chunk), chunk))
                    self.wfile.flush()
                    if i == 0 and answer.wait_after_first is not None:
                        answer.wait_after_first.wait(10)
                    if answer.abort_after_first:
                        self.close_connection = True
                        return
                self.wfile.write(b"0\r\n\r\n")

            do_GET = do_POST = do_DELETE = do_PUT = do_HEAD = _any

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    def __enter__(self) -> Upstream:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()


@dataclass
class Setup:
    gateway: ProviderGateway
    upstream: Upstream
    socket: Path
    transcript: Path

    def post(self, path: str, body: dict | bytes, headers: dict | None = None, conn=None):
        own = conn is None
        conn = conn or UnixHTTPConnection(self.socket)
        payload = body if isinstance(body, bytes) else json.dumps(body).encode()
        conn.request(
            "POST",
            path,
            body=payload,
            headers={"Content-Type": "application/json", **(headers or {})},
        )
        response = conn.getresponse()
        data = response.read()
        if own:
            conn.close()
        return response, data

    def events(self) -> list[dict]:
        return [json.loads(line) for line in self.transcript.read_text().splitlines()]


@contextlib.contextmanager
def gateway(
    tmp_path: Path,
    protocol: str = "openai-chat",
    path: str = "/v1",
    key: str | None = REAL_KEY,
    **kw,
) -> Iterator[Setup]:
    with Upstream() as upstream:
        sock = tmp_path / "gw.sock"
        transcript = tmp_path / "transcript.jsonl"
        gw = ProviderGateway(
            sock,
            protocol=protocol,  # type: ignore[arg-type]
            base_url=upstream.url + path,
            api_key=key,
            transcript_path=transcript,
            **kw,
        )
        with gw:
            yield Setup(gw, upstream, sock, transcript)
        text = transcript.read_text()
        assert REAL_KEY not in text and "SECRET" not in text


# -- protocol bodies ----------------------------------------------------------------------


def sse(*events: dict | str, named: bool = False) -> list[bytes]:
    out = []
    for e in events:
        if isinstance(e, str):
            out.append(f"data: {e}\n\n".encode())
        elif named:
            out.append(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode())
        else:
            out.append(f"data: {json.dumps(e)}\n\n".encode())
    return out


CHAT_JSON = {
    "choices": [
        {
            "index": 0,
            "message": {
                "role": "assistant",
                "content": "hello",
                "tool_calls": [
                    {
                        "id": "c1",
                        "type": "function",
                        "function": {"name": "bash", "arguments": '{"cmd": "ls"}'},
                    }
                ],
            },
            "finish_reason": "tool_calls",
        }
    ],
    "usage": {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18},
}
CHAT_SSE = sse(
    {"choices": [{"index": 0, "delta": {"role": "assistant", "content": "hel"}}]},
    {"choices": [{"index": 0, "delta": {"content": "lo"}}]},
    {
        "choices": [
            {
                "index": 0,
                "delta": {
                    "tool_calls": [
                        {
                            "index": 0,
                            "id": "c1",
                            "function": {"name": "bash", "arguments": '{"cmd"'},
                        }
                    ]
                },
            }
        ]
    },
    {
        "choices": [
            {
                "index": 0,
                "delta": {"tool_calls": [{"index": 0, "function": {"arguments": ': "ls"}'}}]},
            }
        ]
    },
    {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]},
    {"choices": [], "usage": {"prompt_tokens": 11, "completion_tokens": 7}},
    "[DONE]",
)
RESPONSES_OUTPUT = [
    {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "hello"}]},
    {"type": "function_call", "call_id": "c1", "name": "bash", "arguments": '{"cmd": "ls"}'},
]
RESPONSES_JSON = {
    "id": "resp_1",
    "object": "response",
    "status": "completed",
    "error": None,
    "output": RESPONSES_OUTPUT,
    "usage": {"input_tokens": 11, "output_tokens": 7, "total_tokens": 18},
}
RESPONSES_SSE = sse(
    {"type": "response.created", "response": {"id": "resp_1", "output": [], "usage": None}},
    {"type": "response.output_item.added", "output_index": 0, "item": {"type": "message"}},
    {"type": "response.output_text.delta", "output_index": 0, "delta": "hel"},
    {"type": "response.output_text.delta", "output_index": 0, "delta": "lo"},
    {
        "type": "response.output_item.added",
        "output_index": 1,
        "item": {"type": "function_call", "name": "bash"},
    },
    {"type": "response.function_call_arguments.delta", "output_index": 1, "delta": '{"cmd": "ls"}'},
    {"type": "response.completed", "response": RESPONSES_JSON},
    named=True,
)
ANTHROPIC_JSON = {
    "id": "msg_1",
    "type": "message",
    "role": "assistant",
    "content": [
        {"type": "text", "text": "hello"},
        {"type": "tool_use", "id": "t1", "name": "bash", "input": {"cmd": "ls"}},
    ],
    "stop_reason": "tool_use",
    "usage": {
        "input_tokens": 5,
        "cache_creation_input_tokens": 2,
        "cache_read_input_tokens": 4,
        "output_tokens": 7,
    },
}
ANTHROPIC_SSE = sse(
    {
        "type": "message_start",
        "message": {
            "id": "msg_1",
            "content": [],
            "usage": {
                "input_tokens": 5,
                "cache_creation_input_tokens": 2,
                "cache_read_input_tokens": 4,
                "output_tokens": 1,
            },
        },
    },
    {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
    {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "hel"}},
    {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "lo"}},
    {"type": "content_block_stop", "index": 0},
    {
        "type": "content_block_start",
        "index": 1,
        "content_block": {"type": "tool_use", "id": "t1", "name": "bash", "input": {}},
    },
    {
        "type": "content_block_delta",
        "index": 1,
        "delta": {"type": "input_json_delta", "partial_json": '{"cmd": '},
    },
    {
        "type": "content_block_delta",
        "index": 1,
        "delta": {"type": "input_json_delta", "partial_json": '"ls"}'},
    },
    {"type": "content_block_stop", "index": 1},
    {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 7}},
    {"type": "message_stop"},
    named=True,
)
CASES = {
    "openai-chat": ("/v1", "/v1/chat/completions", CHAT_JSON, CHAT_SSE),
    "openai-responses": ("/v1", "/v1/responses", RESPONSES_JSON, RESPONSES_SSE),
    "anthropic-messages": ("", "/v1/messages", ANTHROPIC_JSON, ANTHROPIC_SSE),
}
REQUEST = {
    "model": "m",
    "messages": [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "list the files"},
    ],
    "input": [{"role": "user", "content": "list the files"}],
    "tools": [{"type": "function", "function": {"name": "bash"}}],
}


# -- tests ----------------------------------------------------------------------------------


def test_openai_key_replaced_and_client_credentials_dropped(tmp_path: Path):
    with gateway(tmp_path) as g:
        g.upstream.answers.append(Answer(body=json.dumps(CHAT_JSON).encode()))
        response, data = g.post(
            "/v1/chat/completions",
            REQUEST,
            {
                "Authorization": f"Bearer {PLACEHOLDER_KEY}",
                "x-api-key": PLACEHOLDER_KEY,
                "Cookie": "a=b",
                "OpenAI-Organization": "org-x",
                "Proxy-Authorization": "Basic eA==",
                "Accept-Encoding": "gzip, br",
                "X-Stainless-Lang": "js",
            },
        )
        assert response.status == 200 and json.loads(data) == CHAT_JSON
        seen = g.upstream.seen[0]
        assert seen.path == "/v1/chat/completions"
        assert seen.headers.get_all("Authorization") == [f"Bearer {REAL_KEY}"]
        for name in ("x-api-key", "Cookie", "OpenAI-Organization", "Proxy-Authorization"):
            assert seen.headers.get(name) is None, name
        assert seen.headers["Accept-Encoding"] == "identity"
        assert seen.headers["X-Stainless-Lang"] == "js"
        assert PLACEHOLDER_KEY.encode() not in seen.body
        assert json.loads(seen.body) == REQUEST
        stats = g.gateway.stats()
        assert (stats.requests, stats.steps, stats.retries) == (1, 1, 0)
        assert (stats.tokens_in, stats.tokens_out, stats.usage_missing) == (11, 7, False)
        assert stats.provider_error is None and stats.provider_seconds > 0
    events = g.events()
    assert [e["event"] for e in events] == ["gateway_start", "model_call", "gateway_stop"]
    call = events[1]
    assert call["status"] == 200 and call["path"] == "/v1/chat/completions"
    assert call["usage"] == {"input": 11, "output": 7} and call["stream"] is False
    assert call["request"]["model"] == "m" and call["request"]["tools"] == ["bash"]
    assert call["request"]["messages"][-1] == {"role": "user", "content": "list the files"}
    assert call["reply"] == {
        "text": "hello",
        "tool_calls": [{"name": "bash", "arguments": '{"cmd": "ls"}'}],
    }


def test_anthropic_gets_x_api_key_and_keeps_its_headers(tmp_path: Path):
    with gateway(tmp_path, "anthropic-messages", path="") as g:
        assert g.gateway.inside_path == "" and gateway_url("") == "http://127.0.0.1:18081"
        g.upstream.answers.append(Answer(body=json.dumps(ANTHROPIC_JSON).encode()))
        response, _ = g.post(
            "/v1/messages",
            REQUEST,
            {
                "x-api-key": PLACEHOLDER_KEY,
                "anthropic-version": "2023-06-01",
                "anthropic-beta": "b1",
            },
        )
        assert response.status == 200
        seen = g.upstream.seen[0].headers
        assert seen.get_all("x-api-key") == [REAL_KEY] and seen.get("Authorization") is None
        assert seen["anthropic-version"] == "2023-06-01" and seen["anthropic-beta"] == "b1"
        assert g.gateway.stats().tokens_in == 11


def test_no_key_configured_sends_none(tmp_path: Path):
    with gateway(tmp_path, key=None) as g:
        g.post("/v1/chat/completions", REQUEST, {"Authorization": f"Bearer {PLACEHOLDER_KEY}"})
        assert g.upstream.seen[0].headers.get("Authorization") is None


@pytest.mark.parametrize("protocol", list(CASES))
@pytest.mark.parametrize("stream", [False, True])
def test_usage_and_reply_for_each_protocol(tmp_path: Path, protocol: str, stream: bool):
    base, endpoint, as_json, as_sse = CASES[protocol]
    with gateway(tmp_path, protocol, path=base) as g:
        if stream:
            answer = Answer(content_type="text/event-stream", chunks=as_sse)
        else:
            answer = Answer(body=json.dumps(as_json).encode())
        g.upstream.answers.append(answer)
        response, data = g.post(endpoint, {**REQUEST, "stream": stream})
        assert response.status == 200
        if stream:
            assert response.getheader("Transfer-Encoding") == "chunked"
            assert data == b"".join(as_sse)
        stats = g.gateway.stats()
        assert (stats.tokens_in, stats.tokens_out) == (11, 7)
        assert (stats.requests, stats.steps, stats.usage_missing) == (1, 1, False)
        assert stats.usage().model_dump() == {
            "tokens_in": 11,
            "tokens_out": 7,
            "cost_usd": None,
            "requests": 1,
            "retries": 0,
            "steps": 1,
            "provider_seconds": pytest.approx(stats.provider_seconds, abs=1e-3),
            "provider_faults": 0,
            "interrupted_calls": 0,
            "failed_tokens_in": 0,
            "failed_tokens_out": 0,
            "rate_limited": 0,
            "unknown_usage_calls": 0,
            "other_requests": 0,
            "forbidden_requests": 0,
            "provider_fault_evidence": None,  # the driver's to give
            "tool_seconds": None,  # the built-in agent's only
        }
    call = g.events()[1]
    assert call["protocol"] == protocol and call["stream"] is stream
    assert call["usage"] == {"input": 11, "output": 7}
    assert call["reply"]["text"] == "hello"
    assert [(c["name"], json.loads(c["arguments"])) for c in call["reply"]["tool_calls"]] == [
        ("bash", {"cmd": "ls"})
    ]
    assert call["request"]["messages"][-1]["content"] == "list the files"


def test_chat_stream_gets_include_usage(tmp_path: Path):
    with gateway(tmp_path) as g:
        g.upstream.answers.append(Answer(content_type="text/event-stream", chunks=CHAT_SSE))
        g.post("/v1/chat/completions", {**REQUEST, "stream": True, "stream_options": {"x": 1}})
        g.post("/v1/chat/completions", {**REQUEST, "stream": False})
        first, second = (json.loads(s.body) for s in g.upstream.seen)
        assert first["stream_options"] == {"x": 1, "include_usage": True}
        assert "stream_options" not in second


def test_stream_is_passed_on_as_it_arrives(tmp_path: Path):
    release = threading.Event()
    with gateway(tmp_path) as g:
        g.upstream.answers.append(
            Answer(content_type="text/event-stream", chunks=CHAT_SSE, wait_after_first=release)
        )
        conn = UnixHTTPConnection(g.socket)
        conn.request("POST", "/v1/chat/completions", body=json.dumps({**REQUEST, "stream": True}))
        response = conn.getresponse()
        assert response.status == 200
        first = response.read1(65536)  # arrives while the upstream still holds the rest
        assert first == CHAT_SSE[0] and not release.is_set()
        release.set()
        assert first + response.read() == b"".join(CHAT_SSE)
        conn.close()
        assert g.gateway.stats().tokens_out == 7


@pytest.mark.parametrize("status", [429, 500, 503])
def test_rate_limits_and_server_errors_are_retries_passed_back(tmp_path: Path, status: int):
    body = json.dumps(
        {"error": {"message": "slow down", "type": "rate_limit", "code": None}}
    ).encode()
    with gateway(tmp_path) as g:
        g.upstream.answers.append(Answer(status=status, body=body, headers={"Retry-After": "7"}))
        response, data = g.post("/v1/chat/completions", REQUEST)
        assert response.status == status and data == body
        assert response.getheader("Retry-After") == "7"
        stats = g.gateway.stats()
        assert (stats.requests, stats.retries, stats.steps) == (1, 1, 0)
        assert stats.provider_error is None and not stats.usage_missing
        assert stats.usage().tokens_in == 0  # known: nothing was used
    call = g.events()[1]
    assert call["status"] == status and call["usage"] is None
    assert call["reply"] == {"error": "(rate_limit) slow down"}


def test_401_is_a_provider_error_and_the_masked_key_is_not_kept(tmp_path: Path):
    message = f"Incorrect API key provided: sk-real-****************cdef. Real: {REAL_KEY}"
    body = json.dumps({"error": {"message": message, "code": "invalid_api_key"}}).encode()
    with gateway(tmp_path) as g:
        g.upstream.answers.append(Answer(status=401, body=body))
        response, data = g.post("/v1/chat/completions", REQUEST)
        assert response.status == 401 and REAL_KEY.encode() not in data
        assert len(data) == len(body)  # the echoed key is starred out, same length
        error = g.gateway.stats().provider_error
        assert error is not None and error.startswith(
            "HTTP 401 (invalid_api_key): Incorrect API key"
        )
        assert "cdef" not in error and REAL_KEY not in error
        assert g.gateway.stats().retries == 0


def test_quota_code_is_a_provider_error_and_only_the_first_is_kept(tmp_path: Path):
    quota = {
        "error": {
            "message": "You exceeded your current quota",
            "type": "insufficient_quota",
            "code": "insufficient_quota",
        }
    }
    with gateway(tmp_path) as g:
        g.upstream.answers.append(Answer(status=429, body=json.dumps(quota).encode()))
        g.upstream.answers.append(Answer(status=403, body=b"forbidden"))
        g.post("/v1/chat/completions", REQUEST)
        g.post("/v1/chat/completions", REQUEST)
        stats = g.gateway.stats()
        assert (
            stats.provider_error == "HTTP 429 (insufficient_quota): You exceeded your current quota"
        )
        assert stats.retries == 1


def test_error_inside_a_2xx_stream_is_a_retry_not_a_step(tmp_path: Path):
    chunks = sse(
        {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
        named=True,
    )
    with gateway(tmp_path, "anthropic-messages", path="") as g:
        g.upstream.answers.append(Answer(content_type="text/event-stream", chunks=chunks))
        g.post("/v1/messages", REQUEST)
        stats = g.gateway.stats()
        # A 200 reply that reported no usage: what the provider consumed is unknown.
        assert (stats.steps, stats.retries, stats.usage_missing) == (0, 1, True)
    assert g.events()[1]["reply"] == {"error": "(overloaded_error) Overloaded"}


def test_2xx_without_usage_makes_the_totals_unknown(tmp_path: Path):
    with gateway(tmp_path) as g:
        g.upstream.answers.append(
            Answer(body=json.dumps({"choices": [{"message": {"content": "x"}}]}).encode())
        )
        g.post("/v1/chat/completions", REQUEST)
        stats = g.gateway.stats()
        assert stats.usage_missing and stats.steps == 1
        usage = stats.usage()
        assert usage.tokens_in is None and usage.tokens_out is None


def test_a_chat_body_whose_finish_reason_is_error_is_a_fault_and_one_without_is_a_step(
    tmp_path: Path,
):
    """As the built-in agent's client counts the bodies it reads (both sides are checked
    alike on generated bodies in tests/runner/agents/test_provider_faults.py)."""
    failed = {"choices": [{"message": {"content": ""}, "finish_reason": "error"}], "usage": {}}
    finished = {"choices": [{"message": {"content": "x"}}], "usage": CHAT_JSON["usage"]}
    with gateway(tmp_path) as g:
        for body in (failed, finished):
            g.upstream.answers.append(Answer(body=json.dumps(body).encode()))
            assert g.post("/v1/chat/completions", REQUEST)[0].status == 200
        stats = g.gateway.stats()
    assert (stats.requests, stats.steps, stats.provider_faults, stats.tokens_in) == (2, 1, 1, 11)
    assert (stats.interrupted_calls, stats.unrecovered_faults) == (0, 0)
    assert g.events()[1]["reply"] == {"error": "finish_reason is error"}


def test_only_model_endpoints_are_forwarded_with_the_key(tmp_path: Path):
    with gateway(tmp_path) as g:
        conn = UnixHTTPConnection(g.socket)  # kept alive across the refusals
        for target in ("/v1/files", "/v1/batches", "/v1/fine_tuning/jobs", "/v1/models/a/b"):
            conn.request("POST", target, body=b"{}")
            response = conn.getresponse()
            assert response.status == 403, target
            error = json.loads(response.read())["error"]
            assert error["code"] == "forbidden" and f"POST {target} is not" in error["message"]
        stats = g.gateway.stats()
        assert g.upstream.seen == [] and (stats.forbidden_requests, stats.rejected) == (4, 0)
        assert stats.usage().forbidden_requests == 4
    forbidden = [e for e in g.events() if e["event"] == "forbidden"]
    assert [e["target"] for e in forbidden] == [
        "/v1/files",
        "/v1/batches",
        "/v1/fine_tuning/jobs",
        "/v1/models/a/b",
    ]
    assert {e["method"] for e in forbidden} == {"POST"}


def test_non_model_requests_and_paths_outside_the_base(tmp_path: Path):
    with gateway(tmp_path) as g:
        conn = UnixHTTPConnection(g.socket)
        conn.request("GET", "/v1/models")
        response = conn.getresponse()
        response.read()
        assert response.status == 200
        for target in ("/v2/chat/completions", "/v1x/models", "/", "/admin"):
            conn = UnixHTTPConnection(g.socket)
            conn.request("POST", target, body=b"{}")
            response = conn.getresponse()
            assert response.status == 403, target
            assert b"is not forwarded" in response.read()
        stats = g.gateway.stats()
        assert (stats.other_requests, stats.requests, stats.forbidden_requests) == (1, 0, 4)
        assert [s.path for s in g.upstream.seen] == ["/v1/models"]
    # The request's line is written once its reply was relayed: the forbidden ones, on other
    # connections, may come before it.
    (request,) = [e for e in g.events() if e["event"] == "request"]
    assert request == {**request, "method": "GET", "path": "/v1/models", "status": 200}


BAD_REQUESTS = {
    b"garbage\r\n\r\n": 400,
    b"GET /v1/models HTTP/2.0\r\n\r\n": 400,
    # Well-formed but off the allow-list: forbidden (403), counted apart from the malformed.
    b"CONNECT api.openai.com:443 HTTP/1.1\r\nHost: x\r\n\r\n": 403,
    b"TRACE /v1/models HTTP/1.1\r\n\r\n": 403,
    b"GET http://evil.example/v1/models HTTP/1.1\r\n\r\n": 403,
    b"GET /v1/../admin HTTP/1.1\r\n\r\n": 403,
    b"GET /v1/%2e%2e/admin HTTP/1.1\r\n\r\n": 403,
    b"GET /v1/a%2F..%2F..%2Fadmin HTTP/1.1\r\n\r\n": 403,
    b"GET /v1/models%zz HTTP/1.1\r\n\r\n": 403,
    b"GET /v1/models HTTP/1.1\r\nBad Header: x\r\n\r\n": 400,
    b"GET /v1/models HTTP/1.1\r\n folded: x\r\n\r\n": 400,
    b"POST /v1/chat/completions HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n": 400,
    b"POST /v1/chat/completions HTTP/1.1\r\nContent-Length: -1\r\n\r\n": 400,
    b"POST /v1/chat/completions HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n": 400,
    b"POST /v1/chat/completions HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n": 400,
    b"POST /v1/chat/completions HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n": 400,
    b"POST /v1/chat/completions HTTP/1.1\r\nContent-Length: 999999999999\r\n\r\n": 413,
    b"GET /v1/models HTTP/1.1\r\nX: " + b"a" * 70_000 + b"\r\n\r\n": 431,
    b"GET /v1/models HTTP/1.1\r\n" + b"X: a\r\n" * 200 + b"\r\n": 431,
    b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + bytes(range(256)) + b"\r\n\r\n": 400,
}


# slow: a flood of malformed requests against a real gateway (tens of seconds)
@pytest.mark.slow
def test_malformed_and_oversized_requests_are_refused_and_the_gateway_keeps_serving(tmp_path: Path):
    with gateway(tmp_path, max_body_bytes=1024) as g:
        for data, status in BAD_REQUESTS.items():
            answer = raw(g.socket, data, one_response=True)
            assert answer.startswith(b"HTTP/1.1 %d " % status), (data[:60], answer[:80])
        # a chunked body over the limit
        big = (
            b"POST /v1/chat/completions HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
            + b"800\r\n"
            + b"a" * 2048
            + b"\r\n0\r\n\r\n"
        )
        assert raw(g.socket, big).startswith(b"HTTP/1.1 413 ")
        # half a header, then the client goes away
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.connect(str(g.socket))
            sock.sendall(b"POST /v1/chat/comp")
        assert g.upstream.seen == []
        response, _ = g.post("/v1/chat/completions", REQUEST)
        assert response.status == 200
        forbidden = sum(status == 403 for status in BAD_REQUESTS.values())
        stats = g.gateway.stats()
        assert (stats.rejected, stats.forbidden_requests) == (
            len(BAD_REQUESTS) - forbidden + 1,
            forbidden,
        )


def test_chunked_request_body_and_expect_continue(tmp_path: Path):
    with gateway(tmp_path) as g:
        body = json.dumps(REQUEST).encode()
        data = (
            b"POST /v1/chat/completions HTTP/1.1\r\nTransfer-Encoding: chunked\r\n"
            b"Expect: 100-continue\r\nConnection: close\r\n\r\n"
            + b"%x\r\n%b\r\n" % (10, body[:10])
            + b"%x;ext=1\r\n%b\r\n" % (len(body) - 10, body[10:])
            + b"0\r\nTrailer: x\r\n\r\n"
        )
        answer = raw(g.socket, data)
        assert answer.startswith(b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 ")
        assert json.loads(g.upstream.seen[0].body) == REQUEST


def test_keep_alive_serves_two_requests_on_one_connection(tmp_path: Path):
    with gateway(tmp_path) as g:
        conn = UnixHTTPConnection(g.socket)
        for _ in range(2):
            g.upstream.answers.append(Answer(body=json.dumps(CHAT_JSON).encode()))
            response, _ = g.post("/v1/chat/completions", REQUEST, conn=conn)
            assert response.status == 200 and not response.will_close
        first_sock = conn.sock
        conn.request("GET", "/v1/models")
        conn.getresponse().read()
        assert conn.sock is first_sock  # never reconnected
        conn.close()
        assert len({s.peer for s in g.upstream.seen}) == 1  # one provider connection too
        assert g.gateway.stats().steps == 2


def test_stale_provider_connection_is_replaced(tmp_path: Path):
    with gateway(tmp_path) as g:
        conn = UnixHTTPConnection(g.socket)
        chat = json.dumps(CHAT_JSON).encode()
        g.upstream.answers.append(Answer(body=chat, headers={"Connection": "close"}))
        # an idle keep-alive timeout, unannounced
        g.upstream.answers.append(Answer(body=chat, drop=True))
        g.upstream.answers.append(Answer(body=chat))
        for _ in range(3):
            assert g.post("/v1/chat/completions", REQUEST, conn=conn)[0].status == 200
            time.sleep(0.05)
        conn.close()
        assert len({s.peer for s in g.upstream.seen}) == 3
        stats = g.gateway.stats()
        assert (stats.requests, stats.steps, stats.retries) == (3, 3, 0)


def test_unreachable_provider_is_a_502_retry(tmp_path: Path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    sock = tmp_path / "gw.sock"
    with ProviderGateway(
        sock, protocol="openai-chat", base_url=f"http://127.0.0.1:{port}/v1", api_key=REAL_KEY,
        transcript_path=tmp_path / "t.jsonl",
    ) as gw:  # fmt: skip
        conn = UnixHTTPConnection(sock)
        conn.request("POST", "/v1/chat/completions", body=b"{}")
        response = conn.getresponse()
        assert response.status == 502 and b"cannot reach the provider" in response.read()
        stats = gw.stats()
        assert (stats.requests, stats.retries, stats.steps) == (1, 1, 0)


def test_stop_returns_quickly_with_a_hanging_provider_and_a_silent_client(tmp_path: Path):
    with gateway(tmp_path) as g:
        g.upstream.answers.append(Answer(hang=True))
        silent = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        silent.connect(str(g.socket))
        outcome: dict = {}

        def call() -> None:
            try:
                outcome["response"] = g.post("/v1/chat/completions", REQUEST)
            except Exception as exc:
                outcome["error"] = exc

        caller = threading.Thread(target=call)
        caller.start()
        deadline = time.monotonic() + 5
        while not g.upstream.seen and time.monotonic() < deadline:
            time.sleep(0.01)
        assert g.upstream.seen, "the request reached the provider"
        # A stop that waited for the hanging call or the silent client would take its whole
        # timeout: 30 s against a few at most on a loaded host, so no neighbour can blur the two.
        started = time.monotonic()
        g.gateway.stop(timeout=30.0)
        assert time.monotonic() - started < 10
        caller.join(5)
        assert "error" in outcome  # the CLI sees its connection end
        assert silent.recv(10) == b""
        silent.close()
        g.gateway.stop()  # idempotent
        assert not g.socket.exists()


def test_too_many_connections_get_503(tmp_path: Path):
    with gateway(tmp_path, max_connections=2) as g:
        held = [socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) for _ in range(2)]
        for sock in held:
            sock.connect(str(g.socket))
        time.sleep(0.1)
        assert raw(g.socket, b"GET /v1/models HTTP/1.1\r\n\r\n").startswith(b"HTTP/1.1 503 ")
        for sock in held:
            sock.close()
        time.sleep(0.1)
        assert raw(g.socket, b"GET /v1/models HTTP/1.1\r\nConnection: close\r\n\r\n").startswith(
            b"HTTP/1.1 200 "
        )


def test_transcript_is_bounded(tmp_path: Path):
    with gateway(tmp_path, max_transcript_bytes=3000) as g:
        big = {**REQUEST, "messages": [{"role": "user", "content": "x" * 200_000}]}
        for _ in range(3):
            g.post("/v1/chat/completions", big)
    events = g.events()
    assert [e["event"] for e in events[-2:]] == ["transcript_full", "gateway_stop"]
    assert g.transcript.stat().st_size <= 3000


def test_request_and_reply_are_capped_in_the_transcript(tmp_path: Path):
    with gateway(tmp_path) as g:
        big = {**REQUEST, "messages": [{"role": "user", "content": "x" * 50_000}] * 10}
        g.upstream.answers.append(
            Answer(
                body=json.dumps(
                    {**CHAT_JSON, "choices": [{"message": {"content": "y" * 200_000}}]}
                ).encode()
            )
        )
        g.post("/v1/chat/completions", big)
    call = g.events()[1]
    assert len(json.dumps(call["request"])) <= 64 * 1024 and call["request"]["n_messages"] == 10
    assert len(json.dumps(call["reply"])) <= 64 * 1024


def test_gateway_rejects_a_bad_configuration(tmp_path: Path):
    kw = {"api_key": None, "transcript_path": tmp_path / "t"}
    with pytest.raises(ValueError, match="protocol"):
        ProviderGateway(tmp_path / "s", protocol="grpc", base_url="http://x/v1", **kw)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="http"):
        ProviderGateway(tmp_path / "s", protocol="openai-chat", base_url="ftp://x/v1", **kw)
    gw = ProviderGateway(
        tmp_path / "s", protocol="openai-chat", base_url="https://h.example/v1/", **kw
    )
    assert gw.inside_path == "/v1" and REAL_KEY not in repr(gw)


def test_reply_parser_survives_hostile_streams():
    parser = ReplyParser("openai-chat", event_stream=True, max_bytes=1000)
    for data in (b"data: " + b"x" * 5000 + b"\n\n", b"data: {not json}\n\n", b"data: [1,2]\n\n",
                 b'data: {"choices": "nope", "usage": {"prompt_tokens": true}}\n\n',
                 b'data: {"choices": [{"delta": {"content": "ok"}}]}\r\n\r\n'):  # fmt: skip
        for i in range(0, len(data), 7):
            parser.feed(data[i : i + 7])
    reply = parser.finish()
    assert reply.text == "ok" and reply.usage is None
    parser = ReplyParser("anthropic-messages", event_stream=False, max_bytes=10)
    parser.feed(b'{"usage": {"input_tokens": 1, "output_tokens": 2}}')
    assert parser.finish().usage is None  # too large to parse


def test_harness_proxy_is_used_for_remote_providers_only(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("HTTPS_PROXY", "http://user:pw@proxy.internal:3128")
    monkeypatch.setenv("NO_PROXY", "bypassed.example")
    kw = {"protocol": "openai-chat", "api_key": None, "transcript_path": tmp_path / "t"}
    remote = ProviderGateway(tmp_path / "s", base_url="https://api.example.com/v1", **kw)
    assert remote._origin.proxy is not None and remote._origin.proxy[:2] == ("proxy.internal", 3128)
    assert remote._origin.proxy[2] == "Basic dXNlcjpwdw=="
    for url in ("https://127.0.0.1:8000/v1", "https://localhost/v1", "https://bypassed.example/v1"):
        assert ProviderGateway(tmp_path / "s", base_url=url, **kw)._origin.proxy is None, url


def test_a_reply_the_provider_breaks_off_is_a_retry(tmp_path: Path):
    with gateway(tmp_path) as g:
        chunks = CHAT_SSE
        g.upstream.answers.append(
            Answer(content_type="text/event-stream", chunks=chunks, abort_after_first=True)
        )
        conn = UnixHTTPConnection(g.socket)
        conn.request("POST", "/v1/chat/completions", body=json.dumps({**REQUEST, "stream": True}))
        response = conn.getresponse()
        assert response.status == 200
        with pytest.raises(http.client.IncompleteRead):
            response.read()  # the CLI sees the break, and retries
        conn.close()
        stats = g.gateway.stats()
        assert (stats.requests, stats.steps, stats.retries, stats.usage_missing) == (1, 0, 1, True)
    call = g.events()[1]
    assert call["interrupted"] == "upstream" and call["reply"]["text"] == "hel"
    assert (call["usage"], call["usage_unknown"]) == (None, True)


def test_a_client_that_leaves_mid_stream_is_neither_step_nor_retry(tmp_path: Path):
    release = threading.Event()
    with gateway(tmp_path) as g:
        g.upstream.answers.append(
            Answer(content_type="text/event-stream", chunks=CHAT_SSE, wait_after_first=release)
        )
        conn = UnixHTTPConnection(g.socket)
        conn.request("POST", "/v1/chat/completions", body=json.dumps({**REQUEST, "stream": True}))
        response = conn.getresponse()
        assert response.read1(65536) == CHAT_SSE[0]
        conn.sock.shutdown(socket.SHUT_RDWR)
        conn.close()
        release.set()
        deadline = time.monotonic() + 5
        while g.gateway.stats().requests == 0 and time.monotonic() < deadline:
            time.sleep(0.01)
        stats = g.gateway.stats()
        # Dropped before its usage chunk: interrupted, and its usage unknown, never guessed.
        assert (stats.requests, stats.steps, stats.retries, stats.usage_missing) == (1, 0, 0, True)
        usage = stats.usage()
        assert (usage.interrupted_calls, usage.unknown_usage_calls) == (1, 1)
        assert (usage.tokens_in, usage.tokens_out) == (0, 0)  # no step: none, exactly
    call = g.events()[1]
    assert (call["call"], call["interrupted"], call["usage"], call["usage_unknown"]) == (
        1,
        "client",
        None,
        True,
    )


def test_provider_timeout_is_a_504_retry(tmp_path: Path):
    with gateway(tmp_path, request_timeout=0.3) as g:
        g.upstream.answers.append(Answer(hang=True))
        response, data = g.post("/v1/chat/completions", REQUEST)
        assert response.status == 504 and b"cannot reach the provider" in data
        assert g.gateway.stats().retries == 1


def test_head_and_http_1_0(tmp_path: Path):
    with gateway(tmp_path) as g:
        g.upstream.answers.append(Answer(body=b'{"data": []}'))
        conn = UnixHTTPConnection(g.socket)
        conn.request("HEAD", "/v1/models")  # no model CLI needs it: forbidden
        response = conn.getresponse()
        assert response.status == 403 and response.read() == b""
        conn.request("GET", "/v1/models")  # the same connections go on
        assert conn.getresponse().read() == b'{"data": []}'
        conn.close()
        answer = raw(g.socket, b"GET /v1/models HTTP/1.0\r\n\r\n")
        assert answer.startswith(b"HTTP/1.1 200 ") and b"Connection: close" in answer
        assert answer.endswith(b"\r\n\r\n{}")
        assert (g.gateway.stats().other_requests, g.gateway.stats().forbidden_requests) == (2, 1)


def test_official_openai_client_and_the_scripted_provider(tmp_path: Path):
    """The openai SDK (httpx, kept-alive) through the gateway to runner.agents.scripted_provider."""
    openai = pytest.importorskip("openai")
    httpx = pytest.importorskip("httpx")
    from runner.agents.scripted_provider import ScriptedProvider, call, reply

    script = [
        reply("hi", usage=(10, 3)),
        reply(tool_calls=[call("bash", {"cmd": "ls"})], usage=(20, 4)),
        reply("done", usage=(30, 5)),
        reply(tool_calls=[call("bash", {"cmd": "pwd"})], usage=(40, 6)),
        reply("hello", usage=(50, 7)),
    ]

    def through(protocol: str, base_url: str) -> ProviderGateway:
        """A gateway for ``protocol``: each passes only its own protocol's routes."""
        return ProviderGateway(
            tmp_path / f"{protocol}.sock",
            protocol=protocol,  # type: ignore[arg-type]
            base_url=base_url,
            api_key=REAL_KEY,
            transcript_path=tmp_path / f"{protocol}.jsonl",
        )

    def sdk(gw: ProviderGateway):
        transport = httpx.HTTPTransport(uds=str(gw.socket_path))
        return openai.OpenAI(
            base_url=gateway_url("/v1"),
            api_key=PLACEHOLDER_KEY,
            max_retries=0,
            http_client=httpx.Client(transport=transport),
        )

    with ScriptedProvider(script, api_key=REAL_KEY) as provider:
        with through("openai-chat", provider.base_url) as chat:
            client = sdk(chat)
            tools = [
                {"type": "function", "function": {"name": "bash", "parameters": {"type": "object"}}}
            ]
            messages = [{"role": "user", "content": "go"}]
            first = client.chat.completions.create(model=provider.model, messages=messages)
            assert first.choices[0].message.content == "hi"
            stream = client.chat.completions.create(
                model=provider.model, messages=messages, tools=tools, stream=True
            )
            chunks = list(stream)
            assert any(c.usage and c.usage.prompt_tokens == 20 for c in chunks)
            assert [m.id for m in client.models.list()] == [provider.model]
            with pytest.raises(openai.PermissionDeniedError, match="is not forwarded"):
                client.responses.create(model=provider.model, input="go")  # not its protocol
        with through("openai-responses", provider.base_url) as responses:
            client = sdk(responses)
            done = client.responses.create(model=provider.model, input="go")
            assert done.output_text == "done"
            with client.responses.stream(model=provider.model, input="go", tools=[
                {"type": "function", "name": "bash", "parameters": {"type": "object"}}
            ]) as events:  # fmt: skip
                final = events.get_final_response()
            assert final.usage is not None and final.usage.input_tokens == 40
        with through("anthropic-messages", provider.root_url) as anthropic:
            # Anthropic Messages, streamed, by hand (no SDK here), as Claude Code asks
            conn = UnixHTTPConnection(anthropic.socket_path)
            conn.request(
                "POST",
                "/v1/messages?beta=true",
                body=json.dumps(
                    {
                        "model": provider.model,
                        "max_tokens": 100,
                        "stream": True,
                        "messages": [{"role": "user", "content": "go"}],
                    }
                ),
                headers={"x-api-key": PLACEHOLDER_KEY, "anthropic-version": "2023-06-01"},
            )
            response = conn.getresponse()
            assert response.status == 200 and b"message_stop" in response.read()
            conn.close()
        all_stats = [gw.stats() for gw in (chat, responses, anthropic)]
        assert provider.mismatches == []
        totals = (sum(s.tokens_in for s in all_stats), sum(s.tokens_out for s in all_stats))
        assert totals == provider.usage_totals() == (150, 25)
        assert [(s.requests, s.steps, s.usage_missing) for s in all_stats] == [
            (2, 2, False),
            (2, 2, False),
            (1, 1, False),
        ]
        assert [(s.other_requests, s.forbidden_requests) for s in all_stats] == [
            (1, 1),
            (0, 0),
            (0, 0),
        ]
    calls = [
        e
        for protocol in ("openai-chat", "openai-responses", "anthropic-messages")
        for e in map(json.loads, (tmp_path / f"{protocol}.jsonl").read_text().splitlines())
        if e["event"] == "model_call"
    ]
    assert [c["reply"].get("text") for c in calls] == ["hi", "", "done", "", "hello"]
    assert [c["call"] for c in calls] == [1, 2, 1, 2, 1]
    assert [c["reply"]["tool_calls"][0]["name"] for c in calls if c["reply"]["tool_calls"]] == [
        "bash",
        "bash",
    ]


# -- memory: what the sandbox can make the gateway hold ------------------------------------------


def test_bodies_held_at_once_are_capped_and_a_request_past_it_gets_503(tmp_path: Path):
    """Two bodies fit the budget while the provider sits on them; a third is told to retry."""
    with gateway(tmp_path, max_body_bytes=4096, max_buffered_body_bytes=8192) as g:
        body = json.dumps({**REQUEST, "pad": "x" * 3000}).encode()
        g.upstream.answers += [Answer(hang=True), Answer(hang=True)]
        held = []
        for _ in range(2):
            conn = UnixHTTPConnection(g.socket)
            conn.request("POST", "/v1/chat/completions", body=body)
            held.append(conn)
        deadline = time.monotonic() + 5
        while len(g.upstream.seen) < 2 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert len(g.upstream.seen) == 2
        request = b"POST /v1/chat/completions HTTP/1.1\r\nContent-Length: %d\r\n\r\n" % len(body)
        answer = raw(g.socket, request + body)
        assert answer.startswith(b"HTTP/1.1 503 "), answer[:80]
        assert b"at most 8,192 bytes of request bodies at once" in answer
        chunked = (
            b"POST /v1/chat/completions HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
            + b"%x\r\n%b\r\n0\r\n\r\n" % (len(body), body)
        )
        assert raw(g.socket, chunked).startswith(b"HTTP/1.1 503 ")
        g.upstream.release.set()  # the provider lets go: the budget is free again
        for conn in held:
            with contextlib.suppress(OSError, http.client.HTTPException):
                conn.getresponse().read()
            conn.close()
        deadline = time.monotonic() + 5
        while g.gateway._buffered_body_bytes and time.monotonic() < deadline:
            time.sleep(0.02)
        assert g.gateway._buffered_body_bytes == 0
        assert g.post("/v1/chat/completions", json.loads(body))[0].status == 200
        assert g.gateway.stats().rejected == 2


def test_a_body_of_too_many_json_values_is_forwarded_unparsed(tmp_path: Path, monkeypatch):
    monkeypatch.setattr(gateway_server, "MAX_PARSE_VALUES", 1000)
    with gateway(tmp_path) as g:
        many = {**REQUEST, "stream": True, "metadata": [{"a": i} for i in range(600)]}
        g.upstream.answers.append(Answer(body=json.dumps(CHAT_JSON).encode()))
        response, _ = g.post("/v1/chat/completions", many)
        assert response.status == 200
        assert json.loads(g.upstream.seen[0].body) == many  # as sent: no include_usage added
    # Read once the gateway stopped: the line is written after the client has its reply.
    call = next(e for e in g.events() if e["event"] == "model_call")
    assert call["request"] == {"cut": "not parsed: over 1,000 commas and brackets"}
    assert call["usage"] == {"input": 11, "output": 7}  # the reply is still read


def test_a_stream_the_attempts_end_cuts_is_interrupted_not_a_fault(tmp_path: Path):
    """The budget ends while the provider is streaming normally: the gateway stops mid-reply.
    Not a step, not a fault; what message_start had reported goes to the failed tokens."""
    release = threading.Event()
    with gateway(tmp_path, "anthropic-messages", path="") as g:
        g.upstream.answers.append(Answer(status=500))  # a fault first: then recovered
        g.upstream.answers.append(
            Answer(content_type="text/event-stream", chunks=ANTHROPIC_SSE, wait_after_first=release)
        )
        g.post("/v1/messages", REQUEST)
        conn = UnixHTTPConnection(g.socket)
        conn.request("POST", "/v1/messages", body=json.dumps({**REQUEST, "stream": True}))
        response = conn.getresponse()
        assert response.read1(65536) == ANTHROPIC_SSE[0]  # message_start: 11 tokens in
        g.gateway.stop()
        release.set()
        conn.close()
        stats = g.gateway.stats()
    assert (stats.requests, stats.steps, stats.provider_faults) == (2, 0, 1)
    assert (stats.interrupted_calls, stats.failed_tokens_in, stats.failed_tokens_out) == (1, 11, 1)
    assert (stats.tokens_in, stats.unrecovered_faults, stats.fault_evidence) == (0, 0, ())
    assert g.events()[-2]["interrupted"] == "stopped"


def test_a_streamed_chat_chunk_finishing_with_error_is_an_error_event():
    """As a complete body with finish_reason "error" is (runner.agents.provider_faults): a fault."""
    chunks = [
        {"choices": [{"index": 0, "delta": {"content": "partial"}}]},
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "error"}]},
    ]
    stream = b"".join(b"data: " + json.dumps(c).encode() + b"\n\n" for c in chunks)
    parser = ReplyParser("openai-chat", event_stream=True)
    parser.feed(stream + b"data: [DONE]\n\n")
    reply = parser.finish()
    assert reply.error is not None and reply.terminal
    plain = ReplyParser("openai-chat", event_stream=True)
    plain.feed(stream.replace(b'"error"', b'"stop"') + b"data: [DONE]\n\n")
    assert plain.finish().error is None
