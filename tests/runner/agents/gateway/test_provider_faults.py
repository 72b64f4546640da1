"""The provider-fault rule at the gateway: each model call is a step, a provider fault, a cut
or a refusal, and only steps count as steps and tokens.

The provider is the scripted provider on loopback (its fault steps put real faults on the
wire), the gateway is the real one, and the client speaks raw HTTP on the gateway's unix
socket, so every byte is what a CLI would get. The property test walks generated call
sequences through them and checks the counts and the unrecovered faults against the rule
written out a second time here.
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from runner.agents.gateway import GatewayStats, ProviderGateway
from runner.agents.gateway.request_rate import RequestRate
from runner.agents.scripted_provider import (
    ANTHROPIC_MESSAGES,
    OPENAI_CHAT,
    OPENAI_RESPONSES,
    PROTOCOLS,
    ScriptEntry,
    Step,
    cut,
    error,
    hang,
    reply,
    stream_error,
)
from tests.support.scripted_gateway import KEY, MODEL, behind_gateway

pytestmark = pytest.mark.timeout(120)

PATHS = {
    OPENAI_CHAT: "/v1/chat/completions",
    OPENAI_RESPONSES: "/v1/responses",
    ANTHROPIC_MESSAGES: "/v1/messages",
}
TERMINAL = {
    OPENAI_CHAT: "[DONE]",
    OPENAI_RESPONSES: "response.completed",
    ANTHROPIC_MESSAGES: "message_stop",
}
TEXT = "Reading the data first, then fitting a model. " * 3


def body(protocol: str, stream: bool) -> bytes:
    if protocol == OPENAI_CHAT:
        fields: dict = {"messages": [{"role": "user", "content": "Go."}]}
    elif protocol == OPENAI_RESPONSES:
        fields = {"input": "Go."}
    else:
        fields = {"max_tokens": 100, "messages": [{"role": "user", "content": "Go."}]}
    return json.dumps({"model": MODEL, "stream": stream, **fields}).encode()


@dataclass
class Answer:
    status: int
    headers: dict[str, str]
    data: bytes


def post(socket_path: Path, protocol: str, stream: bool, *, leave: bool = False) -> Answer | None:
    """One model call on a fresh connection; ``leave``: close right after sending (a client
    that gives up on its call)."""
    payload = body(protocol, stream)
    head = (
        f"POST {PATHS[protocol]} HTTP/1.1\r\nHost: gw\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(payload)}\r\nConnection: close\r\n\r\n"
    )
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(20)
        sock.connect(str(socket_path))
        sock.sendall(head.encode() + payload)
        if leave:
            return None
        data = b""
        with contextlib.suppress(OSError):
            while chunk := sock.recv(65536):
                data += chunk
    if not data:
        return None  # the gateway stopped (the attempt ended) before answering
    head_bytes, _, rest = data.partition(b"\r\n\r\n")
    lines = head_bytes.decode().split("\r\n")
    headers = {k.lower(): v for k, v in (line.split(": ", 1) for line in lines[1:])}
    return Answer(int(lines[0].split()[1]), headers, rest)


def wait_for(gateway: ProviderGateway, requests: int) -> GatewayStats:
    deadline = time.monotonic() + 10
    while (stats := gateway.stats()).requests < requests and time.monotonic() < deadline:
        time.sleep(0.01)
    return stats


# --- each fault, in each protocol ---------------------------------------------------------------

USAGE = (300, 45)


def fault_cases(protocol: str) -> dict[str, tuple[Step, str]]:
    """Fault step -> the evidence the gateway must write for it (after "call N: ")."""
    overload = 529 if protocol == ANTHROPIC_MESSAGES else 500
    event_code = "overloaded_error" if protocol == ANTHROPIC_MESSAGES else "server_error"
    return {
        "429 with Retry-After": (error(429, retry_after=2), "HTTP 429 with Retry-After: 2"),
        "429 without Retry-After": (error(429), "HTTP 429 without Retry-After"),
        "5xx before the reply": (
            error(503, code="unavailable"),
            "HTTP 503 (unavailable)" if protocol != ANTHROPIC_MESSAGES else "HTTP 503 (api_error)",
        ),
        "error event mid-stream": (
            stream_error(TEXT, usage=USAGE, status=overload),
            f"error event in a 200 reply ({event_code})",
        ),
        "close-delimited cut": (
            cut(TEXT, usage=USAGE, framing="close"),
            f"reply cut by the provider before {TERMINAL[protocol]}",
        ),
        "chunked cut": (
            cut(TEXT, usage=USAGE, framing="chunked"),
            f"reply cut by the provider before {TERMINAL[protocol]}",
        ),
    }


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_every_fault_is_counted_apart_from_steps_and_only_the_last_run_is_unrecovered(
    tmp_path: Path, protocol: str
) -> None:
    cases = fault_cases(protocol)
    steps = [step for step, _ in cases.values()]
    # Every fault, then a step (all recovered), then every fault again (unrecovered).
    script = [*steps, reply("ok", usage=(10, 2)), *steps]
    with behind_gateway(tmp_path, script, protocol) as (gateway, provider):
        answers = [post(gateway.socket_path, protocol, stream=True) for _ in script]
        stats = gateway.stats()
    assert provider.mismatches == []
    n = len(steps)
    statuses = [s["status"] if s["kind"] == "error" else 200 for s in steps]
    assert [a.status for a in answers if a] == [*statuses, 200, *statuses]
    assert (stats.requests, stats.steps, stats.provider_faults) == (2 * n + 1, 1, 2 * n)
    assert (stats.tokens_in, stats.tokens_out) == (10, 2)
    # Only Anthropic reports tokens before the end (message_start): they are failed tokens.
    # Elsewhere the 200 replies broken off or failed report none: their usage is unknown.
    unknown = 0 if protocol == ANTHROPIC_MESSAGES else 3 * 2
    assert (stats.unknown_usage_calls, stats.usage_missing) == (unknown, unknown > 0)
    per_fault = (300, 1) if protocol == ANTHROPIC_MESSAGES else (0, 0)
    assert (stats.failed_tokens_in, stats.failed_tokens_out) == (
        per_fault[0] * 3 * 2,  # the stream error and the two cuts, twice
        per_fault[1] * 3 * 2,
    )
    assert stats.interrupted_calls == 4  # the cuts: the error event is the provider's answer
    assert stats.retries == 2 * n and stats.rate_limited == 0
    assert stats.unrecovered_faults == n
    expected = [f"call {n + 2 + i}: {evidence}" for i, (_, evidence) in enumerate(cases.values())]
    assert list(stats.fault_evidence) == expected[-5:]
    usage = stats.usage()
    assert (usage.tokens_in, usage.steps, usage.provider_faults) == (10, 1, 2 * n)


def test_the_gateways_own_502_and_504_are_faults_with_plain_evidence(tmp_path: Path) -> None:
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        dead_port = free.getsockname()[1]
    gateway = ProviderGateway(
        tmp_path / "gw.sock",
        protocol="openai-chat",
        base_url=f"http://127.0.0.1:{dead_port}/v1",
        api_key=KEY,
        transcript_path=tmp_path / "t.jsonl",
    )
    with gateway:
        answer = post(gateway.socket_path, OPENAI_CHAT, stream=False)
        stats = gateway.stats()
    assert answer is not None and answer.status == 502
    assert stats.fault_evidence == ("call 1: HTTP 502: the gateway could not reach the provider",)
    assert stats.unknown_usage_calls == 0  # it never had the call
    with behind_gateway(tmp_path, [hang(30)], OPENAI_CHAT, request_timeout=0.3) as (gw, _):
        assert (answer := post(gw.socket_path, OPENAI_CHAT, stream=True)) is not None
        stats = gw.stats()
    assert answer.status == 504
    assert stats.fault_evidence == ("call 1: HTTP 504: the provider did not answer in time",)
    assert stats.unknown_usage_calls == 1  # it had the call: what it consumed is unknown


def test_evidence_holds_no_provider_text_and_never_the_key(tmp_path: Path) -> None:
    script = [
        error(503, f"echoing {KEY} in the message", code=KEY),  # a hostile provider
        error(500, "x", code="has spaces; and the message"),
        error(429, retry_after=1.5),
    ]
    with behind_gateway(tmp_path, script, OPENAI_CHAT) as (gateway, _):
        for _ in script:
            post(gateway.socket_path, OPENAI_CHAT, stream=False)
        stats = gateway.stats()
    assert stats.fault_evidence == (
        "call 1: HTTP 503",  # the relay stars the key out: no plain code is left
        "call 2: HTTP 500",
        "call 3: HTTP 429 with Retry-After: 1.5",
    )


def test_an_anthropic_overload_mid_stream_is_no_step_and_its_input_tokens_are_failed_tokens(
    tmp_path: Path,
) -> None:
    """The +31 % of issue 25: the failed call's input tokens were counted as a step's."""
    script = [stream_error(TEXT, usage=(9000, 400), status=529), reply("ok", usage=(9100, 50))]
    with behind_gateway(tmp_path, script, ANTHROPIC_MESSAGES) as (gateway, _):
        for _ in script:
            post(gateway.socket_path, ANTHROPIC_MESSAGES, stream=True)
        stats = gateway.stats()
    assert (stats.steps, stats.tokens_in, stats.tokens_out) == (1, 9100, 50)
    assert (stats.failed_tokens_in, stats.failed_tokens_out) == (9000, 1)
    assert (stats.provider_faults, stats.unrecovered_faults) == (1, 0)


@pytest.mark.parametrize("stream", [False, True])
def test_a_reply_cut_before_its_end_leaves_the_tokens_known(tmp_path: Path, stream: bool) -> None:
    """A cut reply was a 200 'step' that made the attempt's tokens unknown; now it is a fault."""
    script = [cut(TEXT, usage=(50, 5)), reply("ok", usage=(60, 6))]
    with behind_gateway(tmp_path, script, OPENAI_CHAT) as (gateway, _):
        for _ in script:
            post(gateway.socket_path, OPENAI_CHAT, stream=stream)
        stats = gateway.stats()
    assert (stats.steps, stats.provider_faults, stats.interrupted_calls) == (1, 1, 1)
    # The steps' tokens stay known; the cut call owed its usage and never sent it.
    assert stats.usage().tokens_in == 60
    assert (stats.unknown_usage_calls, stats.usage_missing) == (1, True)


