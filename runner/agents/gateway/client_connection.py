"""The sandbox's side of the gateway: reading and checking one client connection's requests.

Every byte read here comes from the sandbox and is hostile: sizes, times and shapes are
bounded, and anything the gateway will not forward raises :class:`BadRequest` with the
status to answer. The answers the gateway gives itself (errors, "busy") are written here too.
"""

from __future__ import annotations

import contextlib
import json
import re
import socket
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from http import HTTPStatus

from runner.agents.gateway.model_requests import Protocol
from runner.agents.gateway.routes import Allowed

BUFSIZE = 64 * 1024
MAX_HEADER_BYTES = 64 * 1024
MAX_HEADERS = 100
BODY_TIMEOUT = 120.0  # the whole request body
WRITE_TIMEOUT = 60.0  # the client not reading what we send
LINGER_SECONDS = 1.0

TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
BAD_VALUE = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")


class BadRequest(Exception):
    """The client sent something the gateway does not forward; ``status`` is the answer."""

    def __init__(self, status: int, reason: str):
        super().__init__(reason)
        self.status = status


@dataclass
class ClientRequest:
    method: str
    target: str  # path (+ "?" + query), as sent
    path: str  # the canonical path if the request is allowed; else the target as sent
    version: str
    headers: list[tuple[str, str]]
    body: bytes
    keep_alive: bool
    allowed: Allowed | None  # its route; None: forbidden (answered 403, never forwarded)


class ClientConnection:
    """Buffered, deadline-bounded reads of requests from one client connection.

    ``reserve(n)`` is called before a body's bytes are buffered (BadRequest if the gateway
    holds too much already); ``reserved`` is what this client's current request holds.
    """

    def __init__(self, sock: socket.socket, reserve: Callable[[int], None] = lambda n: None):
        self.sock = sock
        self.buf = bytearray()
        self._reserve = reserve
        self.reserved = 0

    def reserve(self, size: int) -> None:
        self._reserve(size)
        self.reserved += size

    def _fill(self, deadline: float) -> bool:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("client too slow")
        self.sock.settimeout(left)
        data = self.sock.recv(BUFSIZE)
        if not data:
            return False
        self.buf += data
        return True

    def read_head(self, idle_timeout: float, header_timeout: float) -> bytes | None:
        """The next request header (without its blank line); None if the client left."""
        deadline = time.monotonic() + idle_timeout
        while True:
            while self.buf.startswith(b"\r\n"):  # tolerated between requests (RFC 9112 2.2)
                del self.buf[:2]
            if self.buf:
                break
            if not self._fill(deadline):
                return None
        deadline = time.monotonic() + header_timeout
        while True:
            end = self.buf.find(b"\r\n\r\n")
            if end > MAX_HEADER_BYTES or (end < 0 and len(self.buf) > MAX_HEADER_BYTES):
                raise BadRequest(431, f"request header larger than {MAX_HEADER_BYTES} bytes")
            if end >= 0:
                head = bytes(self.buf[:end])
                del self.buf[: end + 4]
                return head
            if not self._fill(deadline):
                raise ConnectionError("the client left in the middle of a request header")

    def read_exact(self, size: int, deadline: float) -> bytes:
        while len(self.buf) < size:
            if not self._fill(deadline):
                raise ConnectionError("the client left in the middle of a request body")
        with memoryview(self.buf) as view:  # one copy, not two (a slice would be another)
            data = bytes(view[:size])
        del self.buf[:size]
        return data

    def _read_line(self, deadline: float, limit: int) -> bytes:
        while True:
            end = self.buf.find(b"\r\n")
            if end >= 0:
                line = bytes(self.buf[:end])
                del self.buf[: end + 2]
                return line
            if len(self.buf) > limit:
                raise BadRequest(400, "malformed chunked request body")
            if not self._fill(deadline):
                raise ConnectionError("the client left in the middle of a request body")

    def read_chunked(self, limit: int, deadline: float) -> bytes:
        body = bytearray()
        while True:
            size_text = self._read_line(deadline, 1024).split(b";", 1)[0].strip()
            if (
                not size_text
                or len(size_text) > 16
                or not all(c in b"0123456789abcdefABCDEF" for c in size_text)
            ):
                raise BadRequest(400, "malformed chunk size in the request body")
            size = int(size_text, 16)
            if size == 0:
                trailer = 0
                while line := self._read_line(deadline, MAX_HEADER_BYTES):
                    trailer += len(line)
                    if trailer > MAX_HEADER_BYTES:
                        raise BadRequest(431, "request trailer too large")
                return bytes(body)
            if len(body) + size > limit:
                raise BadRequest(413, f"request body larger than {limit} bytes")
            self.reserve(size + 2)
            chunk = self.read_exact(size + 2, deadline)
            if not chunk.endswith(b"\r\n"):
                raise BadRequest(400, "malformed chunk in the request body")
            body += chunk[:-2]


def parse_head(head: bytes) -> tuple[str, str, str, list[tuple[str, str]]]:
    try:
        text = head.decode("latin-1")
    except UnicodeDecodeError:  # pragma: no cover - latin-1 decodes every byte
        raise BadRequest(400, "undecodable request header") from None
    lines = text.split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != 3 or not TOKEN.fullmatch(parts[0]):
        raise BadRequest(400, "malformed request line")
    method, target, version = parts
    if version not in ("HTTP/1.0", "HTTP/1.1"):
        raise BadRequest(400, "only HTTP/1.0 and HTTP/1.1 are spoken here")
    if len(lines) - 1 > MAX_HEADERS:
        raise BadRequest(431, f"more than {MAX_HEADERS} header fields")
    headers = []
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if not sep or not TOKEN.fullmatch(name):
            raise BadRequest(400, "malformed header field")
        value = value.strip(" \t")
        if BAD_VALUE.search(value):
            raise BadRequest(400, "control character in a header value")
        headers.append((name, value))
    return method, target, version, headers


