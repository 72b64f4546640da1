"""What one model call came to, by the provider-fault rule, and which faults went unrecovered.

Every model call (a POST to a generation endpoint, refused or forwarded) ends as one of:

- ``step``: a 2xx reply that reached its protocol's terminal event with no error event;
- ``fault``: the provider failed it: HTTP 429 or 5xx (the gateway's own 502/504 for an
  unreachable or timed-out provider included), an error event inside a 2xx reply, or a
  2xx reply the provider cut before its terminal event (close-delimited or chunked);
- ``cut``: the client (the agent) or the end of the attempt (the budget) broke it off:
  interrupted, and the agent's, never a fault;
- ``refused``: any other answer (a 4xx but 429, the agent's bad request), or the gateway's
  own 429 for an agent over its spec's request rate: the agent's.

Faults are *unrecovered* when the last call started ended in a fault: the trailing run of
faults, in the order the calls started. A step, a cut or a refusal after a fault means the
attempt went on past it (the agent's to finish). The rule is the lead's; see
``runner.drivers.CommandDriver.review`` for what an unrecovered fault does to a verdict.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from runner.gateway.model_requests import Protocol
from runner.gateway.replies import Reply

Outcome = Literal["step", "fault", "cut", "refused"]

#: How many unrecovered faults a record lists (the last ones).
MAX_EVIDENCE = 5
#: Error codes of the gateway's own 502/504 (no provider text in them).
UNREACHABLE, TIMED_OUT = "provider_unreachable", "provider_timeout"

_TERMINAL = {
    "openai-chat": "[DONE]",
    "openai-responses": "response.completed",
    "anthropic-messages": "message_stop",
}
_SAFE_CODE = re.compile(r"[A-Za-z0-9_.\-]{1,40}")


@dataclass(frozen=True)
class CallOutcome:
    """One model call, classified: what it was, and for a fault one line of evidence."""

    outcome: Outcome
    evidence: str | None = None  # faults only: what failed, without the call number
    interrupted: bool = False  # broken off before its terminal event (by anyone)
    usage: tuple[int, int] | None = None  # what the provider reported, if anything


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
        said = f"with Retry-After: {_short(retry_after)}" if retry_after else "without Retry-After"
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
    code = error[0] if error is not None else None
    return code if code is not None and _SAFE_CODE.fullmatch(code) else None


def _short(value: str) -> str:
    return value if _SAFE_CODE.fullmatch(value) else "(unreadable)"


#: The gateway's own 429 to an agent over its spec's request rate.
RATE_LIMITED = CallOutcome("refused")


class CallLedger:
    """The outcomes of an attempt's model calls, by the order they started (not thread-safe:
    the gateway's tally holds its lock around it).

    Only what can still be part of the trailing run of faults is kept: the calls in flight
    and the faults after the latest call that ended otherwise, so an agent making calls for
    hours holds no memory for them.
    """

    def __init__(self) -> None:
        self._started = 0
        self._in_flight: set[int] = set()
        self._cleared = 0  # the latest call (by number) that ended in anything but a fault
        self._faults: dict[int, str] = {}  # call -> evidence, for calls after _cleared

    def start(self) -> int:
        """Number the next call (1, 2, ...) in the order calls start."""
        self._started += 1
        self._in_flight.add(self._started)
        return self._started

    def end(self, call: int, outcome: CallOutcome) -> None:
        self._in_flight.discard(call)
        if outcome.outcome == "fault":
            if call > self._cleared:
                self._faults[call] = f"call {call}: {outcome.evidence}"
        elif call > self._cleared:
            self._cleared = call
            self._faults = {n: e for n, e in self._faults.items() if n > call}

    def unrecovered(self) -> tuple[int, tuple[str, ...]]:
        """How many faults end the attempt unrecovered, and the last ``MAX_EVIDENCE`` of them.

        The run of faults back from the last call started; a call still in flight, or one
        that ended otherwise, ends it.
        """
        run: list[str] = []
        call = self._started
        while call in self._faults:
            run.append(self._faults[call])
            call -= 1
        return len(run), tuple(reversed(run[:MAX_EVIDENCE]))
