"""The attempt's spend ceilings: how many model calls, tokens and dollars the gateway forwards.

The key's owner pays for every call the gateway forwards, and a looping agent can make
thousands a minute. So before forwarding a model call the gateway asks :class:`SpendMeter`;
once a ceiling is reached it answers the call itself (:func:`refusal`), in the error the
protocol's clients take for an exhausted quota and do not retry, and the attempt ends: the
sandbox watches :meth:`SpendMeter.broken` as a cap (``limit_exceeded="spend"``, see
:mod:`runner.attempts.limits`).

The arithmetic, with every call in flight counted conservatively:

- *requests*: a call is forwarded only while fewer than ``requests`` were forwarded (calls in
  flight included), so the provider never sees more than ``requests`` calls;
- *tokens* (in + out) and *cost* (needs prices): a call is forwarded only while the tokens
  (or dollars) of the calls that ended, plus each call in flight counted as the largest call
  so far, are below the ceiling. Usage is known only when a reply ends, so the totals can end
  past these ceilings by at most what the calls in flight at that moment used;
- a forwarded call whose reply was a success but whose usage the gateway never saw (a stream
  the client dropped before its usage, a provider that sends none) counts as the largest call
  so far, so hiding usage does not hide spending; one the provider refused or never answered
  (no usage, no 2xx) counts nothing;
- once a call is refused, every later one is too (the meter is *broken*, for good).

Defaults come from the attempt's budget (:func:`default_ceilings`), per minute of it, for at
least :data:`MIN_DEFAULT_MINUTES` minutes. They are there to stop a runaway (2,946 calls and
294.6 M tokens in 40 s), never to bind on an agent at work, since a binding ceiling would move
its score: 60 calls a minute is what the default request rate (``requests_per_minute`` 60)
lets through anyway; 2 M tokens a minute is about twice a heavy CLI's peak (Claude Code late in
a session: 8 or so calls a minute, each reading 100-150 k tokens of cached context, all of it
counted as input); $2 a minute is those tokens at Sonnet-class input prices. A spec that knows
its agent sets them tighter.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass
from typing import Literal

from runner.agents.gateway.client_connection import error_body, error_response
from runner.agents.gateway.model_requests import Protocol
from runner.agents.provider_faults import Prices
from runner.attempts.limits import Limit

Ceiling = Literal["requests", "tokens", "cost_usd"]

REQUESTS_PER_BUDGET_MINUTE = 60  # what the default request rate lets through, no more
TOKENS_PER_BUDGET_MINUTE = 2_000_000  # twice a heavy CLI's peak (see the module doc)
USD_PER_BUDGET_MINUTE = 2.0
MIN_DEFAULT_MINUTES = 5  # short budgets (smoke runs, tests) still start up: CLIs' first calls

_WHAT = {"requests": "model calls", "tokens": "tokens", "cost_usd": "dollars"}


@dataclass(frozen=True)
class SpendCeilings:
    """What one attempt's model calls may use; ``cost_usd`` only with ``prices``."""

    requests: int
    tokens: int
    cost_usd: float | None = None
    prices: Prices | None = None

    def __post_init__(self) -> None:
        if self.requests < 1 or self.tokens < 1:
            raise ValueError(f"spend ceilings must be positive, got {self}")
        if self.cost_usd is not None and (self.prices is None or not self.cost_usd > 0):
            raise ValueError("a cost ceiling needs prices and a positive number of dollars")

    def describe(self, ceiling: Ceiling) -> str:
        """``"600 model calls"``: the ceiling as the record's note says it."""
        if ceiling == "cost_usd":
            return f"${self.cost_usd:,.2f}"
        return f"{getattr(self, ceiling):,} {_WHAT[ceiling]}"


def default_ceilings(
    budget_seconds: float,
    *,
    requests: int | None = None,
    tokens: int | None = None,
    cost_usd: float | None = None,
    prices: Prices | None = None,
) -> SpendCeilings:
    """The ceilings of an attempt of ``budget_seconds``: each one given, else its default per
    minute of budget (see the module doc); the cost ceiling only with ``prices``."""
    minutes = max(budget_seconds / 60, MIN_DEFAULT_MINUTES)
    if prices is not None and cost_usd is None:
        cost_usd = round(USD_PER_BUDGET_MINUTE * minutes, 2)
    return SpendCeilings(
        requests=requests or math.ceil(REQUESTS_PER_BUDGET_MINUTE * minutes),
        tokens=tokens or math.ceil(TOKENS_PER_BUDGET_MINUTE * minutes),
        cost_usd=cost_usd if prices is not None else None,
        prices=prices,
    )


