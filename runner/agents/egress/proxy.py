"""Host half of provider-only egress: an allow-listing HTTP proxy on a unix socket.

The sandbox has no network of its own. The harness runs one :class:`EgressProxy` per
attempt on a unix socket inside a folder it binds into the sandbox; ``forward.py`` makes
that socket a loopback TCP port for the agent. Only the configured provider hosts pass:

* ``CONNECT host:port`` (what HTTPS clients send): allowed → connect upstream, answer
  ``200 Connection established`` and splice bytes both ways; not allowed → ``403``;
  upstream unreachable → ``502``.
* absolute-form plain HTTP (``GET http://host:port/path HTTP/1.1``, e.g. a local vLLM or
  Ollama): allowed → forwarded with ``Connection: close`` and the response streamed back,
  one request per connection.
* anything else → ``400`` (``431`` for an oversized header).

Allow-list entries are ``host`` (port 443) or ``host:port`` and match the requested name
exactly, case-insensitively; ``*.example.com`` matches any name below example.com (not
example.com itself) and never an IP literal. An IP literal passes only if it is listed.
The proxy never looks inside a tunnel; it counts requests, refusals and bytes.

Stdlib only, one thread per connection: an attempt makes few connections.
"""

from __future__ import annotations

import contextlib
import ipaddress
import logging
import re
import socket
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from runner.agents.egress.forward import splice
from runner.agents.socket_server import SocketServer

log = logging.getLogger(__name__)

MAX_HEADER_BYTES = 64 * 1024
LINGER_SECONDS = 1.0
MAX_TRACKED_NAMES = 100  # distinct names kept per stats dict; the rest are summed as "<other>"
_HOSTNAME = re.compile(r"[a-z0-9_-]+(\.[a-z0-9_-]+)*")
_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
# Hop-by-hop headers a proxy must not forward (Transfer-Encoding stays: the body is
# forwarded as sent, so its framing must travel with it).
_HOP_BY_HOP = {
    "connection",
    "keep-alive",
    "proxy-connection",
    "proxy-authorization",
    "proxy-authenticate",
    "te",
    "trailer",
    "upgrade",
}
_REASONS = {
    400: "Bad Request",
    403: "Forbidden",
    431: "Request Header Fields Too Large",
    502: "Bad Gateway",
    503: "Service Unavailable",
}


@dataclass(frozen=True)
class EgressStats:
    """What went through the proxy so far.

    ``requests``: allowed CONNECT tunnels and plain-HTTP requests whose upstream answered
    the connect; ``denied``: refusals by the allow-list; ``bytes_up``/``bytes_down``: bytes
    forwarded to/from upstream (tunnel payload; for plain HTTP the rewritten request and
    the raw response); ``hosts``: allowed requests per ``host:port``; ``denied_hosts``:
    refusals per ``host:port``; ``upstream_errors``: allowed requests whose upstream could
    not be reached (502); ``malformed``: requests rejected as not a proxy request (400/431).
    """

    requests: int
    denied: int
    bytes_up: int
    bytes_down: int
    hosts: dict[str, int]
    denied_hosts: dict[str, int] = field(default_factory=dict)
    upstream_errors: int = 0
    malformed: int = 0


class BadRequest(ValueError):
    """The client sent something this proxy does not speak; ``status`` is the HTTP answer."""

    def __init__(self, reason: str, status: int = 400):
        super().__init__(reason)
        self.status = status


def _normalize_host(host: str) -> str:
    """Lowercase, one trailing dot dropped, IPv6 in compressed form; BadRequest if invalid."""
    host = host.lower()
    if host.endswith("."):
        host = host[:-1]
    try:
        return ipaddress.ip_address(host).compressed
    except ValueError:
        pass
    if not host or len(host) > 253 or not _HOSTNAME.fullmatch(host):
        raise BadRequest(f"invalid host name {host!r}")
    return host


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def parse_authority(text: str, default_port: int | None) -> tuple[str, int]:
    """``host``, ``host:port``, ``[v6]`` or ``[v6]:port`` → (normalized host, port)."""
    if text.startswith("["):
        end = text.find("]")
        if end < 0:
            raise BadRequest(f"invalid authority {text!r}")
        host, rest = text[1:end], text[end + 1 :]
        if not _is_ip(host) or ":" not in host:
            raise BadRequest(f"invalid IPv6 literal in {text!r}")
        if rest and not rest.startswith(":"):
            raise BadRequest(f"invalid authority {text!r}")
        port_text = rest[1:] if rest else None
    elif text.count(":") == 1:
        host, port_text = text.split(":")
    else:
        host, port_text = text, None
    if port_text is None:
        if default_port is None:
            raise BadRequest(f"{text!r} has no port (expected host:port)")
        port = default_port
    elif port_text.isascii() and port_text.isdigit() and 0 < int(port_text) < 65536:
        port = int(port_text)
    else:
        raise BadRequest(f"invalid port in {text!r}")
    return _normalize_host(host), port


