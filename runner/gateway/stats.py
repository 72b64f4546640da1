"""What the gateway counts of the requests it forwards, and which provider errors are fatal."""

from __future__ import annotations

import dataclasses
import re
import threading
import typing
from dataclasses import dataclass
from typing import Any

from runner.gateway.call_outcomes import RATE_LIMITED, CallLedger, CallOutcome, classify
from runner.gateway.model_requests import Protocol
from runner.gateway.replies import Reply
from runner.llm.client import FATAL_CODES, RETRYABLE_STATUS

QUOTA_HINTS = (  # quota failures of providers that send no FATAL_CODES code
    "exceeded your current quota",
    "credit balance is too low",
    "insufficient balance",
    "insufficient credits",
)


class Prices(typing.Protocol):
    """What turns tokens into dollars: the agent spec's ``TokenPrices`` (not imported here)."""

    def cost(self, tokens_in: int | None, tokens_out: int | None) -> float | None: ...


_MASKED_KEY = re.compile(r"[A-Za-z0-9_\-]{0,16}\*{4,}[A-Za-z0-9_\-]{0,8}")


def redact_masked(text: str) -> str:
    """Providers echo a masked key in auth errors (``sk-pr***...abcd``): keep none of it."""
    return _MASKED_KEY.sub("[redacted]", text)


@dataclass(frozen=True)
class GatewayStats:
    """What went through the gateway so far; model calls are classified by
    :mod:`.call_outcomes` (step, provider fault, cut, refused).

    ``requests``: model calls forwarded (POST to a generation endpoint), failures included;
    ``steps``: model calls that reached their protocol's terminal event in a 2xx reply with
    no error event; ``tokens_in`` / ``tokens_out``: the usage of the steps only;
    ``usage_missing``: some step reported no usage, so the totals are unknown;
    ``provider_faults``: model calls the provider failed (HTTP 429/5xx, the gateway's own
    502/504 for an unreachable provider, an error event in a 2xx reply, a 2xx reply it cut
    before its terminal event), recovered or not; ``retries``: model calls a client retries:
    the provider faults and 408/409 answers; ``interrupted_calls``: model calls broken off
    before their terminal event, by the provider, the client or the end of the attempt;
    ``failed_tokens_in`` / ``failed_tokens_out``: usage the provider reported for calls that
    were not steps (Anthropic's ``message_start`` before an ``overloaded_error``, ...);
    ``rate_limited``: model calls the gateway refused (429) because the agent exceeded its
    spec's request rate, not forwarded and not in ``requests``; ``unrecovered_faults``: how
    many provider faults end the call sequence (the last call started was one), and
    ``fault_evidence`` the last :data:`~.call_outcomes.MAX_EVIDENCE` of them, one line each;
    ``provider_seconds``: wall time of the model calls, summed; ``provider_error``: the
    first authentication (401), payment/permission (402/403 on a model call) or quota
    failure, e.g. ``"HTTP 401 (invalid_api_key): ..."``; ``other_requests``: non-model
    requests forwarded (``GET /v1/models``, ...); ``rejected``: requests the gateway
    answered itself (400, 404, 405, 413, 431, 503; not the rate limit's 429s).
    """

    requests: int = 0
    retries: int = 0
    steps: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    usage_missing: bool = False
    provider_faults: int = 0
    interrupted_calls: int = 0
    failed_tokens_in: int = 0
    failed_tokens_out: int = 0
    rate_limited: int = 0
    unrecovered_faults: int = 0
    fault_evidence: tuple[str, ...] = ()
    provider_seconds: float = 0.0
    provider_error: str | None = None
    other_requests: int = 0
    rejected: int = 0

    def record_fields(self, prices: Prices | None = None) -> dict[str, object]:
        """The run record's usage and provider-fault fields; unknown tokens (and so cost)
        are None, never 0. ``provider_fault_evidence`` is left to the driver, which knows
        whether the faults decided the attempt.

        ``prices``: the agent spec's ``TokenPrices``, or None for an unknown cost.
        """
        known = not self.usage_missing and self.requests > 0
        tokens_in = self.tokens_in if known else None
        tokens_out = self.tokens_out if known else None
        return {
            "tokens_in": tokens_in,
            "tokens_out": tokens_out,
            "cost_usd": prices.cost(tokens_in, tokens_out) if prices is not None else None,
            "requests": self.requests,
            "retries": self.retries,
            "steps": self.steps,
            "provider_seconds": round(self.provider_seconds, 3),
            "provider_faults": self.provider_faults,
            "interrupted_calls": self.interrupted_calls,
            "failed_tokens_in": self.failed_tokens_in,
            "failed_tokens_out": self.failed_tokens_out,
            "rate_limited": self.rate_limited,
        }