def test_a_call_in_flight_when_the_attempt_ends_is_cut_not_a_fault(tmp_path: Path) -> None:
    """The budget ends: the gateway stops with a call in flight. Not a fault, and it ends the
    run of faults before it (the agent was calling again)."""
    with behind_gateway(tmp_path, [error(500), hang(30)], OPENAI_CHAT) as (gateway, _):
        post(gateway.socket_path, OPENAI_CHAT, stream=False)
        caller = threading.Thread(target=post, args=(gateway.socket_path, OPENAI_CHAT, True))
        caller.start()
        started_calls(gateway, 2)
        time.sleep(0.1)  # the call reaches the provider, which hangs
        gateway.stop()
        caller.join(10)
        stats = gateway.stats()
    assert (stats.requests, stats.provider_faults, stats.interrupted_calls) == (2, 1, 1)
    assert stats.unrecovered_faults == 0 and stats.fault_evidence == ()
    # The provider had the call and never said what it consumed; the 500 consumed nothing.
    assert stats.unknown_usage_calls == 1 and stats.usage().unknown_usage_calls == 1


def started_calls(gateway: ProviderGateway, n: int) -> None:
    """Wait until the gateway has numbered ``n`` model calls."""
    deadline = time.monotonic() + 10
    while gateway._tally._calls._started < n and time.monotonic() < deadline:
        time.sleep(0.01)


