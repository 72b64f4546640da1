"""How the gateway classifies a model call it forwarded, by the provider-fault rule.

The rule, its words (:class:`~runner.provider_faults.CallOutcome`) and its counts are
:mod:`runner.provider_faults`; here is what it takes to apply it to the replies of each
protocol the gateway speaks: which event is terminal, which status or event is the provider's
failure, and the gateway's own answers (its 502/504 for an unreachable or timed-out
provider, its 429 for an agent over its spec's request rate).
"""

from __future__ import annotations

from runner.gateway.model_requests import Protocol
from runner.gateway.replies import Reply
from runner.provider_faults import CallOutcome, safe_code

#: Error codes of the gateway's own 502/504 (no provider text in them).
UNREACHABLE, TIMED_OUT = "provider_unreachable", "provider_timeout"

_TERMINAL = {
    "openai-chat": "[DONE]",
    "openai-responses": "response.completed",
    "anthropic-messages": "message_stop",
}


def classify(
    kind: Protocol, status: int, reply: Reply | None, interrupted: str | None
) -> CallOutcome:
    """The outcome of a forwarded model call.

    ``interrupted``: ``"client"`` (the agent left), ``"stopped"`` (the gateway stopped: the
    attempt ended), ``"upstream"`` (the provider's connection broke) or None.
    """
    usage = reply.usage if reply is not None else None
    error = reply.error if reply is not None else None
    if interrupted in ("client", "stopped"):
        return CallOutcome("cut", interrupted=True, usage=usage)
    if status == 429:
        retry_after = reply.retry_after if reply is not None else None
        said = "without Retry-After"
        if retry_after:
            said = f"with Retry-After: {safe_code(retry_after) or '(unreadable)'}"
        return CallOutcome("fault", f"HTTP 429 {said}", usage=usage)
    if status >= 500:
        code = _code(error)
        if code == UNREACHABLE:
            what = f"HTTP {status}: the gateway could not reach the provider"
        elif code == TIMED_OUT:
            what = f"HTTP {status}: the provider did not answer in time"
        else:
            what = f"HTTP {status}" + (f" ({code})" if code else "")
        return CallOutcome("fault", what, usage=usage)
    if not 200 <= status < 300:
        return CallOutcome("refused", usage=usage)
    if error is not None:
        code = _code(error)
        what = f"error event in a {status} reply" + (f" ({code})" if code else "")
        return CallOutcome("fault", what, interrupted=interrupted is not None, usage=usage)
    if interrupted is not None or reply is None or not reply.terminal:
        end = _TERMINAL[kind] if reply is not None and reply.streamed else "its end"
        what = f"reply cut by the provider before {end}"
        return CallOutcome("fault", what, interrupted=True, usage=usage)
    return CallOutcome("step", usage=usage)


def _code(error: tuple[str | None, str] | None) -> str | None:
    """The error's code if it is a plain identifier: no free provider text in evidence."""
    return safe_code(error[0]) if error is not None else None


#: The gateway's own 429 to an agent over its spec's request rate.
RATE_LIMITED = CallOutcome("refused")
