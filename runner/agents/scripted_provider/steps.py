"""Protocol-neutral script steps, their validation, expectations and conversation files.

A step is a plain JSON-able dict built by ``reply``, ``error``, ``stream_error``, ``cut``,
``hang`` or ``repeat``, so a recorded conversation can live in a JSON file. A script may also hold a callable
``(ReceivedRequest) -> step`` that picks its answer from what the client sent; callables
are for scripts in code only and cannot be saved.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, TypeAlias, TypedDict

from .protocols import Message, ReceivedRequest, Tool, status_phrase

Step: TypeAlias = dict[str, Any]
StepFunction: TypeAlias = Callable[[ReceivedRequest], Step]
ScriptEntry: TypeAlias = Step | StepFunction


class FunctionCall(TypedDict):
    name: str
    arguments: str  # JSON text, or any text (to script bad JSON)


class ScriptedCall(TypedDict):
    """A tool call of a reply step, in chat completions' shape whatever protocol renders it."""

    id: str | None  # None: the server assigns one per response
    type: Literal["function"]
    function: FunctionCall


STEP_KINDS = ("reply", "error", "stream_error", "cut", "hang", "repeat")

#: Kinds that start a reply and fail it part-way: the provider's faults after a 200.
FAULT_KINDS = ("stream_error", "cut")
#: How a ``cut`` reply was framed: read to the close, or chunked without its last chunk.
CUT_FRAMINGS = ("close", "chunked")

#: Checks a step's ``expect`` may hold, all about the request that the step answers.
EXPECT_KEYS = {
    "last_message_role": "role of the last message equals the value (system/user/assistant/tool)",
    "last_message_contains": "text of the last message contains the value",
    "any_message_contains": "text of some message contains the value",
    "messages_at_least": "the request has at least this many messages",
    "messages_at_most": "the request has at most this many messages",
    "message_chars_at_most": "all message texts together have at most this many characters",
    "tools_include": "every named tool is offered in the request's tools",
}


# --- constructors -----------------------------------------------------------------------------


def call(
    name: str, arguments: Mapping[str, Any] | str, *, call_id: str | None = None
) -> ScriptedCall:
    """A tool call; a str ``arguments`` is sent as-is (to script bad JSON).

    Without ``call_id`` the server assigns one per response (``call_<request>_<index>``,
    ``toolu_...`` for Anthropic), so a repeated step still gives every call its own id.
    """
    if not isinstance(arguments, str):
        arguments = json.dumps(dict(arguments))
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def reply(
    content: str | None = None,
    tool_calls: Iterable[Mapping[str, Any]] = (),
    usage: tuple[int, int] = (0, 0),
    finish_reason: str | None = None,
    delay: float = 0.0,
    *,
    expect: Mapping[str, Any] | None = None,
) -> Step:
    """A 200 answer with text and/or tool calls; ``usage`` is (input tokens, output tokens).

    ``finish_reason`` uses chat completions' words (stop, tool_calls, length); the Responses
    API and Anthropic renderings translate them (length -> incomplete / max_tokens).
    """
    calls = [dict(c) for c in tool_calls]
    if finish_reason is None:
        finish_reason = "tool_calls" if calls else "stop"
    prompt_tokens, completion_tokens = usage
    step = {
        "kind": "reply",
        "content": content,
        "tool_calls": calls,
        "usage": [int(prompt_tokens), int(completion_tokens)],
        "finish_reason": finish_reason,
        "delay": float(delay),
    }
    return _with_expect(step, expect)


def error(
    status: int,
    message: str | None = None,
    code: str | None = None,
    retry_after: float | None = None,
    *,
    error_type: str | None = None,
    expect: Mapping[str, Any] | None = None,
) -> Step:
    """An HTTP error in the protocol's shape and, if given, a ``Retry-After`` header.

    Without ``error_type`` each protocol uses its own type for the status
    (OpenAI ``rate_limit_error``/``server_error``..., Anthropic ``overloaded_error``...).
    """
    step = {
        "kind": "error",
        "status": int(status),
        "message": message if message is not None else status_phrase(int(status)),
        "code": code,
        "type": error_type,
        "retry_after": retry_after,
    }
    return _with_expect(step, expect)