# --- the agent's request rate -----------------------------------------------------------------


def test_calls_over_the_request_rate_get_the_gateways_429_and_are_never_forwarded(
    tmp_path: Path,
) -> None:
    script = [reply("a", usage=(1, 1)), reply("b", usage=(1, 1))]
    with behind_gateway(tmp_path, script, OPENAI_CHAT, requests_per_minute=2) as (gateway, p):
        answers = [post(gateway.socket_path, OPENAI_CHAT, stream=False) for _ in range(4)]
        stats = gateway.stats()
        forwarded = len(p.requests)
    statuses = [a.status for a in answers if a is not None]
    assert statuses == [200, 200, 429, 429] and forwarded == 2
    refused = answers[2]
    assert refused is not None and 1 <= int(refused.headers["retry-after"]) <= 60
    assert json.loads(refused.data)["error"]["code"] == "rate_limit_exceeded"
    assert (stats.requests, stats.steps, stats.rate_limited, stats.provider_faults) == (2, 2, 2, 0)
    assert stats.unrecovered_faults == 0
    events = [json.loads(line) for line in (tmp_path / "transcript.jsonl").read_text().splitlines()]
    assert [e["call"] for e in events if e["event"] == "rate_limited"] == [3, 4]


def test_the_request_rate_is_a_sliding_minute() -> None:
    now = [0.0]
    rate = RequestRate(3, clock=lambda: now[0])
    assert [rate.admit(), rate.admit()] == [None, None]
    now[0] = 10.0
    assert rate.admit() is None
    now[0] = 20.0
    assert rate.admit() == 40  # refused: the first two calls leave the window at 60 s
    now[0] = 60.0
    assert [rate.admit(), rate.admit(), rate.admit()] == [None, None, 10]
    with pytest.raises(ValueError, match="requests_per_minute"):
        RequestRate(0)


# --- the rule, over generated call sequences --------------------------------------------------

#: What the client meets on one call: the kind drawn, and how the test plays it.
KINDS = (
    "step",
    "429",
    "429 retry-after",
    "5xx",
    "error event",
    "close cut",
    "chunked cut",
    # "client cut" is left out: whether a reply written as the client closes reached it whole
    # (a step) or not (a cut) is a race on a loaded machine (seen in CI); a client's cut is
    # never a fault either way, which the deterministic client-cut tests pin.
    "rate limited",
)
FAULTS = {"429", "429 retry-after", "5xx", "error event", "close cut", "chunked cut"}


