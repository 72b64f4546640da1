"""The model's tools: their schemas, checking a model's calls, and the tool host's replies.

A malformed call (unknown tool, arguments that are not a JSON object, a missing or mistyped
argument) is not an error of the attempt: the model is told what was wrong and goes on.
A malformed reply from the sandboxed tool host is a :class:`ProtocolViolation` (see
:class:`ToolHostChannel`): the attempt's own ``runtime_error``.
"""

from __future__ import annotations

import json
import math
import select
import socket
import time
from dataclasses import dataclass
from typing import Literal, Required, TypeAlias, TypedDict


class ArgumentSchema(TypedDict, total=False):
    type: Required[Literal["string", "number"]]
    description: str


class ParametersSchema(TypedDict):
    type: Literal["object"]
    properties: dict[str, ArgumentSchema]
    required: list[str]
    additionalProperties: bool


class FunctionSchema(TypedDict):
    name: str
    description: str
    parameters: ParametersSchema


class ToolSchema(TypedDict):
    """A tool as chat completions' ``tools`` list offers it to the model."""

    type: Literal["function"]
    function: FunctionSchema


def _tool(
    name: str, description: str, properties: dict[str, ArgumentSchema], required: list[str]
) -> ToolSchema:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {
                "type": "object",
                "properties": properties,
                "required": required,
                "additionalProperties": False,
            },
        },
    }


TOOLS: list[ToolSchema] = [
    _tool(
        "run",
        "Run a shell command in the workspace and return its exit code and (truncated) output.",
        {
            "command": {"type": "string", "description": "passed to /bin/sh -c"},
            "timeout_seconds": {
                "type": "number",
                "description": "stop the command after this long (default: the time left)",
            },
        },
        ["command"],
    ),
    _tool(
        "write_file",
        "Create or replace a text file in the workspace.",
        {
            "path": {"type": "string", "description": "relative to the workspace"},
            "content": {"type": "string"},
        },
        ["path", "content"],
    ),
    _tool(
        "read_file",
        "Read the start of a text file in the workspace (size-capped).",
        {"path": {"type": "string", "description": "relative to the workspace"}},
        ["path"],
    ),
    _tool(
        "finish",
        "End the attempt: submission.csv is written and checked.",
        {"summary": {"type": "string", "description": "what you built and its validation score"}},
        [],
    ),
]

_SPECS = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}
_TYPES: dict[str, type | tuple[type, ...]] = {"string": str, "number": (int, float)}


def _finite(value: object) -> bool:
    """A number a float can hold: not NaN or infinite (1e999 parses as inf), not 10**400."""
    try:
        return math.isfinite(float(value))  # type: ignore[arg-type]  # int or float here
    except OverflowError:
        return False


@dataclass(frozen=True)
class ToolCall:
    id: str
    name: str
    arguments: dict[str, str | float]  # checked: each is of the type its tool's schema says


class MalformedCall(Exception):
    """What was wrong with a tool call, phrased for the model."""


def parse_call(raw: object) -> ToolCall:
    """Check one entry of ``message.tool_calls``; MalformedCall says what the model got wrong."""
    function = raw.get("function") if isinstance(raw, dict) else None
    if not isinstance(raw, dict) or not isinstance(function, dict):
        raise MalformedCall("a tool call needs a 'function' with 'name' and 'arguments'")
    name = function.get("name")
    if not isinstance(name, str) or name not in _SPECS:  # a list or object is no tool's name
        raise MalformedCall(f"there is no tool {name!r}; the tools are: {', '.join(_SPECS)}")
    arguments = function.get("arguments") or "{}"
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments, parse_constant=_reject_constant)
        except (ValueError, RecursionError) as exc:  # nested past the parser's depth: not JSON
            raise MalformedCall(
                f"the arguments of {name} are not valid JSON ({exc}); send a JSON object"
            ) from exc
    if not isinstance(arguments, dict):
        raise MalformedCall(f"the arguments of {name} must be a JSON object")
    spec = _SPECS[name]
    missing = [k for k in spec["required"] if k not in arguments]
    if missing:
        raise MalformedCall(f"{name} needs the argument(s) {', '.join(missing)}")
    for key, value in arguments.items():
        if key not in spec["properties"]:
            raise MalformedCall(f"{name} has no argument {key!r}")
        kind = spec["properties"][key]["type"]
        if not isinstance(value, _TYPES[kind]) or isinstance(value, bool):
            raise MalformedCall(f"argument {key!r} of {name} must be a {kind}")
        if kind == "number" and not _finite(value):
            raise MalformedCall(f"argument {key!r} of {name} must be a finite number")
    return ToolCall(id=str(raw.get("id") or ""), name=name, arguments=arguments)


