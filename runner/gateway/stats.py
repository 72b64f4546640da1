"""What the gateway counts of the requests it forwards, and which provider errors are fatal."""

from __future__ import annotations

import dataclasses
import re
import threading
import typing
from dataclasses import dataclass
from typing import Any

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
    """What went through the gateway so far.

    ``requests``: model calls forwarded (POST to a generation endpoint), failures included;
    ``retries``: model calls answered 408/429/5xx, with an error inside a 2xx reply, or that
    could not reach the provider (502/504), or whose reply the provider broke off: the CLI
    retries those itself; ``steps``: model calls answered 2xx in full; ``tokens_in`` /
    ``tokens_out``: summed usage of all model calls (a call the client abandoned counts what
    its reply had reported by then); ``usage_missing``: some complete 2xx model call had no
    usage, so the totals are unknown; ``provider_seconds``: wall time of the model calls,
    summed; ``provider_error``: the first authentication (401), payment/permission (402/403
    on a model call) or quota failure, e.g. ``"HTTP 401 (invalid_api_key): ..."``;
    ``other_requests``: non-model requests forwarded (``GET /v1/models``, ...);
    ``rejected``: requests the gateway answered itself (400, 404, 405, 413, 431, 503).
    """

    requests: int = 0
    retries: int = 0
    steps: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    usage_missing: bool = False
    provider_seconds: float = 0.0
    provider_error: str | None = None
    other_requests: int = 0
    rejected: int = 0

    def record_fields(self, prices: Prices | None = None) -> dict[str, object]:
        """The run record's usage fields; unknown tokens (and so cost) are None, never 0.

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

    def snapshot(self) -> GatewayStats:
        with self._lock:
            return GatewayStats(**self._counts)

    def reject(self) -> None:
        """A request the gateway answered itself."""
        with self._lock:
            self._counts["rejected"] += 1

    def account(
        self,
        kind: Protocol | None,
        status: int,
        seconds: float,
        reply: Reply | None,
        interrupted: str | None,
    ) -> None:
        """The stats of one forwarded request."""
        error = reply.error if reply is not None else None
        fatal = fatal_error(kind, status, error)
        with self._lock:
            s = self._counts
            if fatal is not None and s["provider_error"] is None:
                s["provider_error"] = (
                    fatal.replace(self._api_key, "[redacted]") if self._api_key else fatal
                )
            if kind is None:
                s["other_requests"] += 1
                return
            s["requests"] += 1
            s["provider_seconds"] += seconds
            usage = reply.usage if reply is not None else None
            if usage is not None:
                s["tokens_in"] += usage[0]
                s["tokens_out"] += usage[1]
            if 200 <= status < 300:
                if interrupted == "upstream" or (
                    interrupted is None and error is not None and usage is None
                ):
                    s["retries"] += 1
                elif interrupted is None:
                    s["steps"] += 1
                    if usage is None:
                        s["usage_missing"] = True
            elif status in RETRYABLE_STATUS or status >= 500:
                s["retries"] += 1
