"""How the gateway classifies a model call it forwarded, by the provider-fault rule.

The rule, its words (:class:`~runner.agents.provider_faults.CallOutcome`) and its counts are
:mod:`runner.agents.provider_faults`; here is what it takes to apply it to the replies of each
protocol the gateway speaks: which event is terminal, which status or event is the provider's
failure, and the gateway's own answers (its 502/504 for an unreachable or timed-out
provider, its 429 for an agent over its spec's request rate, its quota error for an attempt
past its spend ceilings).
"""

from __future__ import annotations

from runner.agents.gateway.model_requests import Protocol
from runner.agents.gateway.replies import Reply
from runner.agents.provider_faults import CallOutcome, error_event, error_status, provider_cut

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
    code = reply.error[0] if reply is not None and reply.error is not None else None
    if interrupted in ("client", "stopped"):
        return CallOutcome("cut", interrupted=True, usage=usage)
    if status >= 500 and code in (UNREACHABLE, TIMED_OUT):
        # A provider that timed out may have taken the call (its usage is then unknown); an
        # unreachable one never had it.
        what = "the gateway could not reach the provider"
        if code == TIMED_OUT:
            what = "the provider did not answer in time"
        return CallOutcome(
            "fault", f"HTTP {status}: {what}", usage=usage, usage_due=code == TIMED_OUT
        )
    if not 200 <= status < 300:
        retry_after = reply.retry_after if reply is not None else None
        return error_status(status, code, retry_after, usage)
    if reply is not None and reply.error is not None:
        return error_event(status, code, interrupted is not None, usage)
    if interrupted is not None or reply is None or not reply.terminal:
        return provider_cut(
            _TERMINAL[kind] if reply is not None and reply.streamed else "its end", usage
        )
    return CallOutcome("step", usage=usage)


#: The gateway's own 429 to an agent over its spec's request rate.
RATE_LIMITED = CallOutcome("refused", usage_due=False)

#: The gateway's own quota error to an attempt past its spend ceilings (:mod:`.spend`): the
#: agent's, never a provider fault, whatever status the protocol's quota error has.
SPEND_REFUSED = CallOutcome("refused", usage_due=False)
