"""The provider-fault rule on generated sequences of model calls, against an oracle.

The oracle below restates ``rule.md`` call by call; the ledger and the attribution must
agree with it on every sequence, and whatever the sequence, an attempt whose last call was a
step, the agent's (another 4xx) or cut by the budget keeps its verdict.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runner.provider_faults import MAX_EVIDENCE, CallLedger, CallOutcome, review
from runner.records import STATUSES, Verdict


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
            return CallOutcome("fault", "HTTP 503", self.interrupted, self.tokens)
        if self.kind == "budget":
            return CallOutcome("cut", interrupted=True, usage=self.tokens)
        if self.kind == "agent":
            return CallOutcome("refused", usage=self.tokens)
        return None


tokens = st.none() | st.tuples(st.integers(0, 10**6), st.integers(0, 10**6))
calls = st.builds(
    Call,
    kind=st.sampled_from(["step", "fault", "agent", "budget", "unended"]),
    interrupted=st.booleans(),
    tokens=tokens,
)


def ledger_of(sequence: list[Call]) -> CallLedger:
    ledger = CallLedger()
    for call in sequence:
        number = ledger.start()
        outcome = call.outcome()
        if outcome is not None:
            ledger.end(number, outcome)
    return ledger


def oracle(sequence: list[Call]) -> tuple[dict[str, object], int, list[str]]:
    """The record fields rule.md asks for, computed call by call, and the unrecovered faults
    (how many, the last MAX_EVIDENCE)."""
    steps = [c for c in sequence if c.kind == "step"]
    failed = [c.tokens for c in sequence if c.kind not in ("step", "unended") and c.tokens]
    known = bool(sequence) and all(c.tokens is not None for c in steps)
    trailing: list[str] = []
    for number in range(len(sequence), 0, -1):
        if sequence[number - 1].kind != "fault":
            break
        trailing.insert(0, f"call {number}: HTTP 503")
    interrupted = sum(
        c.kind in ("budget", "unended") or (c.kind == "fault" and c.interrupted) for c in sequence
    )
    fields = {
        "requests": len(sequence),
        "steps": len(steps),
        "tokens_in": sum(c.tokens[0] for c in steps if c.tokens) if known else None,
        "tokens_out": sum(c.tokens[1] for c in steps if c.tokens) if known else None,
        "cost_usd": None,
        "interrupted_calls": interrupted,
        "provider_faults": sum(c.kind == "fault" for c in sequence),
        "failed_tokens_in": sum(t[0] for t in failed) if sequence else None,
        "failed_tokens_out": sum(t[1] for t in failed) if sequence else None,
    }
    return fields, len(trailing), trailing[-MAX_EVIDENCE:]


# 300 generated sequences of up to 12 calls per run.
@settings(max_examples=300, deadline=None)
@given(sequence=st.lists(calls, max_size=12), status=st.sampled_from(STATUSES))
def test_the_ledger_and_the_attribution_follow_the_rule(sequence: list[Call], status: str):
    ledger = ledger_of(sequence)
    fields, unrecovered, evidence = oracle(sequence)
    assert ledger.record_fields(None) == fields
    assert ledger.unrecovered() == (unrecovered, tuple(evidence))

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
