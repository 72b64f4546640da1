"""The provider's side of the gateway: where its base URL points, and connections to it.

The harness's own HTTP(S)_PROXY is used for remote providers, never for loopback ones (a
local server, a test stand-in). What the CLI sent is forwarded minus hop-by-hop headers and
every credential; the real key is added here.
"""

from __future__ import annotations

import base64
import contextlib
import http.client
import ipaddress
import socket
import ssl
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass

from runner.agents.gateway.client_connection import ClientRequest, header_values
from runner.agents.gateway.model_requests import Protocol
from runner.agents.gateway.routes import canonical_path

LOOPBACK_NAMES = frozenset({"localhost", "localhost.", "ip6-localhost"})

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


def is_loopback(host: str) -> bool:
    if host.lower() in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def proxy_for(scheme: str, host: str) -> tuple[str, int, str | None] | None:
    """The harness's own proxy for the provider (host, port, Proxy-Authorization), if any.

    A loopback provider (a local server, a test stand-in) is never reached through one.
    """
    if is_loopback(host):
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


@dataclass(frozen=True)
class ProviderOrigin:
    """The provider's base URL taken apart, and how it is reached (directly or by proxy)."""

    scheme: str
    host: str
    port: int
    netloc: str
    base_path: str  # "/v1"; "" for https://api.anthropic.com
    proxy: tuple[str, int, str | None] | None
    ssl_context: ssl.SSLContext | None

    @classmethod
    def parse(cls, base_url: str) -> ProviderOrigin:
        """ValueError naming ``base_url`` if it is not a plain http(s) URL the gateway can use."""
        url = urllib.parse.urlsplit(base_url)
        if url.scheme not in ("http", "https") or not url.hostname:
            raise ValueError(f"gateway base_url {base_url!r} must be an http(s):// URL")
        if url.query or url.fragment or url.username or url.password:
            raise ValueError(f"gateway base_url {base_url!r} must not have a query or credentials")
        try:
            port = url.port or (443 if url.scheme == "https" else 80)
        except ValueError:
            raise ValueError(f"gateway base_url {base_url!r} has an invalid port") from None
        base_path = url.path.rstrip("/")
        if base_path and canonical_path(base_path) != base_path:
            raise ValueError(
                f"gateway base_url {base_url!r} has an unusable path: write it canonical "
                "(letters, digits, '.', '_', ':', '-' and single '/', no percent-encoding)"
            )
        return cls(
            scheme=url.scheme,
            host=url.hostname,
            port=port,
            netloc=url.netloc,
            base_path=base_path,
            proxy=proxy_for(url.scheme, url.hostname),
            ssl_context=ssl.create_default_context() if url.scheme == "https" else None,
        )

    def request_target(self, target: str) -> str:
        """``target`` as the provider (or a plain-HTTP proxy in front of it) expects it."""
        if self.proxy is not None and self.scheme == "http":
            return f"http://{self.netloc}{target}"
        return target

    def connect(self, connect_timeout: float, request_timeout: float) -> http.client.HTTPConnection:
        """A connected HTTP(S) connection to the provider (through the proxy, if any)."""
        conn: http.client.HTTPConnection
        if self.proxy is not None:
            proxy_host, proxy_port, auth = self.proxy
            if self.scheme == "https":
                conn = http.client.HTTPSConnection(
                    proxy_host, proxy_port, timeout=connect_timeout, context=self.ssl_context
                )
                conn.set_tunnel(
                    self.host, self.port, headers={"Proxy-Authorization": auth} if auth else None
                )
            else:
                conn = http.client.HTTPConnection(proxy_host, proxy_port, timeout=connect_timeout)
        elif self.scheme == "https":
            conn = http.client.HTTPSConnection(
                self.host, self.port, timeout=connect_timeout, context=self.ssl_context
            )
        else:
            conn = http.client.HTTPConnection(self.host, self.port, timeout=connect_timeout)
        try:
            conn.connect()
        except BaseException:
            conn.close()
            raise
        sock = conn.sock
        assert sock is not None
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.settimeout(request_timeout)
        return conn


def forwarded_headers(
    request: ClientRequest, body: bytes, protocol: Protocol, api_key: str | None
) -> list[tuple[str, str]]:
    """The headers sent to the provider: the client's, minus the dropped ones, plus the key."""
    dropped = set(_REQUEST_DROPPED)
    for value in header_values(request.headers, "connection"):
        dropped |= {t.strip().lower() for t in value.split(",")}
    headers = [
        (n, v)
        for n, v in request.headers
        if n.lower() not in dropped and not n.lower().startswith("proxy-")
    ]
    headers.append(("Accept-Encoding", "identity"))
    if body or request.method in ("POST", "PUT", "PATCH"):
        headers.append(("Content-Length", str(len(body))))
    if api_key:
        if protocol == "anthropic-messages":
            headers.append(("x-api-key", api_key))
        else:
            headers.append(("Authorization", f"Bearer {api_key}"))
    return headers


class ProviderConnection:
    """One client connection's kept-alive connection to the provider.

    ``connect`` connects afresh (and registers the socket so that the gateway's stop closes
    it); ``release`` unregisters a socket; ``stopping`` says whether the gateway is stopping.
    """

    def __init__(
        self,
        connect: Callable[[], tuple[http.client.HTTPConnection, socket.socket]],
        release: Callable[[socket.socket], None],
        stopping: Callable[[], bool],
    ):
        self._connect = connect
        self._release = release
        self._stopping = stopping
        self.conn: http.client.HTTPConnection | None = None
        self.sock: socket.socket | None = None

    def send(
        self, method: str, target: str, headers: list[tuple[str, str]], body: bytes | None
    ) -> http.client.HTTPResponse:
        for _ in range(2):
            reused = self.conn is not None
            if self.conn is None:
                self.conn, self.sock = self._connect()
            try:
                self.conn.putrequest(method, target, skip_accept_encoding=True)
                for name, value in headers:
                    self.conn.putheader(name, value)
                self.conn.endheaders(body or None)
                return self.conn.getresponse()
            except (ConnectionResetError, BrokenPipeError, ConnectionAbortedError):
                # A kept-alive connection the provider closed meanwhile: once more, afresh.
                self.close()
                if not reused or self._stopping():
                    raise
            except BaseException:
                self.close()
                raise
        raise ConnectionError("the provider closed the connection twice")  # pragma: no cover

    def close(self) -> None:
        if self.sock is not None:
            self._release(self.sock)
            self.sock = None
        if self.conn is not None:
            with contextlib.suppress(Exception):
                self.conn.close()
            self.conn = None
