"""The provider-fault rule: what a model call came to, what an attempt's calls add up to, and
what unrecovered provider faults do to a verdict.

The gateway (the calls of agent CLIs: :func:`runner.agents.gateway.call_outcomes.classify`) and the
built-in agent's client (:mod:`runner.agents.llm.client`) classify each model call (a POST to a
generation endpoint) into a :class:`CallOutcome`, in these words, and count it in a
:class:`CallLedger`; the drivers :func:`review` the verdict with it. Every call ends as one of:

- ``step``: a 2xx reply that reached its protocol's terminal event with no error event; only
  steps count in ``steps`` and only their usage in ``tokens_in/out`` (and so the cost). A
  non-streamed chat-completions reply's terminal event is its complete JSON body with its
  ``choices``, whatever their ``finish_reason`` (``length``, or none) but ``"error"``: that
  is an error event, as an ``error`` in the body is;
- ``fault``: the provider failed it: HTTP 429 or 5xx (an unreachable or timed-out provider
  included, as the gateway's own 502/504 is), an error event inside a 2xx reply, or a 2xx
  reply the provider cut before its terminal event. Tokens it reported go to
  ``failed_tokens_in/out``;
- ``cut``: the client (the agent) or the end of the attempt (the budget) broke it off:
  interrupted, and the agent's, never a fault;
- ``refused``: any other answer (a 4xx but 429: the request's own fault), the gateway's own
  429 for an agent over its spec's request rate, or its own quota error for an attempt past
  its spend ceilings (a 429 or a 400, whichever its protocol's CLIs give up on): the agent's.

A call's usage is *unknown* when the provider owed a usage report and none came: it took the
call (a 2xx reply, or no answer at all once the request was sent: a timeout, a cut) and its
reply, whole or broken off, reported no usage. A call the provider declined with an error
status (or never received: unreachable, the gateway's own 429) consumed nothing, so its usage
is known to be nothing. Such calls are counted (``unknown_usage_calls``), never guessed.

Faults are *unrecovered* when the last call started ended in one: the trailing run of faults,
in the order the calls started. A step, a cut or a refusal after a fault means the attempt
went on past it (the agent's to finish). An attempt that ends so and would be anything but
``success`` (or ``harness_error``) is the provider's (:func:`review`).
"""

from __future__ import annotations

import dataclasses
import re
import threading
import typing
from dataclasses import dataclass
from typing import Literal

from runner.agents.redaction import secret_forms
from runner.attempts.records import ModelUsage, Verdict

Outcome = Literal["step", "fault", "cut", "refused"]

#: How many unrecovered faults a record lists (the last ones).
MAX_EVIDENCE = 5

_SAFE_CODE = re.compile(r"[A-Za-z0-9_.\-]{1,40}")


class Prices(typing.Protocol):
    """What turns tokens into dollars: the agent spec's ``TokenPrices`` (not imported here)."""

    def cost(self, tokens_in: int | None, tokens_out: int | None) -> float | None: ...


@dataclass(frozen=True)
class CallOutcome:
    """One model call, classified: what it was, and for a fault one line of evidence (what
    failed, without the call number and without provider text)."""

    outcome: Outcome
    evidence: str | None = None
    interrupted: bool = False  # broken off before its terminal event (by anyone)
    usage: tuple[int, int] | None = None  # what the provider reported, if anything
    # The provider owed a usage report: it took the call (a 2xx reply, or no answer once the
    # request was sent). False: it declined it with an error status, or never received it.
    usage_due: bool = True

    def __post_init__(self) -> None:
        if (self.outcome == "fault") != (self.evidence is not None):
            raise ValueError("a fault, and only a fault, says what failed")
        if self.interrupted and self.outcome in ("step", "refused"):
            raise ValueError(f"a {self.outcome} reached its end")
        if self.usage_due != (self.outcome != "refused") and self.outcome != "fault":
            raise ValueError(f"a {self.outcome} always (a refusal never) owes its usage")

    @property
    def usage_unknown(self) -> bool:
        """The provider owed this call's usage and did not report it."""
        return self.usage_due and self.usage is None


def _safe_code(value: object) -> str | None:
    """A provider's error code or header value as it may stand in evidence: only a plain
    identifier (a record carries no free provider text, which could echo the key)."""
    if not value or not isinstance(value, str | int | float):  # nothing said, or no scalar
        return None
    text = value if isinstance(value, str) else str(value)
    return text if _SAFE_CODE.fullmatch(text) else None


# The evidence's words, the same whoever classifies the call.


