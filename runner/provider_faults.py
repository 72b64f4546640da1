"""The provider-fault rule for the built-in agent's model calls, and what it does to a verdict.

The gateway classifies the calls of agent CLIs by the same rule and the same words
(``runner.gateway.call_outcomes``); this ledger counts the calls the harness's own client
makes (:mod:`runner.llm.client`). Every model call ends as one of:

- ``step``: a 2xx reply that reached its terminal event with no error event; only steps
  count in ``steps`` and only their usage in ``tokens_in/out`` (and so the cost);
- ``fault``: the provider failed it: HTTP 429 or 5xx (an unreachable or timed-out provider
  included, as the gateway's own 502/504 is), an error event inside a 2xx reply, or a 2xx
  reply the provider cut before its end. Tokens it reported go to ``failed_tokens_in/out``;
- ``cut``: the budget ended during it: interrupted, the agent's, never a fault;
- ``refused``: any other answer (a 4xx but 429: the request's own fault): the agent's.

Faults are *unrecovered* when the last call started ended in one. An attempt that ends so and
would be anything but ``success`` (or ``harness_error``) is the provider's (:func:`review`).
"""

from __future__ import annotations

import threading
import typing
from dataclasses import dataclass
from typing import Literal

from runner.records import Verdict

Outcome = Literal["step", "fault", "cut", "refused"]

#: How many unrecovered faults a record lists (the last ones).
MAX_EVIDENCE = 5


class Prices(typing.Protocol):
    """What turns tokens into dollars: the agent spec's ``TokenPrices``."""

    def cost(self, tokens_in: int | None, tokens_out: int | None) -> float | None: ...


@dataclass(frozen=True)
class CallOutcome:
    """One model call, classified: what it was, and for a fault one line of evidence (what
    failed, without the call number and without provider text)."""

    outcome: Outcome
    evidence: str | None = None
    interrupted: bool = False  # broken off before its terminal event (by anyone)
    usage: tuple[int, int] | None = None  # what the provider reported, if anything

    def __post_init__(self) -> None:
        if (self.outcome == "fault") != (self.evidence is not None):
            raise ValueError("a fault, and only a fault, says what failed")
        if self.interrupted and self.outcome in ("step", "refused"):
            raise ValueError(f"a {self.outcome} reached its end")


#: A call started but never ended (the attempt stopped first): broken off, as a cut.
_IN_FLIGHT = CallOutcome("cut", interrupted=True)


class CallLedger:
    """The outcomes of an attempt's model calls, by the order they started; thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._outcomes: list[CallOutcome | None] = []  # call number - 1 -> outcome

    def start(self) -> int:
        """Number the next call (1, 2, ...) as it starts."""
        with self._lock:
            self._outcomes.append(None)
            return len(self._outcomes)

    def end(self, call: int, outcome: CallOutcome) -> None:
        with self._lock:
            self._outcomes[call - 1] = outcome

    def _all(self) -> list[CallOutcome]:
        with self._lock:
            return [o or _IN_FLIGHT for o in self._outcomes]

    @property
    def calls(self) -> int:
        with self._lock:
            return len(self._outcomes)

    def unrecovered(self) -> tuple[int, tuple[str, ...]]:
        """How many faults end the attempt unrecovered, and the last MAX_EVIDENCE of them:
        ``"call 7: HTTP 429 without Retry-After"``."""
        run: list[str] = []
        outcomes = self._all()
        for call in range(len(outcomes), 0, -1):
            evidence = outcomes[call - 1].evidence
            if evidence is None:  # a step, a cut, a refusal
                break
            run.append(f"call {call}: {evidence}")
        return len(run), tuple(reversed(run[:MAX_EVIDENCE]))

    def record_fields(self, prices: Prices | None) -> dict[str, object]:
        """The record's usage and call counts; tokens (and so cost) are unknown (None) when
        a step reported no usage, or no call was made, never 0. ``prices``: None, unknown
        cost. The evidence is the driver's to add: only it knows whether it decided."""
        outcomes = self._all()
        steps = [o.usage for o in outcomes if o.outcome == "step"]
        failed = [o.usage for o in outcomes if o.outcome != "step" and o.usage is not None]
        known = bool(outcomes) and all(u is not None for u in steps)
        tokens_in = sum(u[0] for u in steps if u) if known else None
        tokens_out = sum(u[1] for u in steps if u) if known else None
        return {
            "requests": len(outcomes),
            "steps": len(steps),
            "tokens_in": tokens_in,
            "tokens_out": tokens_out,
            "cost_usd": prices.cost(tokens_in, tokens_out) if prices is not None else None,
            "provider_faults": sum(o.outcome == "fault" for o in outcomes),
            "interrupted_calls": sum(o.interrupted for o in outcomes),
            "failed_tokens_in": sum(u[0] for u in failed) if outcomes else None,
            "failed_tokens_out": sum(u[1] for u in failed) if outcomes else None,
        }


def review(verdict: Verdict, unrecovered: int, evidence: tuple[str, ...]) -> Verdict:
    """``provider_error`` for an attempt that would fail after ``unrecovered`` provider faults.

    A ``success`` stays one (its faults are still counted), and so do a ``harness_error``
    and a fatal ``provider_error``. What grading found stays on the record (the submission's
    fingerprints, a validation message); the score goes. The same words as the gateway's.
    """
    if not unrecovered or verdict.status in ("success", "harness_error", "provider_error"):
        return verdict
    calls = "call" if unrecovered == 1 else f"{unrecovered} calls"
    message = (
        f"the provider failed the agent's last {calls} and the attempt ended before it "
        f"recovered ({evidence[-1]}); the agent's own outcome would have been {verdict.status}"
    )
    return verdict.model_copy(
        update={
            "status": "provider_error",
            "error_message": message,
            "score": None,
            "score_hib": None,
        }
    )
