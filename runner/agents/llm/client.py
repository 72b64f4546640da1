"""A minimal client for OpenAI-compatible chat completions with tool calling.

Runs in the harness (the API key never enters the sandbox). Every call is bounded by the
attempt's deadline: retries of 429/5xx/network errors back off only while time remains.
Errors that retrying cannot fix (bad key, no credit, unknown model) end the attempt as a
``provider_error``. Each call is counted by the provider-fault rule
(:mod:`runner.agents.provider_faults`) in ``ChatClient.calls``: a step, a provider fault, or the
agent's (another 4xx, the budget ending during the call).
"""

from __future__ import annotations

import http.client
import json
import math
import random
import socket
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from runner.agents.provider_faults import (
    CallLedger,
    CallOutcome,
    error_event,
    error_status,
    provider_cut,
)
from runner.agents.redaction import secret_forms

RETRYABLE_STATUS = frozenset({408, 409, 429, 500, 502, 503, 504, 520, 522, 524, 529})
FATAL_CODES = frozenset({"insufficient_quota", "billing_hard_limit_reached", "invalid_api_key"})
CONTEXT_HINTS = (
    "context length",
    "context_length",
    "maximum context",
    "too many tokens",
    "too long",
)
MAX_BACKOFF = 30.0
MAX_REPLY_BYTES = 64 * 1024 * 1024  # a reply past this is the provider's failure, not kept


class ProviderFailure(Exception):
    """The provider refused for a reason retrying cannot fix: the attempt is a provider_error."""


class CallFailed(Exception):
    """The model call failed for good (retries used up, or a request the provider refuses):
    the conversation ends. Whose failure it was, the ledger says (a trailing provider fault)."""


class ContextTooLong(Exception):
    """The provider says the conversation no longer fits the model's context."""


class OutOfTime(Exception):
    """The budget ended before the provider answered."""


@dataclass
class CallStats:
    retries: int = 0
    seconds: float = 0.0


@dataclass(frozen=True)
class Failure:
    """A model call that brought no completion: what the provider said, and how it ended."""

    status: int  # 0: no HTTP reply
    message: str
    call: CallOutcome  # how the call ended, by the provider-fault rule
    code: str | None = None
    retry_after: float | None = None
    budget: bool = False  # the attempt's budget ended during the call


class _Body(Protocol):
    """A reply being read: urllib's response, or the HTTPError wrapping one."""

    def read1(self, size: int = ..., /) -> bytes: ...


class RetryHook(Protocol):
    """Told of each retry: the failed call's status (0: no response), the wait, the error."""

    def __call__(self, *, status: int, wait: float, error: str) -> None: ...