def fatal_error(
    kind: Protocol | None, status: int, error: tuple[str | None, str] | None
) -> str | None:
    """The provider error that no retry fixes (auth, payment, quota), as the record shows it."""
    if error is None and status < 400:
        return None
    code, message = error or (None, "")
    message = redact_masked(message)
    hint = (code or "").lower() + " " + message.lower()
    if (
        status == 401
        or (kind is not None and status in (402, 403))
        or code in FATAL_CODES
        or any(h in hint for h in QUOTA_HINTS)
    ):
        return (f"HTTP {status}" + (f" ({code})" if code else "") + f": {message}")[:500]
    return None


class StatsTally:
    """The running counts behind :class:`GatewayStats`, shared by all connection threads."""

    def __init__(self, api_key: str | None):
        self._api_key = api_key
        self._lock = threading.Lock()
        self._counts: dict[str, Any] = dataclasses.asdict(GatewayStats())
        self._calls = CallLedger()

    def snapshot(self) -> GatewayStats:
        with self._lock:
            unrecovered, evidence = self._calls.unrecovered()
            counts = self._counts | {"unrecovered_faults": unrecovered, "fault_evidence": evidence}
            return GatewayStats(**counts)

    def reject(self) -> None:
        """A request the gateway answered itself."""
        with self._lock:
            self._counts["rejected"] += 1

    def start_call(self) -> int:
        """Number a model call as it starts: the unrecovered faults go by this order."""
        with self._lock:
            return self._calls.start()

    def rate_limited(self, call: int) -> None:
        """A model call the gateway refused: the agent went over its spec's request rate."""
        with self._lock:
            self._counts["rate_limited"] += 1
            self._calls.end(call, RATE_LIMITED)

    def account(
        self,
        call: int | None,
        kind: Protocol | None,
        status: int,
        seconds: float,
        reply: Reply | None,
        interrupted: str | None,
    ) -> None:
        """The stats of one forwarded request; ``call``: its number if it is a model call."""
        error = reply.error if reply is not None else None
        fatal = fatal_error(kind, status, error)
        outcome = classify(kind, status, reply, interrupted) if kind is not None else None
        if outcome is not None and outcome.evidence and self._api_key:  # a provider's code
            evidence = outcome.evidence.replace(self._api_key, "[redacted]")
            outcome = dataclasses.replace(outcome, evidence=evidence)
        with self._lock:
            s = self._counts
            if fatal is not None and s["provider_error"] is None:
                s["provider_error"] = (
                    fatal.replace(self._api_key, "[redacted]") if self._api_key else fatal
                )
            if outcome is None:
                s["other_requests"] += 1
                return
            if call is not None:
                self._calls.end(call, outcome)
            s["requests"] += 1
            s["provider_seconds"] += seconds
            self._count(outcome, status)

    def _count(self, outcome: CallOutcome, status: int) -> None:
        s = self._counts
        usage = outcome.usage
        if outcome.outcome == "step":
            s["steps"] += 1
            if usage is None:
                s["usage_missing"] = True
            else:
                s["tokens_in"] += usage[0]
                s["tokens_out"] += usage[1]
            return
        if usage is not None:  # what a failed or broken-off call had reported
            s["failed_tokens_in"] += usage[0]
            s["failed_tokens_out"] += usage[1]
        if outcome.interrupted:
            s["interrupted_calls"] += 1
        if outcome.outcome == "fault":
            s["provider_faults"] += 1
            s["retries"] += 1
        elif outcome.outcome == "refused" and status in RETRYABLE_STATUS:
            s["retries"] += 1  # 408, 409: clients retry them, though they are no fault
