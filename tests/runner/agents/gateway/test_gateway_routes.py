"""The gateway's allow-list: only the model calls of its protocol (and their model list) pass,
after one canonical decoding of the target; every other request is answered 403 in the
protocol's error shape, never forwarded, and counted. Hostile request lines are generated
(methods x encodings x path tricks x queries) and sent through the real gateway to a
recording upstream; the expected outcome is the rule restated here, independently of
runner/agents/gateway/routes.py.
"""

from __future__ import annotations

import json
import re
import urllib.parse
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tests.support.recording_upstream import (
    UnixHTTPConnection,
    recording_gateway,
    send_raw,
)

# The rule, restated: (method, canonical path, query names it takes) per protocol, paths as
# the CLIs send them (the OpenAI protocols' base path is /v1, Anthropic's is empty).
MODEL_ID = r"[A-Za-z0-9._:\-]{1,200}"
ALLOWED = {
    "openai-chat": [
        ("POST", "/v1/chat/completions", set()),
        ("GET", "/v1/models", set()),
    ],
    "openai-responses": [
        ("POST", "/v1/responses", set()),
        ("POST", "/v1/responses/compact", set()),
        ("GET", "/v1/models", {"client_version"}),
    ],
    "anthropic-messages": [
        ("POST", "/v1/messages", {"beta"}),
        ("POST", "/v1/messages/count_tokens", {"beta"}),
        ("GET", "/v1/models", {"beta", "limit", "after_id", "before_id"}),
        ("GET", f"/v1/models/{MODEL_ID}", {"beta"}),
    ],
}
REQUEST = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}


def expected(protocol: str, method: str, target: str) -> str | None:
    """The target the upstream must see (canonical path + query); None: forbidden."""
    path, has_query, query = target.partition("?")
    if "#" in target or (has_query and not query) or re.search(r"%(?![0-9A-Fa-f]{2})", path):
        return None
    decoded = urllib.parse.unquote_to_bytes(path).decode("latin-1")
    if not re.fullmatch(r"(/[A-Za-z0-9._:\-]+)+", decoded):
        return None
    if any(segment in (".", "..") for segment in decoded.split("/")):
        return None
    pairs = [p.partition("=") for p in query.split("&")] if query else []
    for allowed_method, pattern, names in ALLOWED[protocol]:
        if method == allowed_method and re.fullmatch(pattern, decoded):
            if all(sep and name in names and re.fullmatch(MODEL_ID, v) for name, sep, v in pairs):
                return decoded + (f"?{query}" if query else "")
            return None
    return None


# -- generated hostile request lines ----------------------------------------------------------

METHODS = ["GET", "POST", "HEAD", "OPTIONS", "DELETE", "PUT", "PATCH", "TRACE", "CONNECT", "get"]
PATHS = [
    "/v1/chat/completions",
    "/v1/responses",
    "/v1/responses/compact",
    "/v1/responses/resp_1",
    "/v1/responses/resp_1/cancel",
    "/v1/messages",
    "/v1/messages/count_tokens",
    "/v1/messages/batches",
    "/v1/models",
    "/v1/models/claude-sonnet-4-5",
    "/v1/models/ft:gpt-4o:org:x",
    "/v1/files",
    "/v1/fine_tuning/jobs",
    "/v1/organizations/users",
    "/v2/chat/completions",
    "/",
]
QUERIES = [
    "",
    "?",
    "?beta=true",
    "?beta=%74rue",
    "?limit=100",
    "?limit=1000&after_id=m1",
    "?client_version=0.171.0",
    "?x=1",
    "?beta=true&beta=true",
    "?beta",
    "#frag",
]


def _encode_one(path: str, data: st.DataObject) -> str:
    """Percent-encode one character of ``path`` (upper or lower hex)."""
    i = data.draw(st.integers(0, len(path) - 1))
    code = f"%{ord(path[i]):02X}"
    return path[:i] + (code if data.draw(st.booleans()) else code.lower()) + path[i + 1 :]