def stream_error(
    content: str | None = None,
    tool_calls: Iterable[Mapping[str, Any]] = (),
    usage: tuple[int, int] = (0, 0),
    *,
    after: int = 2,
    status: int = 500,
    message: str | None = None,
    code: str | None = None,
    error_type: str | None = None,
    expect: Mapping[str, Any] | None = None,
) -> Step:
    """A provider failing mid-reply: the reply's first ``after`` deltas, then an error event.

    Streamed, the answer is a 200 whose events start the reply (``content``/``tool_calls``)
    and, after its first ``after`` text or argument deltas (0: just the opening events), say
    the error in the protocol's own way instead of finishing: a chat chunk
    ``{"error": {...}}``, a Responses ``response.failed``, an Anthropic ``error`` event
    (``overloaded_error`` for ``status=529``). The usage reported so far is what the provider
    would have said by then: Anthropic's ``message_start`` carries the input tokens and one
    output token, the OpenAI APIs report none before their terminal event. Not streamed, a
    provider cannot fail after its 200, so the answer is the HTTP error ``status``.
    """
    step = reply(content, tool_calls, usage, expect=expect)
    step.update(
        kind="stream_error",
        after=int(after),
        status=int(status),
        message=message if message is not None else status_phrase(int(status)),
        code=code,
        type=error_type,
    )
    return step


def cut(
    content: str | None = None,
    tool_calls: Iterable[Mapping[str, Any]] = (),
    usage: tuple[int, int] = (0, 0),
    *,
    after: int = 2,
    framing: Literal["close", "chunked"] = "close",
    expect: Mapping[str, Any] | None = None,
) -> Step:
    """A provider dropping the connection mid-reply, before the protocol's terminal event.

    Streamed: a 200 with the reply's opening events and its first ``after`` deltas (as
    ``stream_error``), then the connection closes. Not streamed: a 200 with the first half
    of the JSON document. ``framing="close"``: the body has no length and no chunking, so
    only the missing terminal event (or the broken JSON) tells a client the reply is cut;
    ``"chunked"``: the chunked body stops without its terminating zero-length chunk.
    """
    step = reply(content, tool_calls, usage, expect=expect)
    step.update(kind="cut", after=int(after), framing=framing)
    return step


def hang(seconds: float, *, expect: Mapping[str, Any] | None = None) -> Step:
    """Say nothing for ``seconds``, then answer 504: a call that outlives the caller's budget."""
    return _with_expect({"kind": "hang", "seconds": float(seconds)}, expect)


def repeat(step: ScriptEntry) -> Step:
    """Last element of a script only: answer ``step`` for this and every later request."""
    return {"kind": "repeat", "step": step if callable(step) else dict(step)}


def _with_expect(step: Step, expect: Mapping[str, Any] | None) -> Step:
    if expect is not None:
        step["expect"] = dict(expect)
    return step


# --- validation -------------------------------------------------------------------------------


def validate_step(step: Any, where: str = "step", *, allow_callable: bool = True) -> None:
    """Raise ValueError naming ``where`` if ``step`` is not a step the server can play."""
    if callable(step):
        if not allow_callable:
            raise ValueError(f"{where}: a callable step cannot be stored as JSON: {step!r}")
        return
    if not isinstance(step, Mapping) or step.get("kind") not in STEP_KINDS:
        raise ValueError(f"{where}: not a step (want a dict with kind in {STEP_KINDS}): {step!r}")
    kind = step["kind"]
    if kind == "repeat":
        inner = step.get("step")
        if isinstance(inner, Mapping) and inner.get("kind") == "repeat":
            raise ValueError(f"{where}: repeat(repeat(...)) is meaningless")
        validate_step(inner, f"{where}.step", allow_callable=allow_callable)
        return
    if kind in ("reply", *FAULT_KINDS):
        for i, c in enumerate(step.get("tool_calls") or []):
            fn = c.get("function") if isinstance(c, Mapping) else None
            if not (
                isinstance(fn, Mapping)
                and isinstance(fn.get("name"), str)
                and isinstance(fn.get("arguments"), str)
            ):
                raise ValueError(f"{where}.tool_calls[{i}]: build tool calls with call(): {c!r}")
        content = step.get("content")
        if content is not None and not isinstance(content, str):
            raise ValueError(f"{where}.content: want a string or None, got {content!r}")
        usage = step.get("usage", [0, 0])
        if not (
            isinstance(usage, Sequence)
            and len(usage) == 2
            and all(isinstance(n, int) and n >= 0 for n in usage)
        ):
            raise ValueError(f"{where}.usage: want [input_tokens, output_tokens]: {usage!r}")
    if kind in FAULT_KINDS and not (isinstance(step.get("after"), int) and step["after"] >= 0):
        raise ValueError(f"{where}.after: want a count of deltas >= 0, got {step.get('after')!r}")
    if kind == "cut" and step.get("framing") not in CUT_FRAMINGS:
        raise ValueError(
            f"{where}.framing: want one of {CUT_FRAMINGS}, got {step.get('framing')!r}"
        )
    if kind in ("error", "stream_error") and not 400 <= int(step.get("status", 0)) <= 599:
        raise ValueError(f"{where}.status: want an HTTP error status, got {step.get('status')!r}")
    if kind == "hang" and not isinstance(step.get("seconds"), int | float):
        raise ValueError(f"{where}.seconds: want a number, got {step.get('seconds')!r}")
    unknown = set(step.get("expect") or {}) - set(EXPECT_KEYS)
    if unknown:
        raise ValueError(
            f"{where}.expect: unknown checks {sorted(unknown)}; known: {sorted(EXPECT_KEYS)}"
        )


