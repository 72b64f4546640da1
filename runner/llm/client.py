"""A minimal client for OpenAI-compatible chat completions with tool calling.

Runs in the harness (the API key never enters the sandbox). Every call is bounded by the
attempt's deadline: retries of 429/5xx/network errors back off only while time remains.
Errors that retrying cannot fix (bad key, no credit, unknown model) end the attempt as a
``provider_error``.
"""

from __future__ import annotations

import json
import random
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

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


class ProviderFailure(Exception):
    """The provider refused for a reason retrying cannot fix: the attempt is a provider_error."""


class ContextTooLong(Exception):
    """The provider says the conversation no longer fits the model's context."""


class OutOfTime(Exception):
    """The budget ended before the provider answered."""


@dataclass
class CallStats:
    requests: int = 0
    retries: int = 0
    seconds: float = 0.0


@dataclass(frozen=True)
class HttpError:
    status: int
    message: str
    code: str | None
    retry_after: float | None


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
        self._on_retry: RetryHook = on_retry or (lambda **_: None)
        host = urllib.parse.urlsplit(self.url).hostname or ""
        # A local server (vLLM, Ollama, a test stand-in) is never reached through a proxy.
        proxies: dict[str, str] | None = {} if host in ("127.0.0.1", "localhost", "::1") else None
        self._opener = urllib.request.build_opener(urllib.request.ProxyHandler(proxies))

    def complete(self, body: Mapping[str, object], deadline: float) -> dict[str, Any]:
        """POST one chat-completions request; retry transient failures while the budget allows.

        The reply is the provider's JSON object, with ``choices``; its shape is checked by
        whoever reads it (:func:`runner.llm.conversation.message_of`).
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
            remaining = deadline - time.monotonic()
            if remaining <= 0.05:
                raise OutOfTime("the budget ended before the model answered")
            self.stats.requests += 1
            outcome = self._post(payload, min(self.request_timeout, remaining))
            if isinstance(outcome, dict):
                return outcome
            _raise_if_fatal(outcome)
            failures += 1
            if failures > self.max_retries:
                raise ProviderFailure(
                    f"gave up after {self.max_retries} retries; last error: {_describe(outcome)}"
                )
            wait = outcome.retry_after if outcome.retry_after is not None else _backoff(failures)
            wait = min(wait, MAX_BACKOFF)
            if time.monotonic() + wait >= deadline:
                raise OutOfTime(f"no time left to retry after: {_describe(outcome)}")
            self.stats.retries += 1
            self._on_retry(status=outcome.status, wait=wait, error=outcome.message)
            time.sleep(wait)

    def _post(self, payload: bytes, timeout: float) -> dict[str, Any] | HttpError:
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        request = urllib.request.Request(self.url, data=payload, headers=headers, method="POST")
        try:
            with self._opener.open(request, timeout=timeout) as response:
                raw = response.read()
        except urllib.error.HTTPError as exc:
            return _http_error(exc)
        except (urllib.error.URLError, TimeoutError, ConnectionError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            return HttpError(
                status=0, message=f"network error: {reason}", code=None, retry_after=None
            )
        try:
            data = json.loads(raw)
        except (ValueError, RecursionError):
            return HttpError(
                status=0, message="the response was not JSON", code=None, retry_after=None
            )
        if not isinstance(data, dict) or not data.get("choices"):
            # Some providers answer 200 with an error object instead of a status code.
            error = data.get("error") if isinstance(data, dict) else None
            message = _error_message(error) or "the response had no choices"
            return HttpError(status=0, message=message, code=None, retry_after=None)
        return data


def _http_error(exc: urllib.error.HTTPError) -> HttpError:
    try:
        body = json.loads(exc.read() or b"{}")
    except (ValueError, OSError):
        body = {}
    error = body.get("error") if isinstance(body, dict) else None
    code = error.get("code") or error.get("type") if isinstance(error, dict) else None
    retry_after = exc.headers.get("Retry-After") if exc.headers else None
    try:
        retry_seconds = float(retry_after) if retry_after is not None else None
    except ValueError:
        retry_seconds = None
    return HttpError(
        status=exc.code,
        message=_error_message(error) or str(exc.reason),
        code=str(code) if code else None,
        retry_after=retry_seconds,
    )


def _error_message(error: object) -> str | None:
    if isinstance(error, dict):
        return str(error.get("message") or error)
    return str(error) if error else None


def _raise_if_fatal(error: HttpError) -> None:
    if error.code in FATAL_CODES or error.status in (401, 402, 403, 404):
        raise ProviderFailure(_describe(error))
    if error.status in (400, 413) and any(h in error.message.lower() for h in CONTEXT_HINTS):
        raise ContextTooLong(error.message)
    if error.status != 0 and error.status not in RETRYABLE_STATUS:
        raise ProviderFailure(_describe(error))


def _describe(error: HttpError) -> str:
    status = f"HTTP {error.status}" if error.status else "no response"
    code = f" ({error.code})" if error.code else ""
    return f"{status}{code}: {error.message}"


def _backoff(failures: int) -> float:
    doubling: int = 2 ** (failures - 1)  # failures >= 1
    return min(MAX_BACKOFF, doubling) * random.uniform(0.8, 1.2)
