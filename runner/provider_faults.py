"""The provider-fault rule: how each model call ended, and what an attempt's calls add up to.

One rule for every route to a model (the built-in agent's client here, the gateway for agent
CLIs), so that a provider's failure is never scored as the agent's and the agent cannot
manufacture one:

* a **step** is a call that reached its protocol's terminal event with a 2xx status and no
  error event; only steps count in ``steps`` and only their usage in ``tokens_in/out``;
* an **interrupted** call never reached its terminal event, whoever cut it;
* a **provider fault** is a call the provider failed: HTTP 429 or 5xx (an unreachable or
  timed-out provider included), an error event inside a 2xx reply, or a reply the provider
  cut before its terminal event. Tokens it reported go to ``failed_tokens_in/out``;
* anything else (another 4xx, a call the agent or the budget cut) stays the agent's.

Faults are *unrecovered* when the attempt's last call started ended in one: nothing came
after it, neither a step nor a call the agent or the budget cut. An attempt that ends so and
would otherwise not be a ``success`` is the provider's (:func:`attribute_provider_faults`).
"""

from __future__ import annotations

import threading
import typing
from dataclasses import dataclass

from runner.records import DriverReport, Verdict

#: Evidence kept on the record: the last unrecovered faults, one short line each.
MAX_EVIDENCE = 5
_KEPT_STATUSES = ("success", "harness_error", "provider_error")


class Prices(typing.Protocol):
    """What turns tokens into dollars: the agent spec's ``TokenPrices``."""

    def cost(self, tokens_in: int | None, tokens_out: int | None) -> float | None: ...


@dataclass(frozen=True)
class CallEnd:
    """How one model call ended. ``fault``: what the provider failed, in a few words (no
    provider text), else None; ``tokens``: the usage the provider reported, if it did."""

    step: bool = False
    interrupted: bool = False
    fault: str | None = None
    tokens: tuple[int, int] | None = None

    def __post_init__(self) -> None:
        if self.step and (self.interrupted or self.fault):
            raise ValueError("a step is neither interrupted nor a provider fault")

    @classmethod
    def completed(cls, tokens: tuple[int, int] | None) -> CallEnd:
        return cls(step=True, tokens=tokens)


class CallLedger:
    """The model calls of one attempt, counted by the rule; safe to share between threads.

    ``start()`` numbers a call when it is sent (1, 2, ...); ``end()`` says how it ended. A call
    started but never ended (the attempt stopped first) is counted as interrupted.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._ends: dict[int, CallEnd | None] = {}

    def start(self) -> int:
        with self._lock:
            number = len(self._ends) + 1
            self._ends[number] = None
            return number

    def end(self, number: int, how: CallEnd) -> None:
        with self._lock:
            self._ends[number] = how

    def _all(self) -> list[CallEnd]:
        with self._lock:
            return [how or CallEnd(interrupted=True) for how in self._ends.values()]

    @property
    def calls(self) -> int:
        with self._lock:
            return len(self._ends)

    @property
    def steps(self) -> int:
        return sum(how.step for how in self._all())

    def unrecovered(self) -> list[str]:
        """The faults after the last call that was not one, if the last call started was one:
        ``"call 7: HTTP 429 without Retry-After"``, at most the last MAX_EVIDENCE."""
        ends = self._all()
        trailing: list[str] = []
        for number in range(len(ends), 0, -1):
            fault = ends[number - 1].fault
            if fault is None:
                break
            trailing.append(f"call {number}: {fault}")
        return trailing[:MAX_EVIDENCE][::-1]

    def record_fields(self, prices: Prices | None) -> dict[str, object]:
        """The record's call counts and usage; tokens (and so cost) are unknown (None) when a
        step reported no usage, never 0. ``prices``: the agent spec's, None: unknown cost."""
        ends = self._all()
        steps = [how for how in ends if how.step]
        failed = [how.tokens for how in ends if not how.step and how.tokens is not None]
        step_tokens = [how.tokens for how in steps]
        known = bool(ends) and all(t is not None for t in step_tokens)
        counted = bool(ends)  # no call at all: no usage was ever reported, unknown not 0
        tokens_in = sum(t[0] for t in step_tokens if t) if known else None
        tokens_out = sum(t[1] for t in step_tokens if t) if known else None
        return {
            "requests": len(ends),
            "steps": len(steps),
            "tokens_in": tokens_in,
            "tokens_out": tokens_out,
            "cost_usd": prices.cost(tokens_in, tokens_out) if prices is not None else None,
            "interrupted_calls": sum(how.interrupted for how in ends),
            "provider_faults": sum(how.fault is not None for how in ends),
            "failed_tokens_in": sum(t[0] for t in failed) if counted else None,
            "failed_tokens_out": sum(t[1] for t in failed) if counted else None,
            "provider_fault_evidence": self.unrecovered() or None,
        }


def attribute_provider_faults(
    verdict: Verdict, report: DriverReport
) -> tuple[Verdict, DriverReport]:
    """The rule's last step, after grading: an attempt that would not be a ``success`` (nor a
    ``harness_error``, nor already a ``provider_error``) and whose driver reports unrecovered
    provider faults (``provider_fault_evidence``) is a ``provider_error``. Otherwise the
    evidence did not decide the attempt and is dropped (the faults stay counted)."""
    evidence = report.provider_fault_evidence
    if not evidence:
        return verdict, report
    if verdict.status in _KEPT_STATUSES:
        return verdict, report.model_copy(update={"provider_fault_evidence": None})
    message = f"unrecovered provider faults ended the attempt: {'; '.join(evidence)}"
    faulted = Verdict(
        status="provider_error",
        error_message=message,
        submission_path=verdict.submission_path,
        submission_sha256=verdict.submission_sha256,
    )
    return faulted, report