# ---------------------------------------------------------------------------------------------
# the tool host's replies
#
# The tool host runs in the sandbox, which belongs to the agent: a command the model runs can
# kill, stop or replace it, or take over its connection (pidfd_getfd(2) on the tool host, its
# parent). So every reply is hostile data: read within a size cap and a deadline, parsed as
# one JSON object, checked against its request's schema and id. Anything else is a
# ProtocolViolation, which ends the attempt as the agent's ``runtime_error``.
#
# The size cap is what a tool host that keeps the protocol can send at most:
# * run: ``output`` is at most ``max_chars`` bytes of the command's output (its head and tail)
#   decoded with errors="replace" (at most one character per byte), plus a "[... N bytes of
#   output cut ...]" marker; read: ``content`` is at most ``max_bytes`` bytes, decoded alike.
# * json.dumps (ensure_ascii) writes a character as at most 6 bytes ("\u0001"; a character
#   beyond the BMP is 12 bytes, but came from 4 bytes of UTF-8): JSON_ESCAPE_GROWTH.
# * everything else (the other fields, the marker, an error message naming a path of at most
#   PATH_MAX = 4,096 bytes, i.e. 24 KiB escaped) fits in FRAME_SLACK.
# With the defaults (8,000 output characters, 50,000 bytes per read) the cap is 332,768 bytes.


class RunRequest(TypedDict):
    op: Literal["run"]
    command: str
    timeout: float
    max_chars: int


class WriteRequest(TypedDict):
    op: Literal["write"]
    path: str
    content: str


class ReadRequest(TypedDict):
    op: Literal["read"]
    path: str
    max_bytes: int


#: What the harness asks of the tool host (the channel adds the ``id``).
HostRequest: TypeAlias = RunRequest | WriteRequest | ReadRequest
#: A reply as :func:`parse_reply` returns it: every field checked against the op's schema.
HostReply: TypeAlias = dict[str, str | int | float | bool | None]

JSON_ESCAPE_GROWTH = 6
FRAME_SLACK = 32 * 1024
_RECV_BYTES = 64 * 1024

_NUMBER = (int, float)
_FieldSpec = tuple[tuple[type, ...], bool]  # accepted types, required
REPLY_SCHEMAS: dict[str, dict[str, _FieldSpec]] = {
    "run": {
        "exit_code": ((int, type(None)), True),
        "timed_out": ((bool,), True),
        "output": ((str,), True),
        "output_bytes": ((int,), False),
        "seconds": (_NUMBER, True),
    },
    "write": {"bytes": ((int,), True)},
    "read": {"content": ((str,), True), "truncated": ((bool,), True)},
}
ERROR_SCHEMA: dict[str, _FieldSpec] = {"error": ((str,), True)}
_TYPE_NAMES = {int: "an integer", float: "a number", str: "a string", bool: "true or false"}


def frame_cap(max_chars: int, max_bytes: int) -> int:
    """Longest reply line (bytes, without its newline) of a tool host keeping the protocol."""
    return JSON_ESCAPE_GROWTH * max(max_chars, max_bytes) + FRAME_SLACK


class ToolHostGone(Exception):
    """The sandboxed tool host is no longer there (the budget ended, or it crashed)."""


class ProtocolViolation(Exception):
    """The sandboxed side broke the tool-host protocol: the agent's fault, never the harness's."""


def _preview(data: bytes, limit: int = 80) -> str:
    shown = repr(data[:limit])
    return shown + (f" … ({len(data):,} bytes)" if len(data) > limit else "")


