"""The attempt's spend ceilings and the transcript's host budget at the gateway.

The meter's arithmetic is checked on generated call sequences against the rule written out a
second time here; then the real gateway in front of the scripted provider, for each ceiling
and each protocol: the provider never sees a call past a ceiling, and the agent gets its
protocol's quota error.
"""

from __future__ import annotations

import contextlib
import json
import re
import socket
import threading
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from runner.agents.gateway import server as gateway_server
from runner.agents.gateway.spend import (
    SpendCeilings,
    SpendMeter,
    default_ceilings,
    refusal,
)
from runner.agents.scripted_provider import (
    ANTHROPIC_MESSAGES,
    OPENAI_CHAT,
    OPENAI_RESPONSES,
    PROTOCOLS,
    error,
    repeat,
    reply,
)
from runner.specs import AgentSpec
from runner.specs.agent import TokenPrices
from tests.support.scripted_gateway import MODEL, behind_gateway

pytestmark = pytest.mark.timeout(120)

PATHS = {
    OPENAI_CHAT: "/v1/chat/completions",
    OPENAI_RESPONSES: "/v1/responses",
    ANTHROPIC_MESSAGES: "/v1/messages",
}
#: The status each protocol's quota error has: what its CLIs give up on (see runner.agents.gateway.spend).
QUOTA_STATUS = {OPENAI_CHAT: 400, OPENAI_RESPONSES: 429, ANTHROPIC_MESSAGES: 400}
#: OpenCode 1.18.33's and Kilo 7.7.7's test for a retryable error, as read in their bundles: a
#: message or body matching any of these is retried whatever its status.
OPENCODE_RETRYABLE = [
    r"429|500|502|503|504|524",
    r"rate increased too quickly|rate limit|rate-limit|rate_limit|too many requests",
    r"overloaded|service unavailable|service_unavailable|internal error|internal_error"
    r"|server error|server_error|provider returned error",
    r"terminated|fetch failed|network[-_\s]error|connection error|connection refused",
    r"^timeout$|\b(?:request|response|connection|network|stream|read) (?:timeout|timed out)\b",
    r"try your request again|retry your request|resource exhausted|resource_exhausted",
    r"\btry again (?:later|in\b)|\b(?:currently|temporarily) at capacity\b",
    r"exhausted|unavailable|too_many_requests",
]
PRICES = TokenPrices(input_per_mtok=10_000, output_per_mtok=10_000)  # a cent a token


# --- the meter's arithmetic -------------------------------------------------------------------


class Rule:
    """The spend rule written out a second time: the decision for the next call."""

    def __init__(self, ceilings: SpendCeilings):
        self.c = ceilings
        self.forwarded = self.in_flight = self.tokens_in = self.tokens_out = 0
        self.largest = (0, 0)
        self.refused = False

    def admit(self) -> bool:
        projected_in = self.tokens_in + self.in_flight * self.largest[0]
        projected_out = self.tokens_out + self.in_flight * self.largest[1]
        over_cost = (
            self.c.cost_usd is not None
            and PRICES.cost(projected_in, projected_out) >= self.c.cost_usd  # type: ignore[operator]
        )
        self.refused = self.refused or (
            self.forwarded >= self.c.requests
            or projected_in + projected_out >= self.c.tokens
            or over_cost
        )
        if not self.refused:
            self.forwarded += 1
            self.in_flight += 1
        return not self.refused

    def settle(self, usage: tuple[int, int] | None, answered: bool) -> None:
        self.in_flight -= 1
        if usage is None:
            if not answered:
                return
            usage = self.largest
        self.tokens_in += usage[0]
        self.tokens_out += usage[1]
        self.largest = (max(self.largest[0], usage[0]), max(self.largest[1], usage[1]))


usages = st.none() | st.tuples(st.integers(0, 400), st.integers(0, 100))
#: A step: start a call, or end the i-th call in flight (modulo) with this usage and answer.
steps = st.lists(
    st.one_of(
        st.just(("start",)),
        st.tuples(st.just("end"), st.integers(0, 50), usages, st.booleans()),
    ),
    max_size=80,
)