def _key(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


class AllowList:
    """The hosts an agent may reach: exact ``host[:port]`` entries and ``*.domain[:port]``."""

    def __init__(self, entries: Sequence[str]):
        self.exact: set[tuple[str, int]] = set()
        self.suffixes: set[tuple[str, int]] = set()
        for entry in entries:
            text = entry.strip()
            try:
                if text.startswith("*."):
                    host, port = parse_authority(text[2:], 443)
                    # A numeric last label could make a matching name an IP address in
                    # disguise (inet_aton reads "1.0x7f" as 1.0.0.127).
                    if _is_ip(host) or not host.rsplit(".", 1)[-1][:1].isalpha():
                        raise BadRequest("a wildcard needs a domain name ending in a letter label")
                    self.suffixes.add(("." + host, port))
                else:
                    self.exact.add(parse_authority(text, 443))
            except BadRequest as exc:
                raise ValueError(f"egress allow-list entry {entry!r}: {exc}") from None

    def allows(self, host: str, port: int) -> bool:
        """``host`` must already be normalized (see :func:`parse_authority`)."""
        if (host, port) in self.exact:
            return True
        if _is_ip(host):
            return False
        return any(host.endswith(suffix) and p == port for suffix, p in self.suffixes)


@dataclass
class _Request:
    method: str
    target: str
    version: str
    headers: list[tuple[str, str]]
    rest: bytes  # bytes the client sent after the header (tunnel payload or request body)


def _read_head(conn: socket.socket, timeout: float) -> _Request:
    """The request header, read within ``timeout`` seconds in all (socket.timeout if not)."""
    deadline = time.monotonic() + timeout
    buf = b""
    while b"\r\n\r\n" not in buf:
        if len(buf) > MAX_HEADER_BYTES:
            raise BadRequest(f"request header larger than {MAX_HEADER_BYTES} bytes", 431)
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("request header not complete in time")
        conn.settimeout(left)
        chunk = conn.recv(16 * 1024)
        if not chunk:
            raise BadRequest("connection closed before the request header ended")
        buf += chunk
    head, rest = buf.split(b"\r\n\r\n", 1)
    if len(head) > MAX_HEADER_BYTES:
        raise BadRequest(f"request header larger than {MAX_HEADER_BYTES} bytes", 431)
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != 3 or not _TOKEN.fullmatch(parts[0]):
        raise BadRequest("malformed request line")
    method, target, version = parts
    if version not in ("HTTP/1.0", "HTTP/1.1"):
        raise BadRequest(f"unsupported protocol {version[:20]!r}")
    headers = []
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if not sep or not _TOKEN.fullmatch(name):
            raise BadRequest("malformed header line")
        headers.append((name, value.strip()))
    return _Request(method, target, version, headers, rest)


def _reply(conn: socket.socket, status: int, text: str) -> None:
    body = (text.rstrip("\n") + "\n").encode()
    head = (
        f"HTTP/1.1 {status} {_REASONS[status]}\r\nContent-Type: text/plain; charset=utf-8\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    )
    with contextlib.suppress(OSError):
        conn.sendall(head.encode() + body)
        # Lingering close: closing with unread input would reset the connection and could
        # destroy the answer before the client reads it.
        conn.shutdown(socket.SHUT_WR)
        conn.settimeout(LINGER_SECONDS)
        drained = 0
        while drained < MAX_HEADER_BYTES * 4 and (chunk := conn.recv(16 * 1024)):
            drained += len(chunk)


def _plain_http_head(req: _Request) -> tuple[str, int, bytes]:
    """(host, port, request head for the origin server) for an absolute-form request."""
    try:
        url = urlsplit(req.target)
    except ValueError as exc:  # e.g. "http://[::1/": urlsplit checks brackets itself
        raise BadRequest(f"malformed request target ({exc})") from None
    if url.scheme.lower() == "https":
        raise BadRequest("https:// requests go through CONNECT, not as a plain proxy request")
    if url.scheme.lower() != "http" or not url.netloc:
        raise BadRequest(
            "this is a proxy: send CONNECT host:port or an absolute-form http:// request"
        )
    if "@" in url.netloc:
        raise BadRequest("credentials in the request URL are not supported")
    host, port = parse_authority(url.netloc, 80)
    path = url.path or "/"
    if url.query:
        path += "?" + url.query
    if any(c in path for c in " \r\n"):
        raise BadRequest("malformed request target")
    dropped = set(_HOP_BY_HOP) | {"host"}
    for name, value in req.headers:
        if name.lower() == "connection":
            dropped |= {token.strip().lower() for token in value.split(",")}
    lines = [f"{req.method} {path} {req.version}", f"Host: {url.netloc}"]
    lines += [f"{name}: {value}" for name, value in req.headers if name.lower() not in dropped]
    lines.append("Connection: close")
    return host, port, ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


class EgressProxy(SocketServer):
    """An allow-listing HTTP proxy listening on ``socket_path`` (mode 0o666).

    ``socket_path``'s folder must exist; it is what the harness binds into the sandbox.
    Use as a context manager, or ``start()`` / ``stop()``.
    """

    def __init__(
        self,
        socket_path: Path,
        allow: Sequence[str],
        *,
        connect_timeout: float = 10.0,
        header_timeout: float = 30.0,
        max_connections: int = 128,
    ):
        super().__init__(socket_path, max_connections)
        self.allow = AllowList(allow)
        self.connect_timeout = connect_timeout
        self.header_timeout = header_timeout
        self._requests = self._denied = self._bytes_up = self._bytes_down = 0
        self._upstream_errors = self._malformed = 0
        self._hosts: dict[str, int] = {}
        self._denied_hosts: dict[str, int] = {}

    def stats(self) -> EgressStats:
        with self._lock:
            return EgressStats(
                requests=self._requests,
                denied=self._denied,
                bytes_up=self._bytes_up,
                bytes_down=self._bytes_down,
                hosts=dict(self._hosts),
                denied_hosts=dict(self._denied_hosts),
                upstream_errors=self._upstream_errors,
                malformed=self._malformed,
            )

    # -- bookkeeping ---------------------------------------------------------------------

    @staticmethod
    def _bump(counts: dict[str, int], key: str) -> None:
        if key not in counts and len(counts) >= MAX_TRACKED_NAMES:
            key = "<other>"
        counts[key] = counts.get(key, 0) + 1

    def _count_up(self, n: int) -> None:
        with self._lock:
            self._bytes_up += n

    def _count_down(self, n: int) -> None:
        with self._lock:
            self._bytes_down += n

    # -- serving -------------------------------------------------------------------------

    def _answer_busy(self, sock: socket.socket, text: str) -> None:
        sock.settimeout(LINGER_SECONDS)
        _reply(sock, 503, f"tmlbench egress: {text}")

    def _serve(self, conn: socket.socket) -> None:
        try:
            req = _read_head(conn, self.header_timeout)
            if req.method == "CONNECT":
                host, port = parse_authority(req.target, None)
                head = b""
            else:
                host, port, head = _plain_http_head(req)
        except BadRequest as exc:
            with self._lock:
                self._malformed += 1
            _reply(conn, exc.status, f"tmlbench egress: {exc}")
            return
        except OSError:  # header timeout, reset: nothing to answer
            return
        key = _key(host, port)
        if not self.allow.allows(host, port):
            with self._lock:
                self._denied += 1
                self._bump(self._denied_hosts, key)
            _reply(conn, 403, f"tmlbench egress: {key} is not in the agent's egress allow-list")
            return
        upstream, problem = self._connect(host, port)
        if upstream is None:
            _reply(conn, 502, f"tmlbench egress: cannot reach {key}: {problem}")
            return
        try:
            with self._lock:
                self._requests += 1
                self._bump(self._hosts, key)
            conn.settimeout(None)
            if req.method == "CONNECT":
                conn.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
            first = head + req.rest
            if first:
                self._count_up(len(first))
                upstream.sendall(first)
            splice(conn, upstream, self._count_up, self._count_down)
        except OSError:
            return
        finally:
            self._untrack(upstream)

    def _connect(self, host: str, port: int) -> tuple[socket.socket | None, str]:
        """(connected socket, "") or (None, what went wrong)."""
        try:
            upstream = socket.create_connection((host, port), timeout=self.connect_timeout)
        except OSError as exc:
            log.info("egress upstream %s unreachable: %s", _key(host, port), exc)
            with self._lock:
                self._upstream_errors += 1
            return None, str(exc) or type(exc).__name__
        upstream.settimeout(None)
        if not self._track(upstream):
            upstream.close()
            return None, "the egress proxy is stopping"
        return upstream, ""