def step_for(kind: str, client_left: threading.Semaphore) -> ScriptEntry | None:
    """The provider's answer to a call of ``kind`` (None: the gateway answers it itself).

    A client cut is answered only once the client has left (``client_left``), however loaded
    the machine: a reply written before the client closes reaches it whole, a step."""

    def after_the_client_left(_: object) -> Step:
        client_left.acquire(timeout=20)
        return reply("too late", usage=(100, 10))

    if kind == "client cut":
        return after_the_client_left
    return {
        "step": reply("ok", usage=(100, 10)),
        "429": error(429),
        "429 retry-after": error(429, retry_after=1),
        "5xx": error(502),
        "error event": stream_error(TEXT, usage=(100, 10), status=529),
        "close cut": cut(TEXT, usage=(100, 10), framing="close"),
        "chunked cut": cut(TEXT, usage=(100, 10), framing="chunked"),
    }.get(kind)


class ScriptedRate(RequestRate):
    """A request rate that refuses exactly the calls the test drew as rate limited."""

    def __init__(self, refusals: list[bool]):
        super().__init__(1)
        self._refusals = list(refusals)

    def admit(self) -> int | None:
        return 7 if self._refusals.pop(0) else None


@settings(
    max_examples=25,  # 25 generated sequences of up to 7 calls, ~0.1 s each
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    protocol=st.sampled_from(PROTOCOLS),
    kinds=st.lists(st.sampled_from(KINDS), min_size=1, max_size=6),
    budget_cut=st.booleans(),
)
def test_counts_and_unrecovered_faults_follow_the_rule(
    tmp_path_factory: pytest.TempPathFactory, protocol: str, kinds: list[str], budget_cut: bool
) -> None:
    tmp_path = tmp_path_factory.mktemp("rule")
    left = threading.Semaphore(0)
    script = [s for k in kinds if (s := step_for(k, left)) is not None]
    if budget_cut:
        script.append(hang(30))
    with behind_gateway(tmp_path, script, protocol) as (gateway, _):
        gateway._rate = ScriptedRate([k == "rate limited" for k in kinds] + [False])
        for kind in kinds:
            post(gateway.socket_path, protocol, stream=True, leave=kind == "client cut")
            if kind == "client cut":  # closed: the provider answers, the gateway meets the leaving
                left.release()
                forwarded = sum(k != "rate limited" for k in kinds[: kinds.index(kind) + 1])
                wait_for(gateway, forwarded)
        if budget_cut:
            caller = threading.Thread(target=post, args=(gateway.socket_path, protocol, True))
            caller.start()
            started_calls(gateway, len(kinds) + 1)
            time.sleep(0.05)  # the call reaches the provider, which hangs
            gateway.stop()
            caller.join(10)
        stats = wait_for(gateway, sum(k != "rate limited" for k in kinds) + budget_cut)

    # The rule, written out again.
    calls = [*kinds, *(["budget cut"] if budget_cut else [])]
    faults = [k for k in calls if k in FAULTS]
    streamed_tokens = protocol == ANTHROPIC_MESSAGES  # message_start reports usage early
    failed = sum(1 for k in calls if k in ("error event", "close cut", "chunked cut"))
    trailing = 0
    for k in reversed(calls):
        if k not in FAULTS:
            break
        trailing += 1
    assert stats.steps == calls.count("step")
    assert (stats.tokens_in, stats.tokens_out) == (100 * stats.steps, 10 * stats.steps)
    # Usage owed and not reported: a 200 reply broken off or failed before it said its usage
    # (Anthropic says it first, in message_start), a client or the attempt's end leaving.
    unknown = sum(1 for k in calls if k in ("client cut", "budget cut")) + (
        0 if streamed_tokens else failed
    )
    assert (stats.unknown_usage_calls, stats.usage_missing) == (unknown, unknown > 0)
    assert not stats.step_usage_missing
    assert stats.provider_faults == len(faults)
    assert stats.rate_limited == calls.count("rate limited")
    assert stats.requests == len(calls) - stats.rate_limited
    cuts = sum(1 for k in calls if k in ("close cut", "chunked cut", "client cut", "budget cut"))
    assert stats.interrupted_calls == cuts
    # Tokens of broken-off calls: Anthropic's message_start; a client that left early saw none.
    assert stats.failed_tokens_in == (100 * failed if streamed_tokens else 0)
    assert stats.unrecovered_faults == trailing
    numbers = [i + 1 for i, k in enumerate(calls) if k in FAULTS][-min(trailing, 5) :]
    assert [e.split(":")[0] for e in stats.fault_evidence] == (
        [f"call {n}" for n in numbers] if trailing else []
    )