@settings(max_examples=300, deadline=None)  # 300 generated sequences of up to 80 steps
@given(
    steps=steps,
    requests=st.integers(1, 30),
    tokens=st.integers(1, 3000),
    cost=st.none() | st.floats(0.01, 30),
)
def test_the_meter_never_admits_a_call_past_a_ceiling(
    steps: list[tuple], requests: int, tokens: int, cost: float | None
) -> None:
    ceilings = SpendCeilings(requests, tokens, cost, PRICES if cost is not None else None)
    meter, rule = SpendMeter(ceilings), Rule(ceilings)
    in_flight: list[int] = []
    refused_once = False
    for step in steps:
        if step[0] == "start":
            admitted = meter.admit() is None
            assert admitted == rule.admit()
            assert not (admitted and refused_once), "a call was forwarded after a refusal"
            refused_once = refused_once or not admitted
            if admitted:
                in_flight.append(len(in_flight))
        elif in_flight:
            in_flight.pop(step[1] % len(in_flight))
            meter.settle(step[2], step[3])
            rule.settle(step[2], step[3])
        assert meter.forwarded <= requests
        assert (meter.tokens_in, meter.tokens_out) == (rule.tokens_in, rule.tokens_out)
    assert (meter.reached is not None) == refused_once
    assert (meter.broken() is not None) == refused_once


@settings(max_examples=100, deadline=None)  # 100 sequences of calls made one after another
@given(calls=st.lists(st.tuples(st.integers(0, 500), st.integers(0, 200)), max_size=60))
def test_one_call_at_a_time_the_tokens_end_within_one_call_of_the_ceiling(calls) -> None:
    meter = SpendMeter(SpendCeilings(requests=10**6, tokens=1000))
    for usage in calls:
        if meter.admit() is not None:
            break
        meter.settle(usage, answered=True)
    used = meter.tokens_in + meter.tokens_out
    assert used < 1000 + max((a + b for a, b in calls), default=0)
    if meter.reached is not None:
        assert used >= 1000


def test_calls_in_flight_count_against_the_ceilings() -> None:
    meter = SpendMeter(SpendCeilings(requests=100, tokens=1000))
    assert meter.admit() is None
    meter.settle((300, 100), answered=True)  # the largest call so far: 400 tokens
    assert meter.admit() is None  # 400 used + nothing in flight
    assert meter.admit() is None  # 400 used + 400 in flight: 800
    assert meter.admit() == "tokens"  # 400 used + 800 in flight: refused
    assert meter.forwarded == 3 and meter.refused == 1


def test_a_success_whose_usage_was_hidden_counts_as_the_largest_call() -> None:
    meter = SpendMeter(SpendCeilings(requests=100, tokens=1000))
    meter.admit()
    meter.settle((500, 0), answered=True)
    meter.admit()
    meter.settle(None, answered=True)  # e.g. a stream dropped before its usage chunk
    meter.admit()
    meter.settle(None, answered=False)  # a refusal or an unreachable provider: nothing spent
    assert meter.tokens_in == 1000 and meter.admit() == "tokens"