TRICKS = {
    "none": lambda p, d: p,
    "encode one": _encode_one,
    "encode twice": lambda p, d: _encode_one(p, d).replace("%", "%25", 1),
    "encode slash": lambda p, d: p[::-1].replace("/", "F2%", 1)[::-1],  # the last "/"
    "trailing slash": lambda p, d: p + "/",
    "double slash": lambda p, d: p.replace("/", "//", 1),
    "dot segment": lambda p, d: p.replace("/v1/", "/v1/./", 1),
    "dot dot": lambda p, d: p + "/../models",
    "encoded dot dot": lambda p, d: p + "/%2e%2E/x",
    "double encoded dot dot": lambda p, d: p + "/%252e%252e",
    "matrix param": lambda p, d: p + ";x=1",
    "dot dot semicolon": lambda p, d: p + "/..;",
    "backslash": lambda p, d: p.replace("/", "\\", 1),
    "encoded backslash": lambda p, d: p + "%5c..%5cfiles",
    "nul": lambda p, d: p + "%00",
    "encoded query": lambda p, d: p + "%3Fx=1",
    "upper case": lambda p, d: p.upper(),
    "swap case": lambda p, d: p.swapcase(),
    "bad percent": lambda p, d: p + "%zz",
    "non-ascii": lambda p, d: p + "%C3%A9",
    "absolute form": lambda p, d: "http://api.openai.com" + p,
    "asterisk": lambda p, d: "*",
}


@st.composite
def request_lines(draw: st.DrawFn) -> tuple[str, str]:
    data = draw(st.data())
    method = draw(st.sampled_from(METHODS))
    trick = draw(st.sampled_from(sorted(TRICKS)))
    path = TRICKS[trick](draw(st.sampled_from(PATHS)), data)
    return method, path + draw(st.sampled_from(QUERIES))


def send(socket: Path, method: str, target: str) -> bytes:
    body = b"{}" if method.upper() not in ("GET", "HEAD") else b""
    head = f"{method} {target} HTTP/1.1\r\nHost: x\r\nContent-Length: {len(body)}\r\n"
    return send_raw(socket, (head + "Connection: close\r\n\r\n").encode("latin-1") + body)


@settings(
    max_examples=60,  # 60 gateways, up to 8 generated request lines each: ~250 requests, ~10 s
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    protocol=st.sampled_from(sorted(ALLOWED)),
    lines=st.lists(request_lines(), min_size=1, max_size=8),
)
@example(protocol="openai-chat", lines=[("POST", "/v1/chat/completion%73")])
@example(protocol="anthropic-messages", lines=[("POST", "/v1/messages?beta=true")])
def test_only_the_protocols_routes_reach_the_provider_each_once_with_its_canonical_path(
    tmp_path_factory: pytest.TempPathFactory, protocol: str, lines: list[tuple[str, str]]
) -> None:
    tmp_path = tmp_path_factory.mktemp("routes")
    with recording_gateway(tmp_path, protocol) as g:
        passed: list[str] = []
        for method, target in lines:
            answer = send(g.socket, method, target)
            canonical = expected(protocol, method, target)
            if canonical is None:
                assert answer.startswith(b"HTTP/1.1 403 "), (method, target, answer[:200])
                if method != "HEAD":
                    error = json.loads(answer.partition(b"\r\n\r\n")[2])
                    message = error["error"]["message"]
                    assert "is not forwarded" in message and "\x1b" not in message
            else:
                assert answer.startswith(b"HTTP/1.1 200 "), (method, target, answer[:200])
                passed.append(canonical)
            # Nothing else ever reaches the provider; an allowed request reaches it once.
            assert [target for _, target in g.upstream.seen] == passed, (method, target)
        stats = g.gateway.stats()
        assert stats.forbidden_requests == len(lines) - len(passed)
        assert stats.rejected == 0
        assert stats.requests + stats.other_requests == len(passed)
    forbidden = g.events("forbidden")
    assert len(forbidden) == stats.forbidden_requests
    for event in forbidden:  # escaped, capped: no control byte reaches a reader's terminal
        assert event["target"].isascii() and event["target"].isprintable()
        assert len(event["target"]) <= 350


# -- the issue's routes, one by one -------------------------------------------------------------

ISSUE_ROUTES = [
    ("DELETE", "/v1/models/ft:gpt-4o:org:custom"),  # OpenAI: deletes a fine-tuned model
    ("POST", "/v1/models/x"),
    ("GET", "/v1/chat/completions?limit=100"),  # OpenAI: lists stored completions
    ("DELETE", "/v1/chat/completions"),
    ("OPTIONS", "/v1/chat/completions"),
    ("HEAD", "/v1/models"),
    ("GET", "/v1/models/..;"),
    ("GET", "/v1/models/%252e%252e"),
    ("POST", "/v1/chat/completions?x=1"),  # no CLI sends a query with its model call
    ("POST", "/v1/responses"),  # another protocol's model call
    ("POST", "/v1/messages/batches"),
]


