"""The provider-fault rule on generated sequences of model calls, against an oracle.

The oracle below restates ``rule.md`` call by call; the one ledger (the gateway's and the
built-in agent's) and the attribution must agree with it on every sequence, whatever order
overlapping calls end in, and whatever the sequence, an attempt whose last call was a step,
the agent's (another 4xx) or cut by the budget keeps its verdict.
"""

from __future__ import annotations

import json
import typing
from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runner.agents.gateway.call_outcomes import classify
from runner.agents.gateway.reply_parser import ReplyParser
from runner.agents.llm.client import Failure, _completion, _usage
from runner.agents.provider_faults import MAX_EVIDENCE, CallLedger, CallOutcome, review
from runner.attempts.records import STATUSES, ModelUsage, Verdict


@dataclass(frozen=True)
class Call:
    """One generated model call: ``kind`` is step, fault, agent (a 4xx the agent caused),
    budget (the budget ended during it) or unended (the attempt stopped before it ended)."""

    kind: str
    interrupted: bool
    tokens: tuple[int, int] | None

    def outcome(self) -> CallOutcome | None:
        if self.kind == "step":
            return CallOutcome("step", usage=self.tokens)
        if self.kind == "fault":
            # A fault broken off mid-reply was taken (its usage owed); a 503 status was not.
            return CallOutcome(
                "fault", "HTTP 503", self.interrupted, self.tokens, usage_due=self.interrupted
            )
        if self.kind == "budget":
            return CallOutcome("cut", interrupted=True, usage=self.tokens)
        if self.kind == "agent":
            return CallOutcome("refused", usage=self.tokens, usage_due=False)
        return None


tokens = st.none() | st.tuples(st.integers(0, 10**6), st.integers(0, 10**6))
calls = st.builds(
    Call,
    kind=st.sampled_from(["step", "fault", "agent", "budget", "unended"]),
    interrupted=st.booleans(),
    tokens=tokens,
)


def ledger_of(sequence: list[Call]) -> CallLedger:
    """The calls one after another, as the built-in agent makes them."""
    ledger = CallLedger()
    for call in sequence:
        number = ledger.start()
        outcome = call.outcome()
        if outcome is not None:
            ledger.end(number, outcome)
    return ledger


def oracle(sequence: list[Call], ended: set[int]) -> tuple[dict[str, object], int, list[str]]:
    """The record fields rule.md asks for, computed call by call, and the unrecovered faults
    (how many, the last MAX_EVIDENCE), once the calls ``sequence`` started and the calls
    ``ended`` (by index) ended; the others are in flight."""
    done = [c for i, c in enumerate(sequence) if i in ended]
    steps = [c for c in done if c.kind == "step"]
    failed = [c.tokens for c in done if c.kind != "step" and c.tokens]
    known = bool(sequence) and all(c.tokens is not None for c in steps)
    trailing: list[str] = []
    for number in range(len(sequence), 0, -1):
        if number - 1 not in ended or sequence[number - 1].kind != "fault":
            break
        trailing.insert(0, f"call {number}: HTTP 503")
    interrupted = (
        len(sequence)
        - len(done)
        + sum(c.kind == "budget" or (c.kind == "fault" and c.interrupted) for c in done)
    )
    fields = {
        "requests": len(sequence),
        "steps": len(steps),
        "tokens_in": sum(c.tokens[0] for c in steps if c.tokens) if known else None,
        "tokens_out": sum(c.tokens[1] for c in steps if c.tokens) if known else None,
        "cost_usd": None,
        "interrupted_calls": interrupted,
        "provider_faults": sum(c.kind == "fault" for c in done),
        "failed_tokens_in": sum(t[0] for t in failed) if sequence else None,
        "failed_tokens_out": sum(t[1] for t in failed) if sequence else None,
        # Owed and not reported: calls in flight, and taken calls that ended without usage.
        "unknown_usage_calls": len(sequence)
        - len(done)
        + sum(
            c.tokens is None
            and (c.kind in ("step", "budget") or (c.kind == "fault" and c.interrupted))
            for c in done
        ),
    }
    return fields, len(trailing), trailing[-MAX_EVIDENCE:]


