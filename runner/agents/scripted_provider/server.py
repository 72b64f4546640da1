"""The loopback HTTP server that plays a script to whichever protocol the client speaks."""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

from .protocols import (
    ANTHROPIC_MESSAGES,
    ENDPOINTS,
    OPENAI_CHAT,
    Problem,
    ReceivedRequest,
    check_request,
    error_body,
    read_messages,
    read_tools,
    status_phrase,
)
from .replies import error_event, partial_events, render_events, render_json, resolve_reply
from .steps import ScriptEntry, Step, error, unmet_expectations, validate_script, validate_step
from .transport import (
    MAX_REQUEST_BYTES,
    THREAD_PREFIX,
    Answer,
    BodyTooLarge,
    ProviderHTTPServer,
    RequestHandler,
    read_body,
    write_answer,
)

#: Request bodies kept for assertions, in total; past it later records keep no body,
#: messages or tools (an agent looping for minutes must not grow the test's memory unbounded).
MAX_KEPT_BODY_BYTES = 256 * 1024 * 1024
_SECRET_HEADERS = ("authorization", "x-api-key", "api-key")


@dataclass(frozen=True)
class ServedStep:
    """A script step (or the ``then`` fallback) answering one request."""

    request: int  # index into ``ScriptedProvider.requests``
    step: int | None  # script index; None for the `then` fallback
    spec: Step  # the step played (a callable step's result)
    status: int
    # The usage the answer reported: a reply's; for a stream_error or cut step what its
    # events said before the fault (Anthropic's message_start), else 0.
    prompt_tokens: int
    completion_tokens: int
    protocol: str | None = None