class ChatClient:
    def __init__(
        self,
        base_url: str,
        api_key: str | None,
        *,
        request_timeout: float,
        max_retries: int,
        on_retry: RetryHook | None = None,
    ):
        self.url = base_url.rstrip("/") + "/chat/completions"
        self._api_key = api_key
        self.request_timeout = request_timeout
        self.max_retries = max_retries
        self.stats = CallStats()
        self.calls = CallLedger(api_key)  # evidence never holds the key
        # Nor does anything read from the provider: a reply reflecting the key would carry
        # it into the conversation, the sandbox (tool calls), the transcript and the record.
        self._forms = secret_forms(api_key)
        self._on_retry: RetryHook = on_retry or (lambda **_: None)
        host = urllib.parse.urlsplit(self.url).hostname or ""
        # A local server (vLLM, Ollama, a test stand-in) is never reached through a proxy.
        proxies: dict[str, str] | None = {} if host in ("127.0.0.1", "localhost", "::1") else None
        self._opener = urllib.request.build_opener(urllib.request.ProxyHandler(proxies))

    def complete(self, body: Mapping[str, object], deadline: float) -> dict[str, Any]:
        """POST one chat-completions request; retry transient failures while the budget allows.

        The reply is a completion: a complete 2xx JSON object with ``choices``; its message is
        checked by whoever reads it
        (:func:`runner.agents.llm.conversation.message_of`).
        """
        started = time.monotonic()
        try:
            return self._complete(body, deadline)
        finally:
            self.stats.seconds += time.monotonic() - started

    def _complete(self, body: Mapping[str, object], deadline: float) -> dict[str, Any]:
        payload = json.dumps(body).encode("utf-8")
        failures = 0
        while True:
            if deadline - time.monotonic() <= 0.05:
                raise OutOfTime("the budget ended before the model answered")
            number = self.calls.start()
            outcome = self._post(payload, deadline)
            if isinstance(outcome, dict):
                self.calls.end(number, CallOutcome("step", usage=_usage(outcome)))
                return outcome
            self.calls.end(number, outcome.call)
            if outcome.budget:
                raise OutOfTime(f"the budget ended during a model call: {_describe(outcome)}")
            _raise_if_final(outcome)
            failures += 1
            if failures > self.max_retries:
                raise CallFailed(
                    f"gave up after {self.max_retries} retries; last error: {_describe(outcome)}"
                )
            wait = outcome.retry_after if outcome.retry_after is not None else _backoff(failures)
            wait = min(wait, MAX_BACKOFF)
            if time.monotonic() + wait >= deadline:
                raise OutOfTime(f"no time left to retry after: {_describe(outcome)}")
            self.stats.retries += 1
            self._on_retry(status=outcome.status, wait=wait, error=outcome.message)
            time.sleep(wait)

    def _post(self, payload: bytes, deadline: float) -> dict[str, Any] | Failure:
        """One model call within ``request_timeout`` and the budget, classified by the rule."""
        started = time.monotonic()
        call_deadline = min(started + self.request_timeout, deadline)
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        request = urllib.request.Request(self.url, data=payload, headers=headers, method="POST")
        try:
            response = self._opener.open(request, timeout=max(0.01, call_deadline - started))
        except urllib.error.HTTPError as exc:
            with exc:
                return self._error_reply(exc, call_deadline, deadline)
        except urllib.error.URLError as exc:  # urllib: the request could not be sent at all
            return self._no_reply(exc.reason, deadline, sent=False)
        except (OSError, http.client.HTTPException) as exc:  # sent; the reply never came
            return self._no_reply(exc, deadline, sent=True)
        with response:
            try:
                raw = _read(response, call_deadline)
            except (OSError, http.client.HTTPException) as exc:
                return self._no_reply(exc, deadline, sent=True, status=response.status)
        return _completion(response.status, self._forms.redact(raw))

    def _error_reply(
        self, exc: urllib.error.HTTPError, call_deadline: float, deadline: float
    ) -> Failure:
        try:
            raw = self._forms.redact(_read(exc, call_deadline))
        except (OSError, http.client.HTTPException):
            raw = b""  # the status is what counts; its body only explains it
        error, usage = _error_and_usage(raw)
        code = error.get("code") or error.get("type") if isinstance(error, dict) else None
        said = exc.headers.get("Retry-After") if exc.headers else None
        status = exc.code
        call = error_status(status, code, said, usage)
        return Failure(
            status=status,
            message=_error_message(error) or str(exc.reason),
            call=call,
            code=str(code)[:80] if code else None,
            retry_after=_seconds(said),
        )

    def _no_reply(self, exc: object, deadline: float, *, sent: bool, status: int = 0) -> Failure:
        """No complete reply: the budget ended (the agent's), or the provider failed the call
        (unreachable, timed out, or it cut the reply): a fault, as the gateway's 502/504 is."""
        reason = getattr(exc, "reason", None) or exc
        timed_out = isinstance(reason, TimeoutError)
        what = f"{type(reason).__name__}: {reason}" if str(reason) else type(reason).__name__
        what = self._forms.redact_text(what)  # http.client quotes a broken status line
        if timed_out and time.monotonic() >= deadline - 0.05:
            return Failure(status, what, CallOutcome("cut", interrupted=True), budget=True)
        if timed_out:
            fault = "the provider did not answer in time"
        elif not sent:
            fault = "the provider could not be reached"
        elif status:
            return Failure(status, f"network error: {what}", provider_cut())
        else:
            fault = "the provider closed the connection before its reply"
        call = CallOutcome("fault", fault, interrupted=sent, usage_due=sent)
        return Failure(status, f"network error: {what}", call)


def _read(response: _Body, call_deadline: float) -> bytes:
    """The whole body, within the call's deadline and MAX_REPLY_BYTES.

    urllib's timeout bounds each read, not the call: a provider dripping a byte at a time
    would outlive any deadline, so each read gets the time the call has left.
    """
    sock = _socket_of(response)
    parts: list[bytes] = []
    size = 0
    while True:
        left = call_deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("the reply did not end in time")
        if isinstance(sock, socket.socket):
            sock.settimeout(left)
        chunk = response.read1(64 * 1024)
        if not chunk:
            return b"".join(parts)
        size += len(chunk)
        if size > MAX_REPLY_BYTES:
            raise http.client.HTTPException(f"the reply exceeds {MAX_REPLY_BYTES:,} bytes")
        parts.append(chunk)


