"""The provider gateway's HTTP/1.1 server (see the package docstring for the contract)."""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import http.client
import ipaddress
import json
import logging
import re
import socket
import ssl
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from http import HTTPStatus
from pathlib import Path
from typing import Any

from runner.gateway.usage import (
    PROTOCOLS,
    Protocol,
    Reply,
    ReplyParser,
    error_of_bytes,
    model_call_kind,
    prepare_body,
    shrink,
    summarize_request,
)
from runner.llm.client import FATAL_CODES, RETRYABLE_STATUS
from runner.socket_server import SocketServer

log = logging.getLogger(__name__)

BUFSIZE = 64 * 1024
MAX_HEADER_BYTES = 64 * 1024
MAX_HEADERS = 100
MAX_BODY_BYTES = 32 * 1024**2
# Request bodies held at once, all connections together: without it, max_connections clients
# sending MAX_BODY_BYTES each would make the harness hold gigabytes. Past it: 503, retry.
MAX_BUFFERED_BODY_BYTES = 2 * MAX_BODY_BYTES
# Parsed JSON takes up to ~110 bytes of Python objects per comma, brace and bracket of its
# text (measured: 8 MiB of [{"a":1},...] parses into 216 MB). A body with more of them is
# forwarded unparsed (no transcript summary, no include_usage), and bodies of
# PARSE_ALONE_BYTES or more are parsed one at a time, gateway-wide: ~110 MB at most.
MAX_PARSE_VALUES = 1_000_000
PARSE_ALONE_BYTES = 1024**2
MAX_CONNECTIONS = 64
HEADER_TIMEOUT = 30.0  # the whole request header, once its first byte arrived
IDLE_TIMEOUT = 300.0  # a kept-alive connection waiting for its next request
BODY_TIMEOUT = 120.0  # the whole request body
WRITE_TIMEOUT = 60.0  # the client not reading what we send
CONNECT_TIMEOUT = 30.0  # TCP (+ TLS, + proxy tunnel) to the provider
LINGER_SECONDS = 1.0
MAX_TRANSCRIPT_BYTES = 128 * 1024**2
MAX_TRANSCRIPT_BODY = 64 * 1024  # serialized request / reply per transcript line
MAX_ERROR_BODY = 64 * 1024  # error replies kept to find their code and message
_NOT_PARSED = object()  # a model call's body not summarized yet
ALLOWED_METHODS = frozenset({"GET", "POST", "HEAD", "PUT", "PATCH", "DELETE", "OPTIONS"})
QUOTA_HINTS = (  # quota failures of providers that send no FATAL_CODES code
    "exceeded your current quota",
    "credit balance is too low",
    "insufficient balance",
    "insufficient credits",
)
LOOPBACK_NAMES = frozenset({"localhost", "localhost.", "ip6-localhost"})

_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
_PATH = re.compile(r"/[A-Za-z0-9\-._~!$&'()*+,;=:@/%]*")
_QUERY = re.compile(r"[A-Za-z0-9\-._~!$&'()*+,;=:@/%?]*")
_BAD_PERCENT = re.compile(r"%(?![0-9A-Fa-f]{2})")
_BAD_VALUE = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")
_MASKED_KEY = re.compile(r"[A-Za-z0-9_\-]{0,16}\*{4,}[A-Za-z0-9_\-]{0,8}")

# Never forwarded to the provider: hop-by-hop headers, framing we recompute, and every
# credential or identity the CLI may send (the gateway adds the real key itself).
_REQUEST_DROPPED = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-connection",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "host",
        "content-length",
        "accept-encoding",
        "expect",
        "authorization",
        "x-api-key",
        "api-key",
        "x-goog-api-key",
        "cookie",
        "openai-organization",
        "openai-project",
        "forwarded",
        "x-forwarded-for",
        "x-forwarded-host",
        "x-forwarded-proto",
    }
)
_RESPONSE_DROPPED = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-connection",
        "proxy-authenticate",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "content-length",
        "set-cookie",
        "set-cookie2",
    }
)