def error_status(
    status: int,
    code: object = None,
    retry_after: str | None = None,
    usage: tuple[int, int] | None = None,
) -> CallOutcome:
    """A call the provider answered with a status other than 2xx: HTTP 429 or 5xx is its
    fault; any other (a 4xx but 429) the request's own, the agent's. An error status bills
    nothing: no usage is owed."""
    if status == 429:
        said = "without Retry-After"
        if retry_after:
            said = f"with Retry-After: {_safe_code(retry_after) or '(unreadable)'}"
        return CallOutcome("fault", f"HTTP 429 {said}", usage=usage, usage_due=False)
    if status >= 500:
        plain = _safe_code(code)
        what = f"HTTP {status}" + (f" ({plain})" if plain else "")
        return CallOutcome("fault", what, usage=usage, usage_due=False)
    return CallOutcome("refused", usage=usage, usage_due=False)


def error_event(
    status: int,
    code: object = None,
    interrupted: bool = False,
    usage: tuple[int, int] | None = None,
) -> CallOutcome:
    """A 2xx reply with an error event in it (an SSE error chunk, an ``error`` body)."""
    plain = _safe_code(code)
    what = f"error event in a {status} reply" + (f" ({plain})" if plain else "")
    return CallOutcome("fault", what, interrupted=interrupted, usage=usage)


def provider_cut(before: str = "its end", usage: tuple[int, int] | None = None) -> CallOutcome:
    """A 2xx reply the provider cut before its terminal event (``before``)."""
    what = f"reply cut by the provider before {before}"
    return CallOutcome("fault", what, interrupted=True, usage=usage)


@dataclass(frozen=True)
class CallCounts:
    """What an attempt's model calls came to so far (a :class:`CallLedger`'s snapshot).

    ``requests``: calls that ended, by any outcome; ``in_flight``: calls started and not
    ended (when the attempt is over: broken off, so interrupted, their usage unknown);
    ``steps``, and ``tokens_in`` / ``tokens_out`` exactly their usage (the steps', nothing
    else's); ``step_usage_missing``: some step reported no usage, so those totals are
    unknown; ``unknown_usage_calls``: calls (steps or not) whose usage the provider owed and
    did not report, so what the attempt consumed is more than is counted (``usage_missing``:
    there is at least one); ``provider_faults``: faults, recovered or not;
    ``interrupted_calls``: calls that ended broken off before their terminal event, by
    anyone; ``failed_tokens_in`` / ``failed_tokens_out``: usage the provider reported for
    calls that were not steps; ``unrecovered_faults``: how many faults end the attempt's
    calls (the last call started was one), and ``fault_evidence`` the last
    :data:`MAX_EVIDENCE` of them, one line each (``"call 7: HTTP 429 without Retry-After"``).
    """

    requests: int = 0
    in_flight: int = 0
    steps: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    step_usage_missing: bool = False
    unknown_usage_calls: int = 0
    provider_faults: int = 0
    interrupted_calls: int = 0
    failed_tokens_in: int = 0
    failed_tokens_out: int = 0
    unrecovered_faults: int = 0
    fault_evidence: tuple[str, ...] = ()

    @property
    def usage_missing(self) -> bool:
        """Some call's usage is unknown: the attempt consumed more than is counted."""
        return self.unknown_usage_calls > 0

    def model_usage(
        self,
        prices: Prices | None,
        *,
        fault_evidence: list[str] | None = None,
        retries: int | None = None,
        provider_seconds: float | None = None,
        tool_seconds: float | None = None,
        rate_limited: int | None = None,
        other_requests: int | None = None,
        forbidden_requests: int | None = None,
    ) -> ModelUsage:
        """The record's usage and call counts, calls still in flight counted as interrupted
        and of unknown usage; the keyword arguments are what only the counter knows (the
        gateway, or the built-in agent's loop), None where it does not count them.

        ``tokens_in`` / ``tokens_out`` (and so the cost) are the steps' tokens, exactly: unknown
        (None) when a step reported no usage, or no call was made, never 0. What other calls
        reported is ``failed_tokens_in/out`` (None when no call was made); how many calls
        reported nothing they owed is ``unknown_usage_calls`` (those totals then undercount
        what the key paid). ``prices``: None, an unknown cost. ``fault_evidence`` is the
        driver's to give: only it knows whether the faults decided the verdict.
        """
        requests = self.requests + self.in_flight
        known = requests > 0 and not self.step_usage_missing
        tokens_in = self.tokens_in if known else None
        tokens_out = self.tokens_out if known else None
        return ModelUsage(
            requests=requests,
            steps=self.steps,
            tokens_in=tokens_in,
            tokens_out=tokens_out,
            cost_usd=prices.cost(tokens_in, tokens_out) if prices is not None else None,
            provider_faults=self.provider_faults,
            provider_fault_evidence=fault_evidence,
            interrupted_calls=self.interrupted_calls + self.in_flight,
            failed_tokens_in=self.failed_tokens_in if requests else None,
            failed_tokens_out=self.failed_tokens_out if requests else None,
            unknown_usage_calls=self.unknown_usage_calls + self.in_flight,
            retries=retries,
            provider_seconds=provider_seconds,
            tool_seconds=tool_seconds,
            rate_limited=rate_limited,
            other_requests=other_requests,
            forbidden_requests=forbidden_requests,
        )