@pytest.mark.parametrize(("method", "target"), ISSUE_ROUTES)
def test_the_issues_routes_are_forbidden_and_transcribed(
    tmp_path: Path, method: str, target: str
) -> None:
    with recording_gateway(tmp_path, "openai-chat") as g:
        answer = send(g.socket, method, target)
        assert answer.startswith(b"HTTP/1.1 403 Forbidden\r\nContent-Type: application/json")
        assert g.upstream.seen == []
        stats = g.gateway.stats()
        assert (stats.forbidden_requests, stats.requests, stats.other_requests) == (1, 0, 0)
    [event] = g.events("forbidden")
    assert (event["method"], event["target"]) == (method, target)


def test_a_forbidden_request_is_answered_in_the_anthropic_shape_and_the_connection_goes_on(
    tmp_path: Path,
) -> None:
    with recording_gateway(tmp_path, "anthropic-messages") as g:
        conn = UnixHTTPConnection(g.socket)
        conn.request("DELETE", "/v1/models/claude-x", headers={"x-api-key": "k"})
        response = conn.getresponse()
        body = json.loads(response.read())
        assert response.status == 403 and body["type"] == "error"
        assert body["error"]["type"] == "permission_error"
        conn.request("GET", "/v1/models/claude-x?beta=true")  # the same connection goes on
        assert conn.getresponse().status == 200
        assert g.upstream.seen == [("GET", "/v1/models/claude-x?beta=true")]


def test_an_escape_sequence_in_a_forbidden_target_is_transcribed_escaped_and_capped(
    tmp_path: Path,
) -> None:
    target = "/v1/\x1b]0;owned\x07" + "a" * 5000
    with recording_gateway(tmp_path, "openai-chat") as g:
        assert send(g.socket, "GET", target).startswith(b"HTTP/1.1 403 ")
    [event] = g.events("forbidden")
    assert event["target"].startswith("/v1/\\x1b]0;owned\\x07aaa")
    shown = 300 - len("/v1/\\x1b]0;owned\\x07")  # characters of the target shown
    kept = len("/v1/\x1b]0;owned\x07") + shown
    assert event["target"].endswith(f"a [... {len(target) - kept} more characters]")


# -- usage of the routes that are not plain model calls ---------------------------------------

COMPACTION = {  # what POST /v1/responses/compact answers (OpenAI API reference)
    "id": "resp_cmp_1",
    "object": "response.compaction",
    "created_at": 1764000000,
    "output": [{"type": "compaction", "id": "cmp_1", "encrypted_content": "gAAA..."}],
    "usage": {"input_tokens": 12000, "output_tokens": 800, "total_tokens": 12800},
}


def test_responses_compact_is_a_model_call_and_its_usage_is_counted(tmp_path: Path) -> None:
    with recording_gateway(tmp_path, "openai-responses") as g:
        g.upstream.answers.append((200, json.dumps(COMPACTION).encode()))
        status, data = g.post("/v1/responses/compact", {"model": "m", "input": []})
        assert status == 200 and json.loads(data) == COMPACTION
        stats = g.gateway.stats()
        assert (stats.requests, stats.steps, stats.tokens_in, stats.tokens_out) == (
            1,
            1,
            12000,
            800,
        )
        assert not stats.usage_missing
    [call] = g.events("model_call")
    assert (call["path"], call["usage"]) == (
        "/v1/responses/compact",
        {"input": 12000, "output": 800},
    )


def test_count_tokens_is_an_other_request_with_no_tokens(tmp_path: Path) -> None:
    with recording_gateway(tmp_path, "anthropic-messages") as g:
        g.upstream.answers.append((200, b'{"input_tokens": 4242}'))
        status, _ = g.post("/v1/messages/count_tokens?beta=true", REQUEST)
        assert status == 200
        stats = g.gateway.stats()
        usage = stats.usage()
        assert (usage.requests, usage.other_requests, usage.tokens_in) == (0, 1, None)
        assert (usage.unknown_usage_calls, usage.forbidden_requests) == (0, 0)
    assert g.upstream.seen == [("POST", "/v1/messages/count_tokens?beta=true")]
    [line] = g.events("request")
    assert (line["method"], line["path"], line["status"]) == (
        "POST",
        "/v1/messages/count_tokens",
        200,
    )