@dataclass(frozen=True)
class GatewayStats:
    """What went through the gateway so far.

    ``requests``: model calls forwarded (POST to a generation endpoint), failures included;
    ``retries``: model calls answered 408/429/5xx, with an error inside a 2xx reply, or that
    could not reach the provider (502/504), or whose reply the provider broke off: the CLI
    retries those itself; ``steps``: model calls answered 2xx in full; ``tokens_in`` /
    ``tokens_out``: summed usage of all model calls (a call the client abandoned counts what
    its reply had reported by then); ``usage_missing``: some complete 2xx model call had no
    usage, so the totals are unknown; ``provider_seconds``: wall time of the model calls,
    summed; ``provider_error``: the first authentication (401), payment/permission (402/403
    on a model call) or quota failure, e.g. ``"HTTP 401 (invalid_api_key): ..."``;
    ``other_requests``: non-model requests forwarded (``GET /v1/models``, ...);
    ``rejected``: requests the gateway answered itself (400, 404, 405, 413, 431, 503).
    """

    requests: int = 0
    retries: int = 0
    steps: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    usage_missing: bool = False
    provider_seconds: float = 0.0
    provider_error: str | None = None
    other_requests: int = 0
    rejected: int = 0

    def record_fields(self, prices: Any = None) -> dict:
        """The run record's usage fields; unknown tokens (and so cost) are None, never 0.

        ``prices``: the agent spec's ``TokenPrices`` (anything with ``cost(tokens_in,
        tokens_out)``), or None for an unknown cost.
        """
        known = not self.usage_missing and self.requests > 0
        tokens_in = self.tokens_in if known else None
        tokens_out = self.tokens_out if known else None
        return {
            "tokens_in": tokens_in,
            "tokens_out": tokens_out,
            "cost_usd": prices.cost(tokens_in, tokens_out) if prices is not None else None,
            "requests": self.requests,
            "retries": self.retries,
            "steps": self.steps,
            "provider_seconds": round(self.provider_seconds, 3),
        }


class BadRequest(Exception):
    """The client sent something the gateway does not forward; ``status`` is the answer."""

    def __init__(self, status: int, reason: str):
        super().__init__(reason)
        self.status = status


@dataclass
class _Request:
    method: str
    target: str  # path (+ "?" + query), as sent
    path: str
    version: str
    headers: list[tuple[str, str]]
    body: bytes
    keep_alive: bool


class _Client:
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


def _parse_head(head: bytes) -> tuple[str, str, str, list[tuple[str, str]]]:
    try:
        text = head.decode("latin-1")
    except UnicodeDecodeError:  # pragma: no cover - latin-1 decodes every byte
        raise BadRequest(400, "undecodable request header") from None
    lines = text.split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != 3 or not _TOKEN.fullmatch(parts[0]):
        raise BadRequest(400, "malformed request line")
    method, target, version = parts
    if version not in ("HTTP/1.0", "HTTP/1.1"):
        raise BadRequest(400, "only HTTP/1.0 and HTTP/1.1 are spoken here")
    if len(lines) - 1 > MAX_HEADERS:
        raise BadRequest(431, f"more than {MAX_HEADERS} header fields")
    headers = []
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if not sep or not _TOKEN.fullmatch(name):
            raise BadRequest(400, "malformed header field")
        value = value.strip(" \t")
        if _BAD_VALUE.search(value):
            raise BadRequest(400, "control character in a header value")
        headers.append((name, value))
    return method, target, version, headers


def _header(headers: list[tuple[str, str]], name: str) -> list[str]:
    return [v for n, v in headers if n.lower() == name]


# The provider endpoints an agent needs, relative to the base path (with or without /v1).
MODEL_ENDPOINTS = re.compile(
    r"(/v1)?/(chat/completions|responses(/compact)?|messages(/count_tokens)?|models(/[^/]+)?)/?"
)


def _check_target(target: str, base_path: str) -> str:
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


def _check_endpoint(path: str, base_path: str) -> None:
    """Only model endpoints pass: the key pays for whatever the gateway forwards, and files,
    batches or fine-tuning would spend money that no model call accounts for."""
    if not MODEL_ENDPOINTS.fullmatch(path[len(base_path) :]):
        raise BadRequest(
            403,
            "the gateway forwards model endpoints only (chat/completions, responses, "
            f"messages, models), not {path[:200]}",
        )


