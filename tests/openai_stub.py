"""A scripted OpenAI-compatible chat-completions server on loopback, for testing LLM agents offline.

A script is a list of steps: plain JSON-able dicts built by ``reply``, ``error``, ``hang`` and
``repeat``, so a recorded conversation can live in a JSON file (``load_conversation``).
Each valid ``POST /v1/chat/completions`` consumes the next step, in arrival order. Requests
rejected before the script (bad key, bad body, wrong model, ``stream: true``) consume nothing.
After the script runs out the provider answers ``then`` forever; the default is a 500
"script exhausted" that is also recorded in ``mismatches``, so an unexpected extra request
fails a test that asserts ``provider.mismatches == []``.

    with ScriptedProvider([reply(tool_calls=[call("run", {"command": "ls"})]), reply("done")]) as p:
        run_agent(base_url=p.base_url, api_key=p.api_key, model=p.model)
    assert p.mismatches == []
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

Step = dict[str, Any]

STEP_KINDS = ("reply", "error", "hang", "repeat")

#: Checks a step's ``expect`` may hold, all about the request that the step answers.
EXPECT_KEYS = {
    "last_message_role": "role of the last message equals the value",
    "last_message_contains": "text of the last message contains the value",
    "any_message_contains": "text of some message contains the value",
    "messages_at_least": "the request has at least this many messages",
    "messages_at_most": "the request has at most this many messages",
    "message_chars_at_most": "all message contents together have at most this many characters",
    "tools_include": "every named function is offered in the request's tools",
}

# Shutdown interrupts hangs and delays at once; this only bounds a silent client.
_SOCKET_TIMEOUT = 1.0


# --- step constructors --------------------------------------------------------------------


def call(name: str, arguments: Mapping[str, Any] | str, *, call_id: str | None = None) -> dict:
    """A tool call in OpenAI's format; a str ``arguments`` is sent as-is (to script bad JSON).

    Without ``call_id`` the server assigns ``call_<request>_<index>``, unique per response,
    so a repeated step still gives every call its own id.
    """
    if not isinstance(arguments, str):
        arguments = json.dumps(dict(arguments))
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": arguments},
    }


def reply(
    content: str | None = None,
    tool_calls: Iterable[Mapping[str, Any]] = (),
    usage: tuple[int, int] = (0, 0),
    finish_reason: str | None = None,
    delay: float = 0.0,
    *,
    expect: Mapping[str, Any] | None = None,
) -> Step:
    """A 200 ``chat.completion``; ``usage`` is (prompt_tokens, completion_tokens)."""
    calls = [dict(c) for c in tool_calls]
    if finish_reason is None:
        finish_reason = "tool_calls" if calls else "stop"
    prompt_tokens, completion_tokens = usage
    return _with_expect(
        {
            "kind": "reply",
            "content": content,
            "tool_calls": calls,
            "usage": [int(prompt_tokens), int(completion_tokens)],
            "finish_reason": finish_reason,
            "delay": float(delay),
        },
        expect,
    )


def error(
    status: int,
    message: str | None = None,
    code: str | None = None,
    retry_after: float | None = None,
    *,
    error_type: str | None = None,
    expect: Mapping[str, Any] | None = None,
) -> Step:
    """An HTTP error with an OpenAI-style body and, if given, a ``Retry-After`` header."""
    return _with_expect(
        {
            "kind": "error",
            "status": int(status),
            "message": message if message is not None else HTTPStatus(status).phrase,
            "code": code,
            "type": error_type if error_type is not None else _default_error_type(status),
            "retry_after": retry_after,
        },
        expect,
    )


def hang(seconds: float, *, expect: Mapping[str, Any] | None = None) -> Step:
    """Say nothing for ``seconds``, then answer 504: a call that outlives the caller's budget."""
    return _with_expect({"kind": "hang", "seconds": float(seconds)}, expect)


def repeat(step: Step) -> Step:
    """Last element of a script only: answer ``step`` for this and every later request."""
    return {"kind": "repeat", "step": dict(step)}


