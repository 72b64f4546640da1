"""The sandbox's side of the gateway: reading and checking one client connection's requests.

Every byte read here comes from the sandbox and is hostile: sizes, times and shapes are
bounded, and anything the gateway will not forward raises :class:`BadRequest` with the
status to answer. The answers the gateway gives itself (errors, "busy") are written here too.
"""

from __future__ import annotations

import contextlib
import re
import socket
import time
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass
from http import HTTPStatus

BUFSIZE = 64 * 1024
MAX_HEADER_BYTES = 64 * 1024
MAX_HEADERS = 100
BODY_TIMEOUT = 120.0  # the whole request body
WRITE_TIMEOUT = 60.0  # the client not reading what we send
LINGER_SECONDS = 1.0
ALLOWED_METHODS = frozenset({"GET", "POST", "HEAD", "PUT", "PATCH", "DELETE", "OPTIONS"})

TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
_PATH = re.compile(r"/[A-Za-z0-9\-._~!$&'()*+,;=:@/%]*")
_QUERY = re.compile(r"[A-Za-z0-9\-._~!$&'()*+,;=:@/%?]*")
_BAD_PERCENT = re.compile(r"%(?![0-9A-Fa-f]{2})")
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
    path: str
    version: str
    headers: list[tuple[str, str]]
    body: bytes
    keep_alive: bool


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


# The provider endpoints an agent needs, relative to the base path (with or without /v1).
MODEL_ENDPOINTS = re.compile(
    r"(/v1)?/(chat/completions|responses(/compact)?|messages(/count_tokens)?|models(/[^/]+)?)/?"
)


def check_target(target: str, base_path: str) -> str:
    """The target's path, if it may be forwarded; BadRequest (400/404) if not."""
    if not target.startswith("/"):
        raise BadRequest(
            400,
            "send origin-form requests (a path such as /v1/chat/completions); "
            "absolute URLs and '*' are not accepted",
        )
    path, _, query = target.partition("?")
    if not _PATH.fullmatch(path) or not _QUERY.fullmatch(query) or _BAD_PERCENT.search(target):
        raise BadRequest(400, "malformed request target")
    lowered = path.lower()
    if "%2f" in lowered or "%5c" in lowered or "%00" in lowered:
        raise BadRequest(400, "encoded '/', '\\' or NUL in the request path")
    if any(urllib.parse.unquote(seg) in (".", "..") for seg in path.split("/")):
        raise BadRequest(400, "'.' and '..' path segments are not accepted")
    if not (path == base_path or path.startswith(base_path + "/")):
        raise BadRequest(
            404,
            f"the gateway forwards only paths under {base_path or '/'} to the provider, "
            f"not {path[:200]}",
        )
    return path


def check_endpoint(path: str, base_path: str) -> None:
    """Only model endpoints pass: the key pays for whatever the gateway forwards, and files,
    batches or fine-tuning would spend money that no model call accounts for."""
    if not MODEL_ENDPOINTS.fullmatch(path[len(base_path) :]):
        raise BadRequest(
            403,
            "the gateway forwards model endpoints only (chat/completions, responses, "
            f"messages, models), not {path[:200]}",
        )


def read_request(
    client: ClientConnection,
    *,
    base_path: str,
    max_body_bytes: int,
    idle_timeout: float,
    header_timeout: float,
) -> ClientRequest | None:
    """The client's next request, body included, if the gateway may forward it.

    None if the client left between requests; BadRequest (with the status to answer) if the
    request is malformed, too large, or for something the gateway does not forward.
    """
    head = client.read_head(idle_timeout, header_timeout)
    if head is None:
        return None
    method, target, version, headers = parse_head(head)
    if method == "CONNECT":
        raise BadRequest(405, "this is not a proxy: CONNECT is not accepted")
    if method not in ALLOWED_METHODS:
        raise BadRequest(405, f"method {method[:20]} is not forwarded")
    path = check_target(target, base_path)
    check_endpoint(path, base_path)
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
    return ClientRequest(method, target, path, version, headers, body, keep_alive)


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