def _is_loopback(host: str) -> bool:
    if host.lower() in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _redact_masked(text: str) -> str:
    """Providers echo a masked key in auth errors (``sk-pr***...abcd``): keep none of it."""
    return _MASKED_KEY.sub("[redacted]", text)


class _Upstream:
    """One client connection's kept-alive connection to the provider."""

    def __init__(self, gateway: ProviderGateway):
        self.gateway = gateway
        self.conn: http.client.HTTPConnection | None = None
        self.sock: socket.socket | None = None

    def send(
        self, method: str, target: str, headers: list[tuple[str, str]], body: bytes | None
    ) -> http.client.HTTPResponse:
        for _ in range(2):
            reused = self.conn is not None
            if self.conn is None:
                self.conn, self.sock = self.gateway._open_upstream()
            try:
                self.conn.putrequest(method, target, skip_accept_encoding=True)
                for name, value in headers:
                    self.conn.putheader(name, value)
                self.conn.endheaders(body or None)
                return self.conn.getresponse()
            except (ConnectionResetError, BrokenPipeError, ConnectionAbortedError):
                # A kept-alive connection the provider closed meanwhile: once more, afresh.
                self.close()
                if not reused or self.gateway._stopping:
                    raise
            except BaseException:
                self.close()
                raise
        raise ConnectionError("the provider closed the connection twice")  # pragma: no cover

    def close(self) -> None:
        if self.sock is not None:
            self.gateway._untrack(self.sock)
            self.sock = None
        if self.conn is not None:
            with contextlib.suppress(Exception):
                self.conn.close()
            self.conn = None


class _Transcript:
    """``transcript.jsonl``, appended line by line; bounded, never holding the key."""

    def __init__(self, path: Path, secret: str | None, max_bytes: int):
        self.path = path
        self.secret = secret
        self.max_bytes = max_bytes
        self.written = 0
        self.full = False
        self.started = time.monotonic()
        self._lock = threading.Lock()
        self._fh = None

    def open(self) -> None:
        self.started = time.monotonic()
        self._fh = self.path.open("a", encoding="utf-8")

    def write(self, event: str, **data: Any) -> None:
        entry = {"event": event, "t": round(time.monotonic() - self.started, 3), **data}
        line = json.dumps(entry, default=str) + "\n"
        if self.secret:
            line = line.replace(self.secret, "[redacted]")
        with self._lock:
            if self._fh is None or self.full:
                return
            if self.written + len(line) > self.max_bytes:
                self.full = True
                line = (
                    json.dumps(
                        {"event": "transcript_full", "t": entry["t"], "max_bytes": self.max_bytes}
                    )
                    + "\n"
                )
            try:
                self._fh.write(line)
                self._fh.flush()
                self.written += len(line)
            except (OSError, ValueError):
                log.warning("cannot write the gateway transcript %s", self.path)
                self.full = True

    def close(self) -> None:
        with self._lock:
            fh, self._fh = self._fh, None
        if fh is not None:
            with contextlib.suppress(OSError):
                fh.close()