def _socket_of(response: object) -> socket.socket | None:
    """The socket under urllib's response (an HTTPError wraps the response once more)."""
    for _ in range(3):
        raw = getattr(getattr(response, "fp", None), "raw", None)
        sock = getattr(raw, "_sock", None)
        if isinstance(sock, socket.socket):
            return sock
        response = getattr(response, "fp", None)
    return None


def _completion(status: int, raw: bytes) -> dict[str, Any] | Failure:
    """A 2xx body: a completion (a step), or the provider's failure inside a 2xx reply.

    Its terminal event is the complete JSON object itself (a cut one does not parse) with
    its ``choices``: the reply ended, whatever ``finish_reason`` says (``length``, or none),
    unless it is an error event: an ``error`` in the reply or in ``choices[0]``, or
    ``finish_reason: "error"``. The gateway judges the JSON bodies it forwards the same way.
    """
    try:
        data = json.loads(raw)
        json.dumps(data)  # it is sent back next call: too deep to re-encode is as broken as cut
    except (ValueError, RecursionError):
        data = None
    if not isinstance(data, dict):
        return Failure(status, "the reply is not a complete JSON object", provider_cut())
    error, usage = _error_and_usage(raw, data)
    choices = data.get("choices")
    choice = choices[0] if isinstance(choices, list) and choices else None
    finish = choice.get("finish_reason") if isinstance(choice, dict) else None
    if not error and isinstance(choice, dict):
        error = choice.get("error")
    if error or finish == "error":
        code = error.get("code") or error.get("type") if isinstance(error, dict) else None
        call = error_event(status, code, usage=usage)
        return Failure(status, _error_message(error) or "finish_reason is error", call)
    if not isinstance(choices, list):  # not a completion: what came instead is not known
        return Failure(status, "the reply has no choices", provider_cut(usage=usage))
    return data


def _error_and_usage(raw: bytes, data: object = None) -> tuple[object, tuple[int, int] | None]:
    """A reply's ``error`` (None if it has none) and the usage it reports (None if none)."""
    if data is None:
        try:
            data = json.loads(raw or b"{}")
        except (ValueError, RecursionError):
            data = None
    if not isinstance(data, dict):
        return None, None
    return data.get("error"), _usage(data)


def _usage(reply: dict[str, Any]) -> tuple[int, int] | None:
    usage = reply.get("usage")
    usage = usage if isinstance(usage, dict) else {}
    prompt, completion = usage.get("prompt_tokens"), usage.get("completion_tokens")
    if type(prompt) is int and type(completion) is int and prompt >= 0 and completion >= 0:
        return prompt, completion
    return None


def _seconds(value: str | None) -> float | None:
    try:
        seconds = float(value) if value is not None else None
    except ValueError:
        return None  # an HTTP date: waited for as the backoff would
    return seconds if seconds is not None and math.isfinite(seconds) and seconds >= 0 else None


def _error_message(error: object) -> str | None:
    if isinstance(error, dict):
        return str(error.get("message") or error)
    return str(error) if error else None


def _raise_if_final(error: Failure) -> None:
    """Raise unless ``error`` is worth retrying: a provider fault, or a 408/409."""
    if error.code in FATAL_CODES or error.status in (401, 402, 403, 404):
        raise ProviderFailure(_describe(error))
    if error.status in (400, 413) and any(h in error.message.lower() for h in CONTEXT_HINTS):
        raise ContextTooLong(error.message)
    if error.call.outcome != "fault" and error.status not in RETRYABLE_STATUS:
        # Another 4xx: the provider refuses this request; the agent's, not the provider's.
        raise CallFailed(f"the provider refused the request: {_describe(error)}")


def _describe(error: Failure) -> str:
    status = f"HTTP {error.status}" if error.status else "no response"
    code = f" ({error.code})" if error.code else ""
    return f"{status}{code}: {error.message}"


def _backoff(failures: int) -> float:
    doubling: int = 2 ** (failures - 1)  # failures >= 1
    return min(MAX_BACKOFF, doubling) * random.uniform(0.8, 1.2)