def _with_expect(step: Step, expect: Mapping[str, Any] | None) -> Step:
    if expect is not None:
        step["expect"] = dict(expect)
    return step


def _default_error_type(status: int) -> str:
    if status == 429:
        return "rate_limit_error"
    if status == 402:
        return "insufficient_quota"
    return "server_error" if status >= 500 else "invalid_request_error"


def validate_step(step: Any, where: str = "step") -> None:
    """Raise ValueError naming ``where`` if ``step`` is not a step the server can play."""
    if not isinstance(step, Mapping) or step.get("kind") not in STEP_KINDS:
        raise ValueError(f"{where}: not a step (want a dict with kind in {STEP_KINDS}): {step!r}")
    kind = step["kind"]
    if kind == "repeat":
        inner = step.get("step")
        if isinstance(inner, Mapping) and inner.get("kind") == "repeat":
            raise ValueError(f"{where}: repeat(repeat(...)) is meaningless")
        validate_step(inner, f"{where}.step")
        return
    if kind == "reply":
        calls = step.get("tool_calls") or []
        for i, c in enumerate(calls):
            fn = c.get("function") if isinstance(c, Mapping) else None
            if not (
                isinstance(fn, Mapping)
                and isinstance(fn.get("name"), str)
                and isinstance(fn.get("arguments"), str)
            ):
                raise ValueError(f"{where}.tool_calls[{i}]: build tool calls with call(): {c!r}")
        usage = step.get("usage", [0, 0])
        if not (isinstance(usage, Sequence) and len(usage) == 2):
            raise ValueError(f"{where}.usage: want [prompt_tokens, completion_tokens]: {usage!r}")
    if kind == "error" and not 400 <= int(step.get("status", 0)) <= 599:
        raise ValueError(f"{where}.status: want an HTTP error status, got {step.get('status')!r}")
    if kind == "hang" and not isinstance(step.get("seconds"), int | float):
        raise ValueError(f"{where}.seconds: want a number, got {step.get('seconds')!r}")
    unknown = set(step.get("expect") or {}) - set(EXPECT_KEYS)
    if unknown:
        raise ValueError(
            f"{where}.expect: unknown checks {sorted(unknown)}; known: {sorted(EXPECT_KEYS)}"
        )


# --- conversation files -------------------------------------------------------------------


def load_conversation(path: str | Path) -> list[Step]:
    """The steps stored in a JSON file written by ``save_conversation`` (or by hand)."""
    steps = json.loads(Path(path).read_text(encoding="utf-8"))
    if not isinstance(steps, list):
        raise ValueError(f"{path}: a conversation is a JSON list of steps")
    for i, step in enumerate(steps):
        validate_step(step, f"{path}[{i}]")
    return steps


def save_conversation(path: str | Path, steps: Sequence[Step]) -> None:
    for i, step in enumerate(steps):
        validate_step(step, f"steps[{i}]")
    text = json.dumps(list(steps), indent=2, ensure_ascii=False)
    Path(path).write_text(text + "\n", encoding="utf-8")


# --- records ------------------------------------------------------------------------------


@dataclass
class ReceivedRequest:
    """One HTTP request as the server saw it; the API key itself is never kept."""

    method: str
    path: str
    headers: dict[str, str]  # Authorization replaced by "REDACTED"
    authorized: bool
    body: Any  # parsed JSON; None when absent or not JSON
    status: int
    step: int | None  # script index served; None if rejected early or answered by `then`
    message_count: int
    message_chars: int  # characters of all message contents (text parts of lists included)


@dataclass(frozen=True)
class ServedStep:
    request: int  # index into ``ScriptedProvider.requests``
    step: int | None  # script index; None for the `then` fallback
    spec: Step
    status: int
    prompt_tokens: int
    completion_tokens: int


def message_text(message: Any) -> str:
    """The text of a chat message: a string content, or the text parts of a list content."""
    content = message.get("content") if isinstance(message, Mapping) else None
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            p.get("text", "") for p in content if isinstance(p, Mapping) and p.get("type") == "text"
        )
    return ""