class SpendMeter:
    """An attempt's running totals against its :class:`SpendCeilings`; thread-safe.

    :meth:`admit` before forwarding a model call, :meth:`settle` when it ended.
    """

    def __init__(self, ceilings: SpendCeilings):
        self.ceilings = ceilings
        self._lock = threading.Lock()
        self.forwarded = 0
        self.in_flight = 0
        self.tokens_in = 0
        self.tokens_out = 0
        self._largest_in = 0  # the most one call used: what a call in flight may use
        self._largest_out = 0
        self.refused = 0
        self._reached: Ceiling | None = None

    def admit(self) -> Ceiling | None:
        """None: forward the call (it is counted in flight); else the ceiling it would pass,
        and this call and every later one are refused."""
        with self._lock:
            if self._reached is None:
                self._reached = self._ceiling_reached()
            if self._reached is not None:
                self.refused += 1
                return self._reached
            self.forwarded += 1
            self.in_flight += 1
            return None

    def _ceiling_reached(self) -> Ceiling | None:
        ceilings = self.ceilings
        if self.forwarded >= ceilings.requests:
            return "requests"
        tokens_in = self.tokens_in + self.in_flight * self._largest_in
        tokens_out = self.tokens_out + self.in_flight * self._largest_out
        if tokens_in + tokens_out >= ceilings.tokens:
            return "tokens"
        if ceilings.cost_usd is not None and ceilings.prices is not None:
            cost = ceilings.prices.cost(tokens_in, tokens_out) or 0.0
            if cost >= ceilings.cost_usd:
                return "cost_usd"
        return None

    def settle(self, usage: tuple[int, int] | None, answered: bool) -> None:
        """A forwarded call ended: ``usage`` as the provider reported it (None: unknown);
        ``answered``: the provider gave a 2xx, so an unknown usage may still be billed."""
        with self._lock:
            self.in_flight -= 1
            if usage is None:
                if not answered:
                    return
                usage = (self._largest_in, self._largest_out)  # hidden usage is still spent
            tokens_in, tokens_out = max(0, usage[0]), max(0, usage[1])
            self.tokens_in += tokens_in
            self.tokens_out += tokens_out
            self._largest_in = max(self._largest_in, tokens_in)
            self._largest_out = max(self._largest_out, tokens_out)

    @property
    def limit(self) -> Limit:
        """The cap it is, as the record names it (a :class:`runner.attempts.limits.WatchedCap`)."""
        return "spend"

    @property
    def reached(self) -> Ceiling | None:
        """The ceiling that refused a call, once one did."""
        with self._lock:
            return self._reached

    def broken(self) -> str | None:
        """None while no call was refused; then what the record notes (the sandbox ends the
        attempt on it: :class:`runner.attempts.limits.WatchedCap`)."""
        with self._lock:
            if self._reached is None:
                return None
            used = {
                "requests": "",
                "tokens": f"; {self.tokens_in + self.tokens_out:,} used",
                "cost_usd": f"; {self.tokens_in:,} tokens in and {self.tokens_out:,} out used",
            }[self._reached]
            return (
                f"spend cap: the agent's model calls reached gateway.spend.{self._reached} "
                f"({self.ceilings.describe(self._reached)}{used}); the gateway refused "
                f"{self.refused:,} further call(s) and the attempt was ended"
            )


#: What each protocol's clients take for an exhausted quota and give up on, as read in the
#: installed CLIs and measured (tests/agents/test_spend_refusals.py): Codex (Responses) stops at
#: once on a 429 without Retry-After whose code is ``insufficient_quota`` (OpenAI's own quota
#: answer; it says "Quota exceeded. Check your plan and billing details."). The chat-completions
#: CLIs retry a 429 (OpenCode and Kilo through the AI SDK retry 408, 409, 429 and 5xx; litellm,
#: under aider and mini-swe-agent, turns a 402 or 403 into a retried APIError), but not a 400,
#: which is what OpenAI sent for a reached billing limit (``billing_hard_limit_reached``);
#: only mini-swe-agent retries it, a bounded 10 times with backoff. Claude Code retries no 4xx
#: but 401, 408, 409, 429 and 451, and a 400 ``invalid_request_error`` is what Anthropic sends
#: for a reached spend limit.
_STATUS: dict[Protocol, tuple[int, str]] = {
    "openai-chat": (400, "Bad Request"),
    "openai-responses": (429, "Too Many Requests"),
    "anthropic-messages": (400, "Bad Request"),
}


def _refusal(kind: Protocol, ceiling: Ceiling) -> tuple[int, str, str]:
    """Status, error type and message of the gateway's answer to a model call past
    ``ceiling``. The message holds no digits and none of the words (rate limit, try again,
    overloaded, ...) that make OpenCode and Kilo retry an error whatever its status."""
    message = (
        f"tmlbench gateway: this attempt has used up its {_WHAT[ceiling]} allowance (the "
        f"agent spec's gateway.spend.{ceiling}); no further model calls are forwarded"
    )
    error_type = "invalid_request_error" if kind == "anthropic-messages" else "insufficient_quota"
    return _STATUS[kind][0], error_type, message


def refusal(kind: Protocol, ceiling: Ceiling) -> tuple[int, str, bytes]:
    """The gateway's answer to a model call past ``ceiling``: status, reason phrase, body."""
    status, error_type, message = _refusal(kind, ceiling)
    return status, _STATUS[kind][1], error_body(kind, error_type, "insufficient_quota", message)


def refusal_response(kind: Protocol, ceiling: Ceiling, keep_alive: bool) -> bytes:
    """:func:`refusal` as the HTTP/1.1 response the gateway sends (no Retry-After: no wait
    makes it pass)."""
    status, error_type, message = _refusal(kind, ceiling)
    return error_response(
        kind, status, error_type, "insufficient_quota", message, close=not keep_alive
    )