class ProviderGateway(SocketServer):
    """Forwards a sandboxed CLI's provider requests, adding the real key; see the package doc.

    ``socket_path``'s folder must exist. Use as a context manager, or ``start()``/``stop()``.
    """

    def __init__(
        self,
        socket_path: Path,
        *,
        protocol: Protocol,
        base_url: str,
        api_key: str | None,
        transcript_path: Path,
        request_timeout: float = 600.0,
        connect_timeout: float = CONNECT_TIMEOUT,
        max_body_bytes: int = MAX_BODY_BYTES,
        max_buffered_body_bytes: int = MAX_BUFFERED_BODY_BYTES,
        max_connections: int = MAX_CONNECTIONS,
        header_timeout: float = HEADER_TIMEOUT,
        idle_timeout: float = IDLE_TIMEOUT,
        max_transcript_bytes: int = MAX_TRANSCRIPT_BYTES,
    ):
        if protocol not in PROTOCOLS:
            raise ValueError(f"unknown gateway protocol {protocol!r} (expected one of {PROTOCOLS})")
        url = urllib.parse.urlsplit(base_url)
        if url.scheme not in ("http", "https") or not url.hostname:
            raise ValueError(f"gateway base_url {base_url!r} must be an http(s):// URL")
        if url.query or url.fragment or url.username or url.password:
            raise ValueError(f"gateway base_url {base_url!r} must not have a query or credentials")
        try:
            port = url.port or (443 if url.scheme == "https" else 80)
        except ValueError:
            raise ValueError(f"gateway base_url {base_url!r} has an invalid port") from None
        super().__init__(socket_path, max_connections)
        self.protocol: Protocol = protocol
        self.base_url = base_url
        self._scheme = url.scheme
        self._host = url.hostname
        self._port = port
        self._netloc = url.netloc
        self._base_path = url.path.rstrip("/")
        try:
            _check_target(self._base_path + "/", self._base_path)
        except BadRequest:
            raise ValueError(f"gateway base_url {base_url!r} has an unusable path") from None
        self._api_key = api_key or None
        # Never passed on to the CLI, should the provider echo it in a reply.
        self._secret = self._api_key.encode() if self._api_key else None
        self.request_timeout = request_timeout
        self.connect_timeout = min(connect_timeout, request_timeout)
        self.max_body_bytes = max_body_bytes
        self.max_buffered_body_bytes = max(max_buffered_body_bytes, max_body_bytes)
        self._buffered_body_bytes = 0
        self._parse_alone = threading.Lock()
        self.header_timeout = header_timeout
        self.idle_timeout = idle_timeout
        self._proxy = self._proxy_for(url.scheme, url.hostname)
        self._ssl = ssl.create_default_context() if url.scheme == "https" else None
        self.transcript_path = Path(transcript_path)
        self._transcript = _Transcript(self.transcript_path, self._api_key, max_transcript_bytes)
        self._stats: dict[str, Any] = dataclasses.asdict(GatewayStats())

    def __repr__(self) -> str:
        return (
            f"ProviderGateway({self.protocol}, {self.base_url!r}, socket={str(self.socket_path)!r})"
        )

    @property
    def inside_path(self) -> str:
        """The base URL's path (``"/v1"``; ``""`` for ``https://api.anthropic.com``)."""
        return self._base_path

    # -- lifecycle -------------------------------------------------------------------------

    def _on_start(self) -> None:
        self._transcript.open()
        self._transcript.write(
            "gateway_start",
            protocol=self.protocol,
            base_url=self.base_url,
            inside_path=self._base_path,
        )

    def _on_stop(self) -> None:
        if self._started:
            self._transcript.write("gateway_stop", stats=dataclasses.asdict(self.stats()))
        self._transcript.close()

    def stats(self) -> GatewayStats:
        with self._lock:
            return GatewayStats(**self._stats)

    # -- serving ---------------------------------------------------------------------------

    def _answer_busy(self, sock: socket.socket, text: str) -> None:
        with self._lock:
            self._stats["rejected"] += 1
        _reply_and_close(sock, 503, text)

    def _serve(self, sock: socket.socket) -> None:
        client = _Client(sock, self._reserve_body)
        upstream = _Upstream(self)
        try:
            while not self._stopping:
                try:
                    try:
                        request = self._read_request(client)
                    except BadRequest as exc:
                        with self._lock:
                            self._stats["rejected"] += 1
                        _reply_and_close(sock, exc.status, str(exc))
                        return
                    except OSError:  # a silent client, a reset, or stop(): nothing to answer
                        return
                    if request is None or not self._exchange(client, upstream, request):
                        return
                    if not request.keep_alive:
                        return
                finally:
                    self._release_body(client)
        finally:
            upstream.close()

    def _reserve_body(self, size: int) -> None:
        with self._lock:
            if self._buffered_body_bytes + size > self.max_buffered_body_bytes:
                raise BadRequest(
                    503,
                    f"the gateway holds at most {self.max_buffered_body_bytes:,} bytes of "
                    "request bodies at once and other requests use them now; retry shortly",
                )
            self._buffered_body_bytes += size

    def _release_body(self, client: _Client) -> None:
        with self._lock:
            self._buffered_body_bytes -= client.reserved
        client.reserved = 0

    def _read_request(self, client: _Client) -> _Request | None:
        head = client.read_head(self.idle_timeout, self.header_timeout)
        if head is None:
            return None
        method, target, version, headers = _parse_head(head)
        if method == "CONNECT":
            raise BadRequest(405, "this is not a proxy: CONNECT is not accepted")
        if method not in ALLOWED_METHODS:
            raise BadRequest(405, f"method {method[:20]} is not forwarded")
        path = _check_target(target, self._base_path)
        _check_endpoint(path, self._base_path)
        connection = {
            t.strip().lower() for v in _header(headers, "connection") for t in v.split(",")
        }
        keep_alive = version == "HTTP/1.1" and "close" not in connection
        encodings = _header(headers, "transfer-encoding")
        lengths = _header(headers, "content-length")
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
            if length > self.max_body_bytes:
                raise BadRequest(413, f"request body larger than {self.max_body_bytes} bytes")
            client.reserve(length)
        expect = ",".join(_header(headers, "expect")).lower()
        if "100-continue" in expect and (chunked or length):
            client.sock.settimeout(WRITE_TIMEOUT)
            client.sock.sendall(b"HTTP/1.1 100 Continue\r\n\r\n")
        if chunked:
            body = client.read_chunked(self.max_body_bytes, deadline)
        else:
            body = client.read_exact(length, deadline) if length else b""
        return _Request(method, target, path, version, headers, body, keep_alive)

    def _upstream_headers(self, request: _Request, body: bytes) -> list[tuple[str, str]]:
        dropped = set(_REQUEST_DROPPED)
        for value in _header(request.headers, "connection"):
            dropped |= {t.strip().lower() for t in value.split(",")}
        headers = [
            (n, v)
            for n, v in request.headers
            if n.lower() not in dropped and not n.lower().startswith("proxy-")
        ]
        headers.append(("Accept-Encoding", "identity"))
        if body or request.method in ("POST", "PUT", "PATCH"):
            headers.append(("Content-Length", str(len(body))))
        if self._api_key:
            if self.protocol == "anthropic-messages":
                headers.append(("x-api-key", self._api_key))
            else:
                headers.append(("Authorization", f"Bearer {self._api_key}"))
        return headers

    def _exchange(self, client: _Client, upstream: _Upstream, request: _Request) -> bool:
        """Forward one request and stream its reply back; whether the connection goes on."""
        kind = model_call_kind(request.method, request.path[len(self._base_path) :])
        body, summary = request.body, _NOT_PARSED
        # Parsed before forwarding only if it may need include_usage; else after the reply.
        # Only the transcript's summary is kept: the parsed body would hold far more memory.
        if kind == "openai-chat" and (b'"stream"' in body or b"\\u" in body):
            with self._parsing(body) as parse:
                if parse:
                    body, parsed = prepare_body(kind, body)
                    summary = _capped_request(kind, parsed)
                    del parsed
        headers = self._upstream_headers(request, body)
        target = request.target
        if self._proxy is not None and self._scheme == "http":
            target = f"http://{self._netloc}{target}"
        started = time.monotonic()
        try:
            response = upstream.send(request.method, target, headers, body)
        except (OSError, http.client.HTTPException) as exc:
            seconds = time.monotonic() - started
            if self._stopping:
                reply = Reply(error=(None, "the gateway stopped before the provider answered"))
                self._account(kind, 0, seconds, reply, "stopped")
                self._log(kind, request, 0, seconds, summary, False, reply, "stopped")
                return False
            status = 504 if isinstance(exc, TimeoutError) else 502
            problem = _redact_masked(f"{type(exc).__name__}: {exc}")[:500]
            log.info("gateway: provider unreachable: %s", problem)
            reply = Reply(error=(None, f"cannot reach the provider: {problem}"))
            self._account(kind, status, seconds, reply, None)
            self._log(kind, request, status, seconds, summary, False, reply, None)
            text = f"tmlbench gateway: cannot reach the provider: {problem}"
            try:
                client.sock.settimeout(WRITE_TIMEOUT)
                client.sock.sendall(_simple_response(status, text, close=not request.keep_alive))
            except OSError:
                return False
            return True

        status = response.status
        content_type = (response.getheader("Content-Type") or "").lower()
        event_stream = "text/event-stream" in content_type
        parser = (
            ReplyParser(kind, event_stream=event_stream)
            if kind is not None and 200 <= status < 300
            else None
        )
        error_body = bytearray() if status >= 400 else None
        no_body = request.method == "HEAD" or status in (204, 304) or status < 200
        length = response.length if not response.chunked else None
        keep_alive = request.keep_alive
        chunked = False
        lines = [f"HTTP/1.1 {status} {_reason(status, response.reason)}"]
        dropped = set(_RESPONSE_DROPPED)
        for value in response.headers.get_all("Connection") or []:
            dropped |= {t.strip().lower() for t in value.split(",")}
        for name, value in response.getheaders():
            if (
                name.lower() not in dropped
                and _TOKEN.fullmatch(name)
                and not _BAD_VALUE.search(value)
            ):
                lines.append(f"{name}: {value}")
        if no_body:
            pass
        elif length is not None:
            lines.append(f"Content-Length: {length}")
        elif request.version == "HTTP/1.1":
            lines.append("Transfer-Encoding: chunked")
            chunked = True
        else:
            keep_alive = False  # HTTP/1.0 and no length: the end of the body is the close
        lines.append("Connection: keep-alive" if keep_alive else "Connection: close")
        head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1", errors="replace")

        sock = client.sock
        interrupted: str | None = None
        accounted = False
        reply: Reply | None = None
        seconds = 0.0

        def account() -> None:
            # Before the reply's last bytes go out: a client that has the whole reply
            # finds it counted in the stats already.
            nonlocal accounted, reply, seconds
            accounted = True
            reply = parser.finish() if parser is not None else None
            if error_body is not None:
                reply = Reply(error=error_of_bytes(bytes(error_body)))
            seconds = time.monotonic() - started
            self._account(kind, status, seconds, reply, interrupted)

        # The head goes out with the first body bytes (one write, so a Nagle-bound TCP hop
        # behind us sends one segment); an event stream's head goes out at once.
        pending = b""
        client_gone = False

        def send(data: bytes) -> bool:
            nonlocal client_gone
            try:
                sock.sendall(data)
            except OSError:
                client_gone = True
            return not client_gone

        sock.settimeout(WRITE_TIMEOUT)
        if no_body or event_stream:
            send(head)
        else:
            pending = head
        if no_body:
            with contextlib.suppress(OSError, http.client.HTTPException, ValueError):
                response.read()  # b"": marks the response done so the connection is reusable
        while not client_gone and not no_body:
            try:
                data = response.read1(BUFSIZE)
            except (OSError, http.client.HTTPException, ValueError):
                interrupted = "stopped" if self._stopping else "upstream"
                break
            if not data:
                break
            if self._secret is not None:  # same length: Content-Length stays right
                data = data.replace(self._secret, b"*" * len(self._secret))
            if parser is not None:
                parser.feed(data)
            if error_body is not None and len(error_body) < MAX_ERROR_BODY:
                error_body += data[: MAX_ERROR_BODY - len(error_body)]
            if response.length == 0:  # that was the last of a Content-Length body
                account()
            send(pending + (b"%x\r\n%b\r\n" % (len(data), data) if chunked else data))
            pending = b""
        if interrupted == "upstream" and pending:  # nothing sent yet: say what happened
            send(
                _simple_response(
                    502, "tmlbench gateway: the provider broke off its reply", close=True
                )
            )
        if client_gone and not accounted:
            interrupted = "stopped" if self._stopping else "client"
        if not accounted:
            account()
        if interrupted is None and not client_gone:
            if not response.isclosed():
                with contextlib.suppress(OSError, http.client.HTTPException, ValueError):
                    response.read()  # b"" at the end of a Content-Length body
            send(pending + b"0\r\n\r\n" if chunked else pending)
        if interrupted is not None or client_gone or not response.isclosed() or response.will_close:
            upstream.close()
        self._log(kind, request, status, seconds, summary, event_stream, reply, interrupted)
        return interrupted is None and not client_gone and keep_alive

    def _account(
        self,
        kind: Protocol | None,
        status: int,
        seconds: float,
        reply: Reply | None,
        interrupted: str | None,
    ) -> None:
        """The stats of one forwarded request."""
        error = reply.error if reply is not None else None
        fatal = None
        if error is not None or status >= 400:
            code, message = error or (None, "")
            message = _redact_masked(message)
            hint = (code or "").lower() + " " + message.lower()
            if (
                status == 401
                or (kind is not None and status in (402, 403))
                or code in FATAL_CODES
                or any(h in hint for h in QUOTA_HINTS)
            ):
                fatal = (f"HTTP {status}" + (f" ({code})" if code else "") + f": {message}")[:500]
        with self._lock:
            s = self._stats
            if fatal is not None and s["provider_error"] is None:
                s["provider_error"] = (
                    fatal.replace(self._api_key, "[redacted]") if self._api_key else fatal
                )
            if kind is None:
                s["other_requests"] += 1
            else:
                s["requests"] += 1
                s["provider_seconds"] += seconds
                usage = reply.usage if reply is not None else None
                if usage is not None:
                    s["tokens_in"] += usage[0]
                    s["tokens_out"] += usage[1]
                if 200 <= status < 300:
                    if interrupted == "upstream" or (
                        interrupted is None and error is not None and usage is None
                    ):
                        s["retries"] += 1
                    elif interrupted is None:
                        s["steps"] += 1
                        if usage is None:
                            s["usage_missing"] = True
                elif status in RETRYABLE_STATUS or status >= 500:
                    s["retries"] += 1

    def _log(
        self,
        kind: Protocol | None,
        request: _Request,
        status: int,
        seconds: float,
        summary: Any,
        event_stream: bool,
        reply: Reply | None,
        interrupted: str | None,
    ) -> None:
        """The transcript line of one forwarded request (after the client has its reply)."""
        error = reply.error if reply is not None else None
        path = request.path[:500]
        if kind is None:
            extra = {}
            if error is not None:
                extra["error"] = _redact_masked(error[1])[:500]
            self._transcript.write(
                "request",
                method=request.method,
                path=path,
                status=status,
                seconds=round(seconds, 3),
                **extra,
            )
            return
        usage = reply.usage if reply is not None else None
        shown = reply.transcript() if reply is not None else {"error": "no reply"}
        if "error" in shown:
            shown["error"] = _redact_masked(shown["error"])
        if summary is _NOT_PARSED:
            summary = None
            with self._parsing(request.body) as parse:
                if parse:
                    with contextlib.suppress(ValueError, RecursionError):
                        summary = _capped_request(kind, json.loads(request.body))
                else:
                    summary = {"cut": f"not parsed: over {MAX_PARSE_VALUES:,} commas and brackets"}
        entry: dict[str, Any] = {
            "protocol": kind,
            "method": request.method,
            "path": path,
            "status": status,
            "seconds": round(seconds, 3),
            "stream": event_stream,
            "usage": {"input": usage[0], "output": usage[1]} if usage is not None else None,
            "request": summary,
            "reply": _capped(shown),
        }
        if interrupted is not None:
            entry["interrupted"] = interrupted
        self._transcript.write("model_call", **entry)

    @contextlib.contextmanager
    def _parsing(self, body: bytes) -> Iterator[bool]:
        """Whether ``body`` may be parsed; while True, big bodies are parsed one at a time."""
        values = body.count(b",") + body.count(b"{") + body.count(b"[")
        if values > MAX_PARSE_VALUES:
            yield False
        elif len(body) < PARSE_ALONE_BYTES:
            yield True
        else:
            with self._parse_alone:
                yield True

    # -- the provider side -----------------------------------------------------------------

    @staticmethod
    def _proxy_for(scheme: str, host: str) -> tuple[str, int, str | None] | None:
        """The harness's own proxy for the provider (host, port, Proxy-Authorization), if any.

        A loopback provider (a local server, a test stand-in) is never reached through one.
        """
        if _is_loopback(host):
            return None
        proxies = urllib.request.getproxies()
        url = proxies.get(scheme)
        if not url or urllib.request.proxy_bypass(host):
            return None
        if "://" not in url:
            url = "http://" + url
        parts = urllib.parse.urlsplit(url)
        if not parts.hostname:
            return None
        auth = None
        if parts.username:
            raw = f"{urllib.parse.unquote(parts.username)}:{urllib.parse.unquote(parts.password or '')}"
            auth = "Basic " + base64.b64encode(raw.encode()).decode()
        try:
            port = parts.port or 80
        except ValueError:
            return None
        return parts.hostname, port, auth

    def _open_upstream(self) -> tuple[http.client.HTTPConnection, socket.socket]:
        conn: http.client.HTTPConnection
        if self._proxy is not None:
            proxy_host, proxy_port, auth = self._proxy
            if self._scheme == "https":
                conn = http.client.HTTPSConnection(
                    proxy_host, proxy_port, timeout=self.connect_timeout, context=self._ssl
                )
                conn.set_tunnel(
                    self._host, self._port, headers={"Proxy-Authorization": auth} if auth else None
                )
            else:
                conn = http.client.HTTPConnection(
                    proxy_host, proxy_port, timeout=self.connect_timeout
                )
        elif self._scheme == "https":
            conn = http.client.HTTPSConnection(
                self._host, self._port, timeout=self.connect_timeout, context=self._ssl
            )
        else:
            conn = http.client.HTTPConnection(self._host, self._port, timeout=self.connect_timeout)
        try:
            conn.connect()
        except BaseException:
            conn.close()
            raise
        sock = conn.sock
        assert sock is not None
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.settimeout(self.request_timeout)
        if not self._track(sock):
            conn.close()
            raise ConnectionAbortedError("the gateway is stopping")
        return conn, sock