def unmet_expectations(expect: Mapping[str, Any], body: Mapping[str, Any]) -> list[str]:
    """What ``body`` fails of ``expect``, one sentence per failed check."""
    messages = body.get("messages") or []
    last = messages[-1] if messages else {}
    last_role = last.get("role") if isinstance(last, Mapping) else None
    texts = [message_text(m) for m in messages]
    offered = {
        t.get("function", {}).get("name") for t in body.get("tools") or [] if isinstance(t, Mapping)
    }
    problems = []
    for key, want in expect.items():
        if key == "last_message_role" and last_role != want:
            problems.append(f"last message role is {last_role!r}, expected {want!r}")
        elif key == "last_message_contains" and want not in (texts[-1] if texts else ""):
            tail = (texts[-1] if texts else "")[-200:]
            problems.append(f"last message does not contain {want!r} (ends: {tail!r})")
        elif key == "any_message_contains" and not any(want in t for t in texts):
            problems.append(f"no message contains {want!r}")
        elif key == "messages_at_least" and len(messages) < want:
            problems.append(f"{len(messages)} messages, expected at least {want}")
        elif key == "messages_at_most" and len(messages) > want:
            problems.append(f"{len(messages)} messages, expected at most {want}")
        elif key == "message_chars_at_most" and sum(map(len, texts)) > want:
            problems.append(f"{sum(map(len, texts))} message characters, expected at most {want}")
        elif key == "tools_include" and set(want) - offered:
            problems.append(
                f"tools {sorted(set(want) - offered)} not offered (got {sorted(offered)})"
            )
    return problems


# --- the server ---------------------------------------------------------------------------


@dataclass
class _Answer:
    status: int
    payload: Any
    headers: dict[str, str]
    wait: float = 0.0  # seconds to stay silent first, cut short by shutdown


def _error_body(message: str, error_type: str, code: str | None, param: str | None = None) -> dict:
    return {"error": {"message": message, "type": error_type, "param": param, "code": code}}


