"""What the gateway counts of the requests it forwards, and which provider errors are fatal."""

from __future__ import annotations

import dataclasses
import re
import threading
from dataclasses import dataclass

from runner.agents.gateway.call_outcomes import RATE_LIMITED, SPEND_REFUSED, classify
from runner.agents.gateway.model_requests import Protocol
from runner.agents.gateway.replies import Reply
from runner.agents.llm.client import FATAL_CODES, RETRYABLE_STATUS
from runner.agents.provider_faults import CallCounts, CallLedger, Prices
from runner.agents.redaction import secret_forms
from runner.attempts.records import ModelUsage

QUOTA_HINTS = (  # quota failures of providers that send no FATAL_CODES code
    "exceeded your current quota",
    "credit balance is too low",
    "insufficient balance",
    "insufficient credits",
)


_MASKED_KEY = re.compile(r"[A-Za-z0-9_\-]{0,16}\*{4,}[A-Za-z0-9_\-]{0,8}")


def redact_masked(text: str) -> str:
    """Providers echo a masked key in auth errors (``sk-pr***...abcd``): keep none of it."""
    return _MASKED_KEY.sub("[redacted]", text)


@dataclass(frozen=True)
class GatewayStats(CallCounts):
    """What went through the gateway so far: the model calls' counts by the provider-fault
    rule (:class:`~runner.agents.provider_faults.CallCounts`, classified by :mod:`.call_outcomes`),
    and what only the gateway knows.

    ``requests``: model calls forwarded (POST to a generation endpoint), failures included;
    ``retries``: model calls a client retries: the provider faults and 408/409 answers;
    ``rate_limited``: model calls the gateway refused (429) because the agent exceeded its
    spec's request rate, not forwarded and not in ``requests``; ``spend_refused``: model calls
    the gateway refused because the attempt reached its spend ceilings (likewise not
    forwarded; the record says ``limit_exceeded="spend"``); ``provider_seconds``: wall
    time of the model calls, summed; ``provider_error``: the first authentication (401),
    payment/permission (402/403 on a model call) or quota failure, e.g.
    ``"HTTP 401 (invalid_api_key): ..."``; ``other_requests``: allowed requests forwarded
    that generate nothing and bill no tokens (the model list, Anthropic's count_tokens: see
    :mod:`.routes`); ``forbidden_requests``: requests off the allow-list, answered 403 by the
    gateway and never forwarded; ``rejected``: malformed or oversized requests the gateway
    answered itself (400, 413, 431, 503).
    """

    retries: int = 0
    rate_limited: int = 0
    spend_refused: int = 0
    provider_seconds: float = 0.0
    provider_error: str | None = None
    other_requests: int = 0
    forbidden_requests: int = 0
    rejected: int = 0

    def usage(
        self, prices: Prices | None = None, fault_evidence: list[str] | None = None
    ) -> ModelUsage:
        """The run record's usage and provider-fault fields (see
        :meth:`CallCounts.model_usage <runner.agents.provider_faults.CallCounts.model_usage>`).

        ``prices``: the agent spec's ``TokenPrices``, or None for an unknown cost.
        """
        return self.model_usage(
            prices,
            fault_evidence=fault_evidence,
            retries=self.retries,
            provider_seconds=round(self.provider_seconds, 3),
            rate_limited=self.rate_limited,
            other_requests=self.other_requests,
            forbidden_requests=self.forbidden_requests,
        )


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
    """The running counts behind :class:`GatewayStats`, shared by all connection threads.

    The model calls' outcomes are counted once, in the ledger; the tally counts the rest.
    """

    def __init__(self, api_key: str | None):
        self._api_key = api_key
        self._lock = threading.Lock()  # a snapshot is of one moment: the ledger's and ours
        self._calls = CallLedger(api_key)
        self._refusals_retried = 0  # 408, 409: clients retry them, though they are no fault
        self._rate_limited = 0
        self._spend_refused = 0
        self._provider_seconds = 0.0
        self._provider_error: str | None = None
        self._other_requests = 0
        self._forbidden_requests = 0
        self._rejected = 0

    def snapshot(self) -> GatewayStats:
        with self._lock:
            calls = self._calls.counts()
            return GatewayStats(
                **dataclasses.asdict(calls)
                | {
                    # those never forwarded
                    "requests": calls.requests - self._rate_limited - self._spend_refused,
                    "retries": calls.provider_faults + self._refusals_retried,
                    "rate_limited": self._rate_limited,
                    "spend_refused": self._spend_refused,
                    "provider_seconds": self._provider_seconds,
                    "provider_error": self._provider_error,
                    "other_requests": self._other_requests,
                    "forbidden_requests": self._forbidden_requests,
                    "rejected": self._rejected,
                }
            )

    def reject(self) -> None:
        """A request the gateway answered itself."""
        with self._lock:
            self._rejected += 1

    def forbid(self) -> None:
        """A request off the allow-list, refused (403) and never forwarded."""
        with self._lock:
            self._forbidden_requests += 1

    def start_call(self) -> int:
        """Number a model call as it starts: the unrecovered faults go by this order."""
        with self._lock:
            return self._calls.start()

    def rate_limited(self, call: int) -> None:
        """A model call the gateway refused: the agent went over its spec's request rate."""
        with self._lock:
            self._rate_limited += 1
            self._calls.end(call, RATE_LIMITED)

    def spend_refused(self, call: int) -> None:
        """A model call the gateway refused: the attempt reached its spend ceilings."""
        with self._lock:
            self._spend_refused += 1
            self._calls.end(call, SPEND_REFUSED)

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
        if fatal is not None:
            fatal = secret_forms(self._api_key).redact_text(fatal)
        outcome = None
        if call is not None and kind is not None:
            outcome = classify(kind, status, reply, interrupted)
        with self._lock:
            if fatal is not None and self._provider_error is None:
                self._provider_error = fatal
            if call is None or outcome is None:
                self._other_requests += 1
                return
            self._calls.end(call, outcome)
            self._provider_seconds += seconds
            if outcome.outcome == "refused" and status in RETRYABLE_STATUS:
                self._refusals_retried += 1