class ScriptedProvider:
    """Context manager: a threaded HTTP server on 127.0.0.1 playing ``script``.

    Each valid model request (``POST /v1/chat/completions``, ``/v1/responses`` or
    ``/v1/messages``) consumes the next step, in arrival order, rendered in that request's
    protocol, streamed when it asked for ``stream: true``. Requests refused before the script
    (bad key, bad body, unknown model) consume nothing. After the script runs out the provider
    answers ``then`` forever; the default is a 500 "script exhausted" that is also recorded in
    ``mismatches``, so an unexpected extra request fails a test asserting ``mismatches == []``.

    OpenAI clients use ``base_url`` (``.../v1``); Anthropic clients use ``root_url`` (they
    add ``/v1`` themselves). ``any_model=True`` accepts every model name (CLIs that call a
    second, smaller model); otherwise only ``model`` is served.
    """

    def __init__(
        self,
        script: Sequence[ScriptEntry],
        *,
        api_key: str = "sk-test-key",
        model: str = "stub/model",
        then: ScriptEntry | None = None,
        any_model: bool = False,
    ) -> None:
        steps = [s if callable(s) else dict(s) for s in script]
        validate_script(steps, then)
        if isinstance(then, Mapping) and then["kind"] == "repeat":
            then = then["step"]
        self.script = steps
        self.then = then
        self.api_key = api_key
        self.model = model
        self.any_model = any_model
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._next = 0
        self._requests: list[ReceivedRequest] = []
        self._served: list[ServedStep] = []
        self._mismatches: list[str] = []
        self._kept_body_bytes = 0
        self._server: ProviderHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # lifecycle

    def __enter__(self) -> ScriptedProvider:
        if self._server is not None:
            raise RuntimeError("ScriptedProvider is already running")
        # Port 0: the kernel picks a free port at bind time, with no window for another taker.
        self._server = ProviderHTTPServer(("127.0.0.1", 0), RequestHandler)
        self._server.provider = self
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.05},
            name=f"{THREAD_PREFIX}-server:{self.port}",
            daemon=True,
        )
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop serving; returns once every handler thread has finished."""
        if self._server is None:
            return
        self._stop.set()  # wakes hangs and delays now
        self._server.shutdown()
        self._server.stop_reading()
        self._server.server_close()  # joins every handler thread (ThreadingMixIn.block_on_close)
        assert self._thread is not None
        self._thread.join(timeout=5)

    # what tests read

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("ScriptedProvider is not running: use it as a context manager")
        return self._server.server_address[1]

    @property
    def root_url(self) -> str:
        """Scheme, host and port: the base URL Anthropic clients want."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def base_url(self) -> str:
        """``root_url`` + ``/v1``: the base URL OpenAI clients want."""
        return f"{self.root_url}/v1"

    @property
    def requests(self) -> list[ReceivedRequest]:
        with self._lock:
            return list(self._requests)

    @property
    def served(self) -> list[ServedStep]:
        with self._lock:
            return list(self._served)

    @property
    def mismatches(self) -> list[str]:
        with self._lock:
            return list(self._mismatches)

    @property
    def remaining(self) -> int:
        """Script steps not yet served (a trailing repeat counts once until reached)."""
        with self._lock:
            return max(len(self.script) - self._next, 0)

    def usage_totals(self) -> tuple[int, int]:
        """(input tokens, output tokens) summed over the complete replies (not the faults)."""
        ok = [s for s in self.served if s.status == 200 and s.spec["kind"] == "reply"]
        return sum(s.prompt_tokens for s in ok), sum(s.completion_tokens for s in ok)

    # deciding the answer (under the lock, so steps go in arrival order)

    def _answer(self, method: str, path: str, headers: dict[str, str], raw: bytes) -> Answer:
        protocol = ENDPOINTS.get(path) if method == "POST" else None
        body: Any = None
        if raw:
            with contextlib.suppress(UnicodeDecodeError, json.JSONDecodeError):
                body = json.loads(raw)
        auth_header = self._matching_key_header(headers, protocol)
        record = ReceivedRequest(
            method=method,
            path=path,
            protocol=protocol,
            headers={
                k: ("REDACTED" if k.lower() in _SECRET_HEADERS else v) for k, v in headers.items()
            },
            authorized=auth_header is not None,
            auth_header=auth_header,
            body=body,
            stream=isinstance(body, dict) and body.get("stream") is True,
            messages=read_messages(protocol, body),
            tools=read_tools(protocol, body),
        )
        answer = self._route(record, raw, _flavor(protocol, headers))
        record.status = answer.status
        self._keep(record, len(raw))
        return answer

    def _matching_key_header(self, headers: dict[str, str], protocol: str | None) -> str | None:
        """Which header carried the right key: OpenAI APIs take only a bearer token."""
        lower = {k.lower(): v for k, v in headers.items()}
        scheme, _, token = lower.get("authorization", "").partition(" ")
        if scheme.lower() == "bearer" and token.strip() == self.api_key:
            return "authorization"
        if protocol in (None, ANTHROPIC_MESSAGES) and lower.get("x-api-key") == self.api_key:
            return "x-api-key"
        return None

    def _keep(self, record: ReceivedRequest, size: int) -> None:
        self._kept_body_bytes += size
        if self._kept_body_bytes > MAX_KEPT_BODY_BYTES:
            record.body, record.messages, record.tools = None, [], []
        self._requests.append(record)

    def _route(self, record: ReceivedRequest, raw: bytes, flavor: str) -> Answer:
        method, path, body = record.method, record.path, record.body
        if not record.authorized:
            message = (
                "invalid x-api-key"
                if flavor == ANTHROPIC_MESSAGES
                else "Incorrect API key provided. Send 'Authorization: Bearer <api key>'."
            )
            return _error(flavor, Problem(401, message, code="invalid_api_key"))
        if method == "GET" and path == "/v1/models":
            return Answer(200, _model_list(self.model))
        if method == "GET" and path.startswith("/v1/models/"):
            name = unquote(path.removeprefix("/v1/models/"))  # clients escape "/" in ids
            if name == self.model:
                return Answer(200, _model_info(self.model))
            return self._model_not_found(flavor, name)
        if method == "POST" and path == "/v1/messages/count_tokens" and isinstance(body, dict):
            return Answer(200, {"input_tokens": max(1, len(raw) // 4)})  # a rough estimate
        if record.protocol is None:
            return _error(flavor, Problem(404, f"Invalid URL ({method} {path})"))
        problem = check_request(record.protocol, body, raw)
        if problem is not None:
            return _error(flavor, problem)
        if body["model"] != self.model and not self.any_model:
            return self._model_not_found(flavor, body["model"])
        return self._play(record, len(self._requests))

    def _model_not_found(self, flavor: str, name: Any) -> Answer:
        message = f"The model {name!r} does not exist (this server serves {self.model!r})."
        return _error(flavor, Problem(404, message, "model", "model_not_found"))

    def _next_step(self, request_no: int) -> tuple[int | None, ScriptEntry]:
        if self._next < len(self.script):
            index, step = self._next, self.script[self._next]
            if isinstance(step, Mapping) and step["kind"] == "repeat":
                return index, step["step"]  # stays put: served for every later request too
            self._next += 1
            return index, step
        if self.then is not None:
            return None, self.then
        self._mismatches.append(
            f"request {request_no}: script exhausted after {len(self.script)} steps"
        )
        return None, error(500, "script exhausted", code="script_exhausted")

    def _resolve(self, entry: ScriptEntry, record: ReceivedRequest, label: str) -> Step:
        """The step to play: ``entry`` itself, or what a callable step returns for ``record``."""
        if not callable(entry):
            return entry
        try:
            step = entry(record)
            validate_step(step, label, allow_callable=False)
            if step["kind"] == "repeat":
                raise ValueError(f"{label}: a callable step cannot return repeat(...)")
        except Exception as exc:  # a broken script must fail the test, not the server
            self._mismatches.append(f"{label}: callable step failed: {exc!r}")
            return error(500, f"callable step failed: {exc}", code="script_error")
        return step

    def _play(self, record: ReceivedRequest, request_no: int) -> Answer:
        index, entry = self._next_step(request_no)
        record.step = index
        label = f"request {request_no} (step {'then' if index is None else index})"
        step = self._resolve(entry, record, label)
        for unmet in unmet_expectations(step.get("expect") or {}, record.messages, record.tools):
            self._mismatches.append(f"{label}: {unmet}")

        protocol = record.protocol or OPENAI_CHAT
        kind = step["kind"]
        input_tokens = output_tokens = 0
        if kind == "reply":
            input_tokens, output_tokens = (int(n) for n in step.get("usage", (0, 0)))
            resolved = resolve_reply(step, protocol, request_no, self._served_model(record))
            answer = (
                Answer(200, events=render_events(protocol, resolved, record.body))
                if record.stream
                else Answer(200, render_json(protocol, resolved, record.body))
            )
            answer.wait = float(step.get("delay", 0.0))
        elif kind in ("stream_error", "cut"):
            answer, (input_tokens, output_tokens) = self._fault(step, protocol, record, request_no)
        elif kind == "error":
            status = int(step["status"])
            problem = Problem(status, step.get("message") or status_phrase(status))
            answer = _error(protocol, problem, step.get("type"), step.get("code"))
            if step.get("retry_after") is not None:
                seconds = step["retry_after"]
                answer.headers["Retry-After"] = str(
                    int(seconds) if seconds == int(seconds) else seconds
                )
        else:  # hang
            message = f"No answer within {step['seconds']} s (scripted hang)."
            answer = _error(protocol, Problem(504, message, code="timeout"))
            answer.wait = float(step["seconds"])
        self._served.append(
            ServedStep(
                request_no, index, step, answer.status, input_tokens, output_tokens, protocol
            )
        )
        return answer

    def _fault(
        self, step: Step, protocol: str, record: ReceivedRequest, request_no: int
    ) -> tuple[Answer, tuple[int, int]]:
        """A reply that fails part-way, and the usage it reported before failing."""
        resolved = resolve_reply(step, protocol, request_no, self._served_model(record))
        if not record.stream:
            if step["kind"] == "cut":
                return Answer(
                    200, render_json(protocol, resolved, record.body), cut=step["framing"]
                ), (0, 0)
            return _error(
                protocol,
                Problem(step["status"], step["message"]),
                step.get("type"),
                step.get("code"),
            ), (0, 0)
        events, usage = partial_events(protocol, resolved, record.body, step["after"])
        if step["kind"] == "cut":
            return Answer(200, events=events, cut=step["framing"]), usage
        events.append(
            error_event(
                protocol,
                resolved,
                record.body,
                len(events),
                step["status"],
                step["message"],
                step.get("type"),
                step.get("code"),
            )
        )
        return Answer(200, events=events), usage

    def _served_model(self, record: ReceivedRequest) -> str:
        asked = record.body.get("model") if isinstance(record.body, dict) else None
        return asked if isinstance(asked, str) and self.any_model else self.model

    # HTTP plumbing (outside the lock)

    def handle(self, handler: RequestHandler, method: str) -> None:
        """Answer one HTTP request (called on the handler's thread)."""
        path = handler.path.split("?", 1)[0]
        headers = dict(handler.headers.items())
        try:
            raw = read_body(handler)
        except BodyTooLarge:
            problem = Problem(413, f"The request body exceeds {MAX_REQUEST_BYTES} bytes.")
            write_answer(handler, _error(_flavor(ENDPOINTS.get(path), headers), problem))
            return
        except (OSError, ValueError):
            handler.close_connection = True
            return  # the client went away or sent a broken body framing: nobody to answer
        with self._lock:
            answer = self._answer(method, path, headers, raw)
        if answer.wait > 0:
            self._stop.wait(answer.wait)
        write_answer(handler, answer)


def _flavor(protocol: str | None, headers: Mapping[str, str]) -> str:
    """Whose error shape to use: the protocol's, or a guess from the headers for other paths."""
    if protocol is not None:
        return protocol
    lower = {k.lower() for k in headers}
    return ANTHROPIC_MESSAGES if {"x-api-key", "anthropic-version"} & lower else OPENAI_CHAT


def _error(
    flavor: str, problem: Problem, error_type: str | None = None, code: str | None = None
) -> Answer:
    payload = error_body(
        flavor, problem.status, problem.message, error_type, code or problem.code, problem.param
    )
    return Answer(problem.status, payload)


def _model_info(model: str) -> dict[str, object]:
    """One model, in a shape both OpenAI's and Anthropic's clients accept."""
    return {
        "id": model,
        "object": "model",
        "created": 0,
        "owned_by": "tmlbench-scripted-provider",
        "type": "model",
        "display_name": model,
        "created_at": "1970-01-01T00:00:00Z",
        "lifecycle": "active",
    }


def _model_list(model: str) -> dict[str, object]:
    return {
        "object": "list",
        "data": [_model_info(model)],
        "has_more": False,
        "first_id": model,
        "last_id": model,
    }