class ScriptedProvider:
    """Context manager: a threaded HTTP server on 127.0.0.1 playing ``script``."""

    def __init__(
        self,
        script: Sequence[Step],
        *,
        api_key: str = "sk-test-key",
        model: str = "stub/model",
        then: Step | None = None,
    ) -> None:
        steps = [dict(s) for s in script]
        for i, step in enumerate(steps):
            validate_step(step, f"script[{i}]")
            if step["kind"] == "repeat" and i != len(steps) - 1:
                raise ValueError(f"script[{i}]: repeat(...) must be the last step")
        if steps and steps[-1]["kind"] == "repeat" and then is not None:
            raise ValueError("give either a trailing repeat(...) or then=, not both")
        if then is not None:
            validate_step(then, "then")
            if then["kind"] == "repeat":
                then = then["step"]
        self.script = steps
        self.then = then
        self.api_key = api_key
        self.model = model
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._next = 0
        self._requests: list[ReceivedRequest] = []
        self._served: list[ServedStep] = []
        self._mismatches: list[str] = []
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    # lifecycle

    def __enter__(self) -> ScriptedProvider:
        if self._server is not None:
            raise RuntimeError("ScriptedProvider is already running")
        # Port 0: the kernel picks a free port at bind time, with no window for another taker.
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.provider = self
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.05},
            name=f"openai-stub-server:{self.port}",
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
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

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
        """(prompt_tokens, completion_tokens) summed over the 200 responses."""
        ok = [s for s in self.served if s.status == 200]
        return sum(s.prompt_tokens for s in ok), sum(s.completion_tokens for s in ok)

    # serving

    def _answer(self, method: str, path: str, headers: dict[str, str], raw: bytes) -> _Answer:
        """Decide the answer and record the request; runs under the lock, so steps go in arrival order."""
        auth = next((v for k, v in headers.items() if k.lower() == "authorization"), None)
        scheme, _, token = (auth or "").partition(" ")
        authorized = scheme.lower() == "bearer" and token.strip() == self.api_key
        safe_headers = {
            k: ("REDACTED" if k.lower() == "authorization" else v) for k, v in headers.items()
        }
        body: Any = None
        if raw:
            try:
                body = json.loads(raw)
            except (UnicodeDecodeError, json.JSONDecodeError):
                body = None
        messages = body.get("messages") if isinstance(body, dict) else None
        messages = messages if isinstance(messages, list) else []
        record = ReceivedRequest(
            method=method,
            path=path,
            headers=safe_headers,
            authorized=authorized,
            body=body,
            status=0,
            step=None,
            message_count=len(messages),
            message_chars=sum(len(message_text(m)) for m in messages),
        )
        answer = self._route(record, raw)
        record.status = answer.status
        self._requests.append(record)
        return answer

    def _route(self, record: ReceivedRequest, raw: bytes) -> _Answer:
        method, path, body = record.method, record.path, record.body
        if not record.authorized:
            return _Answer(
                401,
                _error_body(
                    "Incorrect API key provided. Send 'Authorization: Bearer <api key>'.",
                    "invalid_request_error",
                    "invalid_api_key",
                ),
                {},
            )
        if method == "GET" and path in ("/v1/models", f"/v1/models/{self.model}"):
            model = {"id": self.model, "object": "model", "created": 0, "owned_by": "tmlbench-stub"}
            if path == "/v1/models":
                return _Answer(200, {"object": "list", "data": [model]}, {})
            return _Answer(200, model, {})
        if method == "GET" and path.startswith("/v1/models/"):
            name = path.removeprefix("/v1/models/")
            return self._model_not_found(name)
        if not (method == "POST" and path == "/v1/chat/completions"):
            return _Answer(
                404,
                _error_body(f"Invalid URL ({method} {path})", "invalid_request_error", None),
                {},
            )
        if not isinstance(body, dict):
            what = "empty" if not raw else "not a JSON object"
            return self._bad_request(f"The request body is {what}; send a JSON object.", None)
        for name in ("model", "messages"):
            if name not in body:
                return self._bad_request(
                    f"Missing required parameter: '{name}'.", name, "missing_required_parameter"
                )
        if not isinstance(body["messages"], list) or not body["messages"]:
            return self._bad_request("'messages' must be a non-empty array.", "messages")
        if body.get("stream") is True:
            return self._bad_request(
                "This scripted server does not stream: send 'stream': false.",
                "stream",
                "unsupported_value",
            )
        if body["model"] != self.model:
            return self._model_not_found(body["model"])
        return self._play(record, len(self._requests))

    def _bad_request(self, message: str, param: str | None, code: str | None = None) -> _Answer:
        return _Answer(400, _error_body(message, "invalid_request_error", code, param), {})

    def _model_not_found(self, name: Any) -> _Answer:
        return _Answer(
            404,
            _error_body(
                f"The model {name!r} does not exist (this server serves {self.model!r}).",
                "invalid_request_error",
                "model_not_found",
                "model",
            ),
            {},
        )

    def _next_step(self, request_no: int) -> tuple[int | None, Step]:
        if self._next < len(self.script):
            index, step = self._next, self.script[self._next]
            if step["kind"] == "repeat":
                return index, step["step"]  # stays put: served for every later request too
            self._next += 1
            return index, step
        if self.then is not None:
            return None, self.then
        self._mismatches.append(
            f"request {request_no}: script exhausted after {len(self.script)} steps"
        )
        return None, error(500, "script exhausted", code="script_exhausted")

    def _play(self, record: ReceivedRequest, request_no: int) -> _Answer:
        index, step = self._next_step(request_no)
        record.step = index
        label = f"request {request_no} (step {'then' if index is None else index})"
        for problem in unmet_expectations(step.get("expect") or {}, record.body):
            self._mismatches.append(f"{label}: {problem}")

        kind = step["kind"]
        prompt_tokens = completion_tokens = 0
        if kind == "reply":
            prompt_tokens, completion_tokens = (int(n) for n in step.get("usage", (0, 0)))
            answer = _Answer(
                200,
                self._completion(step, request_no, prompt_tokens, completion_tokens),
                {},
                wait=float(step.get("delay", 0.0)),
            )
        elif kind == "error":
            status = int(step["status"])
            headers = {}
            if step.get("retry_after") is not None:
                seconds = step["retry_after"]
                headers["Retry-After"] = str(int(seconds) if seconds == int(seconds) else seconds)
            answer = _Answer(
                status,
                _error_body(
                    step.get("message") or HTTPStatus(status).phrase,
                    step.get("type") or _default_error_type(status),
                    step.get("code"),
                ),
                headers,
            )
        else:  # hang
            answer = _Answer(
                504,
                _error_body(
                    f"No answer within {step['seconds']} s (scripted hang).",
                    "server_error",
                    "timeout",
                ),
                {},
                wait=float(step["seconds"]),
            )
        self._served.append(
            ServedStep(request_no, index, step, answer.status, prompt_tokens, completion_tokens)
        )
        return answer

    def _completion(
        self, step: Step, request_no: int, prompt_tokens: int, completion_tokens: int
    ) -> dict:
        message: dict[str, Any] = {
            "role": "assistant",
            "content": step.get("content"),
            "refusal": None,
        }
        calls = step.get("tool_calls") or []
        if calls:
            message["tool_calls"] = [
                {
                    "id": c.get("id") or f"call_{request_no:04d}_{i}",
                    "type": "function",
                    "function": {
                        "name": c["function"]["name"],
                        "arguments": c["function"]["arguments"],
                    },
                }
                for i, c in enumerate(calls)
            ]
        finish_reason = step.get("finish_reason") or ("tool_calls" if calls else "stop")
        return {
            "id": f"chatcmpl-stub-{request_no:04d}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": self.model,
            "choices": [
                {"index": 0, "message": message, "logprobs": None, "finish_reason": finish_reason}
            ],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
            },
        }

    def _handle(self, handler: _Handler, method: str) -> None:
        length = int(handler.headers.get("Content-Length") or 0)
        raw = handler.rfile.read(length) if length > 0 else b""
        path = handler.path.split("?", 1)[0]
        with self._lock:
            answer = self._answer(method, path, dict(handler.headers.items()), raw)
        if answer.wait > 0:
            self._stop.wait(answer.wait)
        data = json.dumps(answer.payload).encode()
        try:
            handler.send_response(answer.status)
            handler.send_header("Content-Type", "application/json")
            handler.send_header("Content-Length", str(len(data)))
            for name, value in answer.headers.items():
                handler.send_header(name, value)
            handler.end_headers()
            handler.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the caller gave up (e.g. its timeout fired during a hang): nothing to tell


class _Server(ThreadingHTTPServer):
    """Non-daemon handlers, so ``server_close()`` joins them all (it skips daemon threads)."""

    daemon_threads = False
    provider: ScriptedProvider

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._open: set[socket.socket] = set()
        self._open_lock = threading.Lock()

    def process_request(self, request: Any, client_address: Any) -> None:
        with self._open_lock:
            self._open.add(request)
        super().process_request(request, client_address)

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        # A recognisable name lets tests check that no handler outlives the provider.
        threading.current_thread().name = f"openai-stub-handler:{self.server_address[1]}"
        super().process_request_thread(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        with self._open_lock:
            self._open.discard(request)
        super().shutdown_request(request)

    def stop_reading(self) -> None:
        """Wake handlers blocked reading from a silent client; answers being written still go out."""
        with self._open_lock:
            for sock in self._open:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RD)


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    timeout = _SOCKET_TIMEOUT  # HTTP/1.0, one request per connection: nothing idles open

    def do_GET(self) -> None:
        self.server.provider._handle(self, "GET")

    def do_POST(self) -> None:
        self.server.provider._handle(self, "POST")

    def log_message(self, format: str, *args: Any) -> None:
        pass  # requests are recorded in ScriptedProvider.requests, not printed