@st.composite
def schedules(draw: st.DrawFn) -> tuple[list[Call], list[int | None]]:
    """Calls, and the order things happen in: None starts the next call, an index ends that
    call. Calls overlap (a CLI's side requests; a ledger shared by connection threads), so
    any started call may end next; an "unended" one never does."""
    sequence = draw(st.lists(calls, max_size=12))
    events: list[int | None] = []
    started, open_calls = 0, set()
    while started < len(sequence) or open_calls:
        choices = sorted(open_calls) + ([None] if started < len(sequence) else [])
        event = draw(st.sampled_from(choices))
        events.append(event)
        if event is None:
            if sequence[started].kind != "unended":
                open_calls.add(started)
            started += 1
        else:
            open_calls.discard(event)
    return sequence, events


# 300 generated schedules of up to 12 calls per run, checked after every start and end.
@settings(max_examples=300, deadline=None)
@given(schedule=schedules(), status=st.sampled_from(STATUSES))
def test_the_ledger_and_the_attribution_follow_the_rule(
    schedule: tuple[list[Call], list[int | None]], status: str
):
    sequence, events = schedule
    ledger = CallLedger()
    numbers: list[int] = []
    ended: set[int] = set()
    for event in events:
        if event is None:
            numbers.append(ledger.start())
        else:
            ledger.end(numbers[event], typing.cast(CallOutcome, sequence[event].outcome()))
            ended.add(event)
        fields, unrecovered, evidence = oracle(sequence[: len(numbers)], ended)
        assert ledger.counts().model_usage(None) == ModelUsage(**fields)
        assert ledger.unrecovered() == (unrecovered, tuple(evidence))
        # Bounded memory: of the calls that ended, only faults that may still trail are kept.
        cleared = max((n for n in ended if sequence[n].kind != "fault"), default=-1)
        assert all(number > cleared + 1 for number in ledger._faults)
    assert ledger.counts().in_flight == sum(c.kind == "unended" for c in sequence)

    verdict = Verdict(status=status, submission_path="workspace/submission.csv")
    reviewed = review(verdict, *ledger.unrecovered())
    last = sequence[-1].kind if sequence else None
    if last == "fault" and status not in ("success", "harness_error", "provider_error"):
        assert reviewed.status == "provider_error"
        assert reviewed.submission_path == verdict.submission_path
        assert reviewed.error_message is not None and "\n" not in reviewed.error_message
        assert f"({evidence[-1]}); the agent's own outcome would have been {status}" in (
            reviewed.error_message
        )
    else:  # a success stays one; a last call that was a step, the agent's, or the budget's
        assert reviewed == verdict


def test_a_long_attempt_holds_no_memory_for_its_calls():
    ledger = CallLedger()
    for n in range(10_000):
        number = ledger.start()
        ledger.end(number, CallOutcome("step") if n % 3 else CallOutcome("fault", "HTTP 503"))
    assert (ledger._faults, ledger._in_flight) == ({10_000: "call 10000: HTTP 503"}, set())
    assert ledger.counts().model_usage(None).requests == 10_000


def test_evidence_never_holds_the_key():
    ledger = CallLedger(api_key="sk-live-0123")
    ledger.end(ledger.start(), CallOutcome("fault", "HTTP 503 (sk-live-0123)"))
    assert ledger.unrecovered() == (1, ("call 1: HTTP 503 ([redacted])",))


def test_only_a_fault_has_evidence_and_a_step_is_never_interrupted():
    with pytest.raises(ValueError):
        CallOutcome("step", "HTTP 500")
    with pytest.raises(ValueError):
        CallOutcome("fault")
    with pytest.raises(ValueError):
        CallOutcome("step", interrupted=True)


def test_evidence_names_the_calls_and_keeps_the_last_five():
    ledger = ledger_of([Call("step", False, (10, 2))] + [Call("fault", True, None)] * 7)
    assert ledger.unrecovered() == (7, tuple(f"call {n}: HTTP 503" for n in range(4, 9)))
    reviewed = review(Verdict(status="no_submission"), *ledger.unrecovered())
    assert reviewed.error_message == (
        "the provider failed the agent's last 7 calls and the attempt ended before it "
        "recovered (call 8: HTTP 503); the agent's own outcome would have been no_submission"
    )