def test_concurrent_calls_never_pass_the_request_ceiling() -> None:
    meter = SpendMeter(SpendCeilings(requests=37, tokens=10**9))
    admitted: list[bool] = []
    barrier = threading.Barrier(8)

    def caller() -> None:
        barrier.wait()
        for _ in range(25):
            ok = meter.admit() is None
            admitted.append(ok)
            if ok:
                meter.settle((1, 1), answered=True)

    threads = [threading.Thread(target=caller) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert admitted.count(True) == 37 == meter.forwarded and meter.refused == 200 - 37


def test_default_ceilings_come_from_the_budget() -> None:
    twenty_minutes = default_ceilings(1200, prices=PRICES)
    assert (twenty_minutes.requests, twenty_minutes.tokens) == (1200, 40_000_000)
    assert twenty_minutes.cost_usd == 40.0
    short = default_ceilings(30)  # at least five minutes' worth; no prices, no cost ceiling
    assert (short.requests, short.tokens, short.cost_usd) == (300, 10_000_000, None)
    given_ = default_ceilings(1200, requests=7, tokens=99, cost_usd=0.5, prices=PRICES)
    assert (given_.requests, given_.tokens, given_.cost_usd) == (7, 99, 0.5)
    with pytest.raises(ValueError, match="cost ceiling needs prices"):
        SpendCeilings(10, 10, 1.0)


def test_a_cost_ceiling_without_prices_is_refused_by_the_spec() -> None:
    spec = {
        "id": "a",
        "kind": "command",
        "title": "a",
        "harness": "h",
        "command": ["x"],
        "gateway": {"protocol": "openai-chat", "base_url": "http://127.0.0.1:1/v1"},
    }
    with pytest.raises(ValidationError, match=r"gateway.spend.cost_usd needs gateway.prices"):
        AgentSpec.model_validate(spec | {"gateway": spec["gateway"] | {"spend": {"cost_usd": 5}}})
    with pytest.raises(ValidationError, match="greater than 0"):
        AgentSpec.model_validate(spec | {"gateway": spec["gateway"] | {"spend": {"requests": 0}}})
    agent = AgentSpec.model_validate(spec | {"gateway": spec["gateway"] | {"spend": {"tokens": 9}}})
    assert agent.gateway is not None and agent.gateway.spend.tokens == 9


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("ceiling", ["requests", "tokens", "cost_usd"])
def test_the_refusal_is_each_protocols_quota_error_that_no_cli_retries(
    protocol: str, ceiling: str
) -> None:
    status, phrase, body = refusal(protocol, ceiling)  # type: ignore[arg-type]
    assert status == QUOTA_STATUS[protocol] and phrase
    error = json.loads(body)["error"]
    if protocol == ANTHROPIC_MESSAGES:
        assert json.loads(body)["type"] == "error"
        assert error["type"] == "invalid_request_error"
    else:
        assert error["type"] == error["code"] == "insufficient_quota"
    message = error["message"]
    assert f"gateway.spend.{ceiling}" in message
    assert not re.search(r"\d", message)
    for pattern in OPENCODE_RETRYABLE:
        assert not re.search(pattern, body.decode(), re.IGNORECASE), pattern


# --- through the real gateway -----------------------------------------------------------------


def body_of(protocol: str) -> bytes:
    fields: dict = {"messages": [{"role": "user", "content": "Go."}], "max_tokens": 10}
    if protocol == OPENAI_RESPONSES:
        fields = {"input": "Go."}
    return json.dumps({"model": MODEL, "stream": False, **fields}).encode()


def post(socket_path: Path, protocol: str) -> tuple[int, bytes]:
    payload = body_of(protocol)
    head = (
        f"POST {PATHS[protocol]} HTTP/1.1\r\nHost: gw\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(payload)}\r\nConnection: close\r\n\r\n"
    )
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(20)
        sock.connect(str(socket_path))
        sock.sendall(head.encode() + payload)
        data = b""
        with contextlib.suppress(OSError):
            while chunk := sock.recv(65536):
                data += chunk
    head_bytes, _, rest = data.partition(b"\r\n\r\n")
    return int(head_bytes.split()[1]), rest


def events(tmp_path: Path) -> list[dict]:
    lines = (tmp_path / "transcript.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


#: ceiling -> (the ceilings, how many calls of 20 tokens in and 5 out the provider may see)
CEILINGS = {
    "requests": (SpendCeilings(requests=3, tokens=10**6), 3),
    "tokens": (SpendCeilings(requests=100, tokens=60), 3),  # 25 a call: 75 >= 60 after 3
    "cost_usd": (SpendCeilings(requests=100, tokens=10**6, cost_usd=0.6, prices=PRICES), 3),
}


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("ceiling", list(CEILINGS))
def test_past_a_ceiling_the_gateway_answers_with_the_quota_error_and_forwards_nothing(
    tmp_path: Path, protocol: str, ceiling: str
) -> None:
    ceilings, allowed = CEILINGS[ceiling]
    script = [repeat(reply("working on it", usage=(20, 5)))]
    with behind_gateway(tmp_path, script, protocol, spend=ceilings) as (gateway, provider):
        answers = [post(gateway.socket_path, protocol) for _ in range(allowed + 2)]
        stats = gateway.stats()
        note = gateway.spend.broken() if gateway.spend else None
        forwarded = len(provider.requests)
    assert [status for status, _ in answers] == [200] * allowed + [QUOTA_STATUS[protocol]] * 2
    assert forwarded == allowed
    assert json.loads(answers[-1][1]) == json.loads(refusal(protocol, ceiling)[2])  # type: ignore[arg-type]
    assert (stats.requests, stats.steps, stats.spend_refused) == (allowed, allowed, 2)
    assert (stats.provider_faults, stats.unrecovered_faults, stats.provider_error) == (0, 0, None)
    assert (stats.tokens_in, stats.tokens_out) == (20 * allowed, 5 * allowed)
    assert note is not None and f"gateway.spend.{ceiling} (" in note
    assert "refused 2 further call(s)" in note
    refused = [e for e in events(tmp_path) if e["event"] == "spend_refused"]
    assert [(e["call"], e["ceiling"]) for e in refused] == [(allowed + 1, ceiling)] * 1 + [
        (allowed + 2, ceiling)
    ]


def test_a_provider_fault_before_the_ceiling_leaves_the_refusal_the_agents(tmp_path: Path):
    """The refused call is the last call started: no trailing provider fault is left to turn
    the attempt into a provider_error."""
    script = [reply("a", usage=(1, 1)), error(503, "down")]
    spend = SpendCeilings(requests=2, tokens=10**6)
    with behind_gateway(tmp_path, script, OPENAI_CHAT, spend=spend) as (gateway, _):
        statuses = [post(gateway.socket_path, OPENAI_CHAT)[0] for _ in range(3)]
        stats = gateway.stats()
    assert statuses == [200, 503, 400]
    assert (stats.provider_faults, stats.unrecovered_faults, stats.spend_refused) == (1, 0, 1)


def test_calls_in_flight_at_once_never_pass_the_request_ceiling(tmp_path: Path) -> None:
    script = [repeat(reply("slow", usage=(1, 1), delay=0.3))]
    spend = SpendCeilings(requests=4, tokens=10**6)
    with behind_gateway(tmp_path, script, OPENAI_CHAT, spend=spend) as (gateway, provider):
        statuses: list[int] = []
        barrier = threading.Barrier(12)

        def call() -> None:
            barrier.wait()
            statuses.append(post(gateway.socket_path, OPENAI_CHAT)[0])

        threads = [threading.Thread(target=call) for _ in range(12)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        forwarded = len(provider.requests)
    assert forwarded == 4
    assert sorted(statuses) == [200] * 4 + [400] * 8


# --- the transcript's host budget -------------------------------------------------------------


def test_a_full_transcript_is_truncated_with_a_note_and_costs_nothing_more(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    summaries = []
    real = gateway_server.capped_request
    monkeypatch.setattr(
        gateway_server, "capped_request", lambda *a: summaries.append(1) or real(*a)
    )
    budget = 40_000
    script = [repeat(reply("x" * 3000, usage=(1, 1)))]
    transcript = tmp_path / "transcript.jsonl"
    with behind_gateway(tmp_path, script, OPENAI_CHAT, max_transcript_bytes=budget) as (g, _):
        for _ in range(30):
            post(g.socket_path, OPENAI_CHAT)
        assert g.transcript_note() is not None
        size, parsed = transcript.stat().st_size, len(summaries)
        for _ in range(20):  # once full: not a byte more, no request parsed for it
            assert post(g.socket_path, OPENAI_CHAT)[0] == 200
        assert (transcript.stat().st_size, len(summaries)) == (size, parsed)
        note = g.transcript_note()
        stats = g.stats()
    lines = events(tmp_path)
    assert [e["event"] for e in lines[-2:]] == ["transcript_full", "gateway_stop"]
    assert lines[-1]["stats"]["steps"] == stats.steps == 50  # the counts stay complete
    assert transcript.stat().st_size <= budget
    calls = sum(1 for e in lines if e["event"] == "model_call")
    assert note is not None and note.startswith("transcript.jsonl truncated at its host budget")
    assert f"{50 - calls:,} later event(s) not written" in note