def header_values(headers: list[tuple[str, str]], name: str) -> list[str]:
    return [v for n, v in headers if n.lower() == name]


def read_request(
    client: ClientConnection,
    *,
    router: Callable[[str, str], Allowed | None],
    max_body_bytes: int,
    idle_timeout: float,
    header_timeout: float,
) -> ClientRequest | None:
    """The client's next request, body included, and its route (``router(method, target)``;
    None: forbidden). The body of a forbidden request is read too, so that the connection
    can go on after the gateway's 403.

    None if the client left between requests; BadRequest (with the status to answer) if the
    request is malformed or too large.
    """
    head = client.read_head(idle_timeout, header_timeout)
    if head is None:
        return None
    method, target, version, headers = parse_head(head)
    allowed = router(method, target)
    connection = {
        t.strip().lower() for v in header_values(headers, "connection") for t in v.split(",")
    }
    keep_alive = version == "HTTP/1.1" and "close" not in connection
    encodings = header_values(headers, "transfer-encoding")
    lengths = header_values(headers, "content-length")
    deadline = time.monotonic() + BODY_TIMEOUT
    chunked = False
    length = 0
    if encodings:
        if lengths:
            raise BadRequest(400, "both Transfer-Encoding and Content-Length")
        if version != "HTTP/1.1" or ",".join(encodings).strip().lower() != "chunked":
            raise BadRequest(400, "only 'Transfer-Encoding: chunked' is accepted")
        chunked = True
    elif lengths:
        values = {v.strip() for v in ",".join(lengths).split(",")}
        text = values.pop() if len(values) == 1 else ""
        if not text.isascii() or not text.isdigit() or len(text) > 15:
            raise BadRequest(400, "invalid Content-Length")
        length = int(text)
        if length > max_body_bytes:
            raise BadRequest(413, f"request body larger than {max_body_bytes} bytes")
        client.reserve(length)
    expect = ",".join(header_values(headers, "expect")).lower()
    if "100-continue" in expect and (chunked or length):
        client.sock.settimeout(WRITE_TIMEOUT)
        client.sock.sendall(b"HTTP/1.1 100 Continue\r\n\r\n")
    if chunked:
        body = client.read_chunked(max_body_bytes, deadline)
    else:
        body = client.read_exact(length, deadline) if length else b""
    path = allowed.path if allowed is not None else target
    return ClientRequest(method, target, path, version, headers, body, keep_alive, allowed)


def reason_phrase(status: int, given: str) -> str:
    given = (given or "").strip()
    if given and given.isascii() and given.isprintable():
        return given[:100]
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "Unknown"


def simple_response(status: int, text: str, *, close: bool) -> bytes:
    body = (text.rstrip("\n") + "\n").encode("utf-8")
    head = (
        f"HTTP/1.1 {status} {reason_phrase(status, '')}\r\nContent-Type: text/plain; charset=utf-8\r\n"
        f"Content-Length: {len(body)}\r\nConnection: {'close' if close else 'keep-alive'}\r\n\r\n"
    )
    return head.encode() + body


def error_body(protocol: Protocol, error_type: str, code: str, message: str) -> bytes:
    """An error body in ``protocol``'s shape, which its CLIs read: Anthropic ``{"type":
    "error", "error": {"type", "message"}}``, OpenAI ``{"error": {"message", "type", "param",
    "code"}}``."""
    if protocol == "anthropic-messages":
        error: dict[str, object] = {
            "type": "error",
            "error": {"type": error_type, "message": message},
        }
    else:
        error = {"error": {"message": message, "type": error_type, "param": None, "code": code}}
    return json.dumps(error).encode()


def error_response(
    protocol: Protocol,
    status: int,
    error_type: str,
    code: str,
    message: str,
    *,
    close: bool,
    headers: Mapping[str, object] | None = None,
) -> bytes:
    """A whole response with :func:`error_body`, and ``headers`` (e.g. Retry-After)."""
    body = error_body(protocol, error_type, code, message)
    extra = "".join(f"{name}: {value}\r\n" for name, value in (headers or {}).items())
    head = (
        f"HTTP/1.1 {status} {reason_phrase(status, '')}\r\nContent-Type: application/json\r\n"
        f"{extra}Content-Length: {len(body)}\r\n"
        f"Connection: {'close' if close else 'keep-alive'}\r\n\r\n"
    )
    return head.encode() + body


def reply_and_close(sock: socket.socket, status: int, text: str) -> None:
    with contextlib.suppress(OSError):
        sock.settimeout(WRITE_TIMEOUT)
        sock.sendall(simple_response(status, f"tmlbench gateway: {text}", close=True))
        # Lingering close: closing with unread input would reset the connection and could
        # destroy the answer before the client reads it.
        sock.shutdown(socket.SHUT_WR)
        sock.settimeout(LINGER_SECONDS)
        deadline = time.monotonic() + LINGER_SECONDS
        drained = 0
        while drained < 4 * MAX_HEADER_BYTES and time.monotonic() < deadline:
            chunk = sock.recv(BUFSIZE)
            if not chunk:
                break
            drained += len(chunk)