def _json_preview(value: object, limit: int = 40) -> str:
    text = json.dumps(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _reject_constant(name: str) -> float:
    raise ValueError(f"{name} is not JSON")


def _type_ok(value: object, types: tuple[type, ...]) -> bool:
    if isinstance(value, bool):  # a bool is an int to Python, never to this protocol
        return bool in types
    if isinstance(value, float) and not math.isfinite(value):  # 1e999 parses as inf
        return False
    return isinstance(value, types)


def parse_reply(frame: bytes, op: str, request_id: int) -> HostReply:
    """The tool host's reply to request ``request_id`` (an ``op``), checked; else a violation."""
    what = f"its reply to {op} request {request_id}"
    try:
        reply = json.loads(frame.decode("utf-8"), parse_constant=_reject_constant)
    except UnicodeDecodeError as exc:
        raise ProtocolViolation(f"{what} is not UTF-8 ({exc.reason}): {_preview(frame)}") from None
    except (ValueError, RecursionError) as exc:
        raise ProtocolViolation(f"{what} is not JSON ({exc}): {_preview(frame)}") from None
    if not isinstance(reply, dict):
        raise ProtocolViolation(f"{what} is a JSON {type(reply).__name__}, not an object")
    got = reply.pop("id", None)
    if type(got) is not int or got != request_id:
        if got is None:
            raise ProtocolViolation(f"{what} has no 'id': {_preview(frame)}")
        raise ProtocolViolation(
            f"a reply to request {_json_preview(got)} came while request "
            f"{request_id} ({op}) was waiting: a reply to nothing"
        )
    schema = ERROR_SCHEMA if "error" in reply else REPLY_SCHEMAS[op]
    unexpected = sorted(set(reply) - set(schema))
    if unexpected:
        names = ", ".join(repr(k[:40]) for k in unexpected[:5])
        raise ProtocolViolation(f"{what} has unexpected field(s) {names}")
    for key, (types, required) in schema.items():
        if key not in reply:
            if required:
                raise ProtocolViolation(f"{what} lacks the field {key!r}")
            continue
        if not _type_ok(reply[key], types):
            expected = " or ".join(
                "null" if t is type(None) else _TYPE_NAMES.get(t, t.__name__) for t in types
            )
            raise ProtocolViolation(
                f"{what} has {key!r} = {_json_preview(reply[key])}, not {expected}"
            )
    for key in ("seconds", "bytes", "output_bytes"):
        if key in reply and reply[key] < 0:
            raise ProtocolViolation(f"{what} has a negative {key!r}")
    return reply


class ToolHostChannel:
    """The harness's end of the connection to the tool host: one request, one checked reply.

    A reply is read into a buffer never larger than ``cap`` + 1 bytes (a line and its
    newline), within the request's deadline; bytes that arrive unasked, a second reply, or
    anything :func:`parse_reply` refuses is a :class:`ProtocolViolation`, after which the
    channel is broken: it sends nothing more. A closed connection or a missed deadline is
    :class:`ToolHostGone`.
    """

    def __init__(self, sock: socket.socket, cap: int):
        self.sock = sock
        self.cap = cap
        self.broken: str | None = None
        self._buf = bytearray()
        self._last_id = 0

    def request(self, request: HostRequest, timeout: float) -> HostReply:
        if self.broken is not None:
            raise ProtocolViolation(self.broken)
        try:
            return self._exchange(request, timeout)
        except ProtocolViolation as exc:
            self.broken = str(exc)
            raise

    def _exchange(self, request: HostRequest, timeout: float) -> HostReply:
        deadline = time.monotonic() + timeout
        self._check_quiet()
        self._last_id += 1
        line = json.dumps({"id": self._last_id, **request}).encode("utf-8") + b"\n"
        try:
            self.sock.settimeout(max(0.01, timeout))
            self.sock.sendall(line)
            frame = self._read_frame(deadline)
        except TimeoutError:
            raise ToolHostGone(f"no reply from the tool host within {timeout:.0f} s") from None
        except OSError as exc:
            raise ToolHostGone(f"lost the tool host: {exc}") from exc
        reply = parse_reply(frame, request["op"], self._last_id)  # garbage is named as such
        if self._buf:
            raise ProtocolViolation(
                f"the tool host sent more than one reply to {request['op']} request "
                f"{self._last_id}: {_preview(bytes(self._buf))}"
            )
        return reply

    def _check_quiet(self) -> None:
        """Between a reply and the next request the tool host says nothing."""
        extra = bytes(self._buf)
        if not extra:
            poller = select.poll()  # not select(): a busy harness has descriptors past 1024
            try:
                poller.register(self.sock, select.POLLIN)
                extra = self.sock.recv(256, socket.MSG_PEEK) if poller.poll(0) else b""
            except (OSError, ValueError):
                return  # a closed or broken socket: the request itself reports it
        if extra:  # b"" is the end of the connection, reported by the request
            raise ProtocolViolation(f"the tool host sent bytes nobody asked for: {_preview(extra)}")

    def _read_frame(self, deadline: float) -> bytes:
        scanned = 0
        while True:
            end = self._buf.find(b"\n", scanned)
            if end >= 0:
                frame = bytes(self._buf[:end])
                del self._buf[: end + 1]
                return frame
            scanned = len(self._buf)
            room = self.cap + 1 - len(self._buf)
            if room <= 0:
                raise ProtocolViolation(
                    f"the tool host sent a reply longer than the {self.cap:,}-byte cap "
                    f"(the largest reply a tool host keeping the protocol can send); "
                    f"it starts {_preview(bytes(self._buf[:80]))}"
                )
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("no complete reply in time")
            self.sock.settimeout(left)
            chunk = self.sock.recv(min(_RECV_BYTES, room))
            if not chunk:
                cut = f" in the middle of a reply ({len(self._buf):,} bytes)" if self._buf else ""
                raise ToolHostGone(f"the tool host closed the connection{cut}")
            self._buf += chunk