def _reason(status: int, given: str) -> str:
    given = (given or "").strip()
    if given and given.isascii() and given.isprintable():
        return given[:100]
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "Unknown"


def _simple_response(status: int, text: str, *, close: bool) -> bytes:
    body = (text.rstrip("\n") + "\n").encode("utf-8")
    head = (
        f"HTTP/1.1 {status} {_reason(status, '')}\r\nContent-Type: text/plain; charset=utf-8\r\n"
        f"Content-Length: {len(body)}\r\nConnection: {'close' if close else 'keep-alive'}\r\n\r\n"
    )
    return head.encode() + body


def _reply_and_close(sock: socket.socket, status: int, text: str) -> None:
    with contextlib.suppress(OSError):
        sock.settimeout(WRITE_TIMEOUT)
        sock.sendall(_simple_response(status, f"tmlbench gateway: {text}", close=True))
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


def _capped(value: dict, limit: int = MAX_TRANSCRIPT_BODY) -> dict:
    """``value`` if it serializes within ``limit``; else with its strings cut harder."""
    if len(json.dumps(value, default=str)) <= limit:
        return value
    for max_str in (2000, 300):
        cut = shrink(value, max_str, 64, 8)
        if len(json.dumps(cut, default=str)) <= limit:
            return cut
    return {"cut": f"larger than {limit} bytes"}


def _capped_request(kind: Protocol, parsed: Any) -> dict | None:
    if parsed is None:
        return None
    for max_str in (4000, 500, 100):
        summary = summarize_request(kind, parsed, max_str)
        if summary is None:
            return {"cut": "the request body was not a JSON object"}
        if len(json.dumps(summary, default=str)) <= MAX_TRANSCRIPT_BODY:
            return summary
    return {
        "model": str(parsed.get("model"))[:200],
        "cut": f"larger than {MAX_TRANSCRIPT_BODY} bytes",
    }