# --- both sides judge a chat-completions JSON body alike ---------------------------------------

scalars = (
    st.none() | st.booleans() | st.integers(-3, 10**4) | st.floats(-5, 5) | st.text(max_size=6)
)
# Any JSON, in the shapes of a chat-completions body. Not the other protocols' error shapes
# (a top-level "type": "error" or "response.failed"), which only the gateway knows of.
json_values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.sampled_from(["id", "code", "message", "object"]), inner, max_size=3)
    ),
    max_leaves=6,
)
errors = json_values | st.fixed_dictionaries(
    {}, optional={"code": st.sampled_from(["rate_limit", 502, "a b", "x" * 50]) | json_values,
                  "type": st.sampled_from(["server_error"]) | json_values, "message": json_values}
)  # fmt: skip
usages = json_values | st.fixed_dictionaries(
    {"prompt_tokens": st.integers(-1, 50) | json_values, "completion_tokens": st.integers(0, 9)}
)
choices = json_values | st.fixed_dictionaries(
    {"message": st.just({"role": "assistant", "content": "hi"}) | json_values},
    optional={
        "finish_reason": st.sampled_from(["stop", "length", "tool_calls", "error"]) | json_values,
        "error": errors,
    },
)
chat_bodies = json_values | st.fixed_dictionaries(
    {},
    optional={
        "choices": st.lists(choices, max_size=2) | json_values,
        "error": errors,
        "usage": usages,
        "id": st.text(max_size=4),
    },
)


def judged(raw: bytes) -> tuple[CallOutcome, CallOutcome]:
    """How the gateway and the built-in agent's client count a 200 reply with body ``raw``."""
    parser = ReplyParser("openai-chat", event_stream=False)
    parser.feed(raw)
    at_gateway = classify("openai-chat", 200, parser.finish(), None)
    read = _completion(200, raw)
    in_client = read.call if isinstance(read, Failure) else CallOutcome("step", usage=_usage(read))
    return at_gateway, in_client


# 400 generated bodies per run, each whole and cut short; pure Python.
@settings(max_examples=400, deadline=None)
@given(body=chat_bodies, cut=st.integers(0, 10**4))
def test_the_gateway_and_the_client_judge_a_chat_body_alike(body: object, cut: int):
    """The gateway (forwarding an agent CLI's call) and the built-in agent's client count
    any non-streamed chat-completions body the same, whole or cut short."""
    whole = json.dumps(body).encode()
    for raw in (whole, whole[: cut % (len(whole) + 1)]):
        at_gateway, in_client = judged(raw)
        assert at_gateway == in_client


def test_a_chat_body_is_a_step_whatever_its_finish_reason_but_error():
    """A complete JSON body with ``choices`` ended (its terminal event): a step, unless it is
    an error event (an ``error``, or ``finish_reason: "error"``): a fault."""
    ok = {"choices": [{"message": {"content": "hi"}}], "usage": {"prompt_tokens": 3}}
    error = "error event in a 200 reply"
    cases = [
        (ok, CallOutcome("step")),
        ({**ok, "choices": [{"finish_reason": "length"}]}, CallOutcome("step")),
        ({**ok, "choices": []}, CallOutcome("step")),
        (
            {"choices": [{"finish_reason": "error", "error": {"code": "overloaded"}}]},
            CallOutcome("fault", f"{error} (overloaded)"),
        ),
        ({"choices": [{"finish_reason": "error"}]}, CallOutcome("fault", error)),
        (
            {"error": {"code": 502}, "usage": {"prompt_tokens": 4, "completion_tokens": 1}},
            CallOutcome("fault", f"{error} (502)", usage=(4, 1)),
        ),
        ({"id": "x"}, CallOutcome("fault", "reply cut by the provider before its end", True)),
    ]
    for body, expected in cases:
        assert judged(json.dumps(body).encode()) == (expected, expected), body