def validate_script(script: Sequence[ScriptEntry], then: ScriptEntry | None) -> None:
    for i, step in enumerate(script):
        validate_step(step, f"script[{i}]")
        if not callable(step) and step["kind"] == "repeat" and i != len(script) - 1:
            raise ValueError(f"script[{i}]: repeat(...) must be the last step")
    if then is not None:
        validate_step(then, "then")
        last = script[-1] if script else None
        if isinstance(last, Mapping) and last["kind"] == "repeat":
            raise ValueError("give either a trailing repeat(...) or then=, not both")


# --- conversation files -----------------------------------------------------------------------


def load_conversation(path: str | Path) -> list[Step]:
    """The steps stored in a JSON file written by ``save_conversation`` (or by hand)."""
    steps = json.loads(Path(path).read_text(encoding="utf-8"))
    if not isinstance(steps, list):
        raise ValueError(f"{path}: a conversation is a JSON list of steps")
    for i, step in enumerate(steps):
        validate_step(step, f"{path}[{i}]", allow_callable=False)
    return steps


def save_conversation(path: str | Path, steps: Sequence[Step]) -> None:
    """Write ``steps`` as the JSON list ``load_conversation`` reads back."""
    for i, step in enumerate(steps):
        validate_step(step, f"steps[{i}]", allow_callable=False)
    text = json.dumps(list(steps), indent=2, ensure_ascii=False)
    Path(path).write_text(text + "\n", encoding="utf-8")


# --- expectations -----------------------------------------------------------------------------


def unmet_expectations(
    expect: Mapping[str, Any], messages: Sequence[Message], tools: Sequence[Tool]
) -> list[str]:
    """What a request with ``messages`` and ``tools`` fails of ``expect``, one sentence each."""
    last_role = messages[-1].role if messages else None
    texts = [m.text for m in messages]
    last_text = texts[-1] if texts else ""
    offered = {t.name for t in tools}
    problems = []
    for key, want in expect.items():
        if key == "last_message_role" and last_role != want:
            problems.append(f"last message role is {last_role!r}, expected {want!r}")
        elif key == "last_message_contains" and want not in last_text:
            problems.append(f"last message does not contain {want!r} (ends: {last_text[-200:]!r})")
        elif key == "any_message_contains" and not any(want in t for t in texts):
            problems.append(f"no message contains {want!r}")
        elif key == "messages_at_least" and len(messages) < want:
            problems.append(f"{len(messages)} messages, expected at least {want}")
        elif key == "messages_at_most" and len(messages) > want:
            problems.append(f"{len(messages)} messages, expected at most {want}")
        elif key == "message_chars_at_most" and sum(map(len, texts)) > want:
            problems.append(f"{sum(map(len, texts))} message characters, expected at most {want}")
        elif key == "tools_include" and set(want) - offered:
            missing = sorted(set(want) - offered)
            problems.append(f"tools {missing} not offered (got {sorted(offered)})")
    return problems