class CallLedger:
    """An attempt's model calls, numbered in the order they start; thread-safe.

    It keeps running counts, and of the calls themselves only what can still be part of the
    trailing run of faults: the calls in flight and the faults after the latest call that
    ended otherwise, so an agent making calls for hours holds no memory for them.
    ``api_key``: redacted from evidence wherever a provider's code or header echoes it.
    """

    def __init__(self, api_key: str | None = None) -> None:
        self._api_key = api_key
        self._lock = threading.Lock()
        self._started = 0
        self._in_flight: set[int] = set()
        self._ended = CallCounts()  # the counts of the calls that ended
        self._cleared = 0  # the latest call (by number) that ended in anything but a fault
        self._faults: dict[int, str] = {}  # call -> evidence, for calls after _cleared

    def start(self) -> int:
        """Number the next call (1, 2, ...) as it starts."""
        with self._lock:
            self._started += 1
            self._in_flight.add(self._started)
            return self._started

    def end(self, call: int, outcome: CallOutcome) -> None:
        """Count how call number ``call`` ended."""
        with self._lock:
            self._in_flight.discard(call)
            self._ended = _counted(self._ended, outcome)
            if call <= self._cleared:
                return  # a later call ended otherwise: this one can no longer trail
            if outcome.evidence is not None:  # a fault
                evidence = outcome.evidence
                evidence = secret_forms(self._api_key).redact_text(evidence)
                self._faults[call] = f"call {call}: {evidence}"
            else:
                self._cleared = call
                self._faults = {n: e for n, e in self._faults.items() if n > call}

    @property
    def calls(self) -> int:
        """How many calls started."""
        with self._lock:
            return self._started

    def counts(self) -> CallCounts:
        """The counts so far, the calls in flight and the unrecovered faults with them."""
        with self._lock:
            unrecovered, evidence = self._unrecovered()
            return dataclasses.replace(
                self._ended,
                in_flight=len(self._in_flight),
                unrecovered_faults=unrecovered,
                fault_evidence=evidence,
            )

    def unrecovered(self) -> tuple[int, tuple[str, ...]]:
        """How many faults end the attempt unrecovered, and the last :data:`MAX_EVIDENCE` of
        them: ``"call 7: HTTP 429 without Retry-After"``."""
        with self._lock:
            return self._unrecovered()

    def _unrecovered(self) -> tuple[int, tuple[str, ...]]:
        # The run of faults back from the last call started; a call in flight, or one that
        # ended otherwise, ends it.
        run: list[str] = []
        call = self._started
        while call in self._faults:
            run.append(self._faults[call])
            call -= 1
        return len(run), tuple(reversed(run[:MAX_EVIDENCE]))


def _counted(counts: CallCounts, outcome: CallOutcome) -> CallCounts:
    """``counts`` with one more call that ended as ``outcome``."""
    usage = outcome.usage or (0, 0)
    if outcome.outcome == "step":
        return dataclasses.replace(
            counts,
            requests=counts.requests + 1,
            steps=counts.steps + 1,
            tokens_in=counts.tokens_in + usage[0],
            tokens_out=counts.tokens_out + usage[1],
            step_usage_missing=counts.step_usage_missing or outcome.usage is None,
            unknown_usage_calls=counts.unknown_usage_calls + outcome.usage_unknown,
        )
    return dataclasses.replace(  # what a failed or broken-off call reported is failed tokens
        counts,
        requests=counts.requests + 1,
        unknown_usage_calls=counts.unknown_usage_calls + outcome.usage_unknown,
        provider_faults=counts.provider_faults + (outcome.outcome == "fault"),
        interrupted_calls=counts.interrupted_calls + outcome.interrupted,
        failed_tokens_in=counts.failed_tokens_in + usage[0],
        failed_tokens_out=counts.failed_tokens_out + usage[1],
    )


def review(verdict: Verdict, unrecovered: int, evidence: tuple[str, ...]) -> Verdict:
    """``provider_error`` for an attempt that would fail after ``unrecovered`` provider faults.

    A ``success`` stays one (its faults are still counted), and so do a ``harness_error``
    and a fatal ``provider_error``. What grading found stays on the record (the submission's
    fingerprints, a validation message); the score goes.
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
