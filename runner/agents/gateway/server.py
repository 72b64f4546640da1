"""The provider gateway's HTTP/1.1 server (see the package docstring for the contract).

One thread per client connection reads a request (:mod:`.client_connection`), forwards it
over that connection's kept-alive connection to the provider (:mod:`.provider`), streams the
reply back (:mod:`.reply_relay`), counts it (:mod:`.stats`) and writes its transcript line
(:mod:`.transcript`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import http.client
import json
import logging
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from runner.agents.gateway.call_outcomes import TIMED_OUT, UNREACHABLE, classify
from runner.agents.gateway.client_connection import (
    WRITE_TIMEOUT,
    BadRequest,
    ClientConnection,
    ClientRequest,
    error_response,
    read_request,
    reply_and_close,
    simple_response,
)
from runner.agents.gateway.model_requests import PROTOCOLS, Protocol, prepare_body
from runner.agents.gateway.provider import ProviderConnection, ProviderOrigin, forwarded_headers
from runner.agents.gateway.replies import Reply
from runner.agents.gateway.reply_relay import ReplyRelay
from runner.agents.gateway.request_rate import RequestRate
from runner.agents.gateway.routes import MAX_SHOWN_METHOD, Allowed, route, shown
from runner.agents.gateway.spend import Ceiling, SpendCeilings, SpendMeter, refusal_response
from runner.agents.gateway.stats import GatewayStats, StatsTally, redact_masked
from runner.agents.gateway.transcript import MAX_TRANSCRIPT_BYTES, Transcript, capped_request
from runner.agents.redaction import secret_forms
from runner.agents.socket_server import SocketServer

log = logging.getLogger(__name__)

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
CONNECT_TIMEOUT = 30.0  # TCP (+ TLS, + proxy tunnel) to the provider
_NOT_PARSED = object()  # a model call's body not summarized yet


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
        requests_per_minute: int | None = None,
        spend: SpendCeilings | None = None,
    ):
        if protocol not in PROTOCOLS:
            raise ValueError(f"unknown gateway protocol {protocol!r} (expected one of {PROTOCOLS})")
        self._origin = ProviderOrigin.parse(base_url)
        super().__init__(socket_path, max_connections)
        self.protocol: Protocol = protocol
        self.base_url = base_url
        self._base_path = self._origin.base_path
        self._api_key = api_key or None
        # Never passed on to the CLI nor written down, should the provider echo it.
        self._forms = secret_forms(self._api_key)
        self.request_timeout = request_timeout
        self.connect_timeout = min(connect_timeout, request_timeout)
        self.max_body_bytes = max_body_bytes
        self.max_buffered_body_bytes = max(max_buffered_body_bytes, max_body_bytes)
        self._buffered_body_bytes = 0
        self._parse_alone = threading.Lock()
        self.header_timeout = header_timeout
        self.idle_timeout = idle_timeout
        self.transcript_path = Path(transcript_path)
        self._transcript = Transcript(self.transcript_path, self._forms, max_transcript_bytes)
        self._tally = StatsTally(self._api_key)
        # The agent spec's request rate (None: no limit): calls over it are refused here.
        self._rate = RequestRate(requests_per_minute) if requests_per_minute else None
        # The attempt's spend ceilings (None: none): calls past them are refused here.
        self.spend = SpendMeter(spend) if spend is not None else None

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
            stats = dataclasses.asdict(self.stats())
            self._transcript.write_closing("gateway_stop", stats=stats)
        self._transcript.close()

    def stats(self) -> GatewayStats:
        return self._tally.snapshot()

    def transcript_note(self) -> str | None:
        """What the record notes if the transcript reached its host budget (None: whole)."""
        return self._transcript.note()

    # -- serving ---------------------------------------------------------------------------

    def _answer_busy(self, sock: socket.socket, text: str) -> None:
        self._tally.reject()
        reply_and_close(sock, 503, text)

    def _serve(self, sock: socket.socket) -> None:
        client = ClientConnection(sock, self._reserve_body)
        upstream = ProviderConnection(self._connect, self._untrack, lambda: self._stopping)
        try:
            while not self._stopping:
                try:
                    try:
                        request = read_request(
                            client,
                            router=self._route,
                            max_body_bytes=self.max_body_bytes,
                            idle_timeout=self.idle_timeout,
                            header_timeout=self.header_timeout,
                        )
                    except BadRequest as exc:
                        self._tally.reject()
                        reply_and_close(sock, exc.status, str(exc))
                        return
                    except OSError:  # a silent client, a reset, or stop(): nothing to answer
                        return
                    if request is None:
                        return
                    if request.allowed is None:
                        if not self._answer_forbidden(client, request):
                            return
                    elif not self._exchange(client, upstream, request, request.allowed):
                        return
                    if not request.keep_alive:
                        return
                finally:
                    self._release_body(client)
        finally:
            upstream.close()

    def _route(self, method: str, target: str) -> Allowed | None:
        return route(self.protocol, method, target, self._base_path)

    def _answer_forbidden(self, client: ClientConnection, request: ClientRequest) -> bool:
        """Refuse a request off the allow-list (:mod:`.routes`): 403 in the protocol's error
        shape, never forwarded, counted and transcribed; whether the connection goes on."""
        self._tally.forbid()
        method, target = shown(request.method, MAX_SHOWN_METHOD), shown(request.target)
        self._transcript.write("forbidden", method=method, target=target)
        message = (
            f"tmlbench gateway: {method} {target} is not forwarded: this gateway passes only "
            f"the model calls of the {self.protocol} protocol (and its model list)"
        )
        answer = error_response(
            self.protocol,
            403,
            "permission_error",
            "forbidden",
            message,
            close=not request.keep_alive,
        )
        if request.method == "HEAD":  # its answer has no body (RFC 9110 9.3.2)
            answer = answer[: answer.index(b"\r\n\r\n") + 4]
        try:
            client.sock.settimeout(WRITE_TIMEOUT)
            client.sock.sendall(answer)
        except OSError:
            return False
        return request.keep_alive

    def _reserve_body(self, size: int) -> None:
        with self._lock:
            if self._buffered_body_bytes + size > self.max_buffered_body_bytes:
                raise BadRequest(
                    503,
                    f"the gateway holds at most {self.max_buffered_body_bytes:,} bytes of "
                    "request bodies at once and other requests use them now; retry shortly",
                )
            self._buffered_body_bytes += size

    def _release_body(self, client: ClientConnection) -> None:
        with self._lock:
            self._buffered_body_bytes -= client.reserved
        client.reserved = 0

    def _exchange(
        self,
        client: ClientConnection,
        upstream: ProviderConnection,
        request: ClientRequest,
        allowed: Allowed,
    ) -> bool:
        """Forward one allowed request (its canonical target) and stream its reply back;
        whether the connection goes on."""
        kind = allowed.model_call
        call = self._tally.start_call() if kind is not None else None
        if kind is not None and call is not None and self._rate is not None:
            wait = self._rate.admit()
            if wait is not None:
                return self._answer_rate_limited(client, request, kind, call, wait)
        if kind is not None and call is not None and self.spend is not None:
            ceiling = self.spend.admit()
            if ceiling is not None:
                return self._answer_spent(client, request, kind, call, ceiling)
        body, summary = self._prepared_body(kind, request.body)
        headers = forwarded_headers(request, body, self.protocol, self._api_key)
        target = self._origin.request_target(allowed.target)
        started = time.monotonic()
        try:
            response = upstream.send(request.method, target, headers, body)
        except (OSError, http.client.HTTPException) as exc:
            seconds = time.monotonic() - started
            return self._answer_unreachable(client, request, kind, call, summary, exc, seconds)
        relay = ReplyRelay(
            client.sock,
            request,
            response,
            kind,
            forms=self._forms,
            started=started,
            account=lambda *counted: self._account(call, *counted),
            stopping=lambda: self._stopping,
        )
        relay.run()
        if (
            relay.interrupted is not None
            or relay.client_gone
            or not response.isclosed()
            or response.will_close
        ):
            upstream.close()
        self._log(
            kind,
            call,
            request,
            relay.status,
            relay.seconds,
            summary,
            relay.event_stream,
            relay.reply,
            relay.interrupted,
        )
        return relay.interrupted is None and not relay.client_gone and relay.keep_alive

    def _answer_rate_limited(
        self, client: ClientConnection, request: ClientRequest, kind: Protocol, call: int, wait: int
    ) -> bool:
        """Refuse a model call over the agent's request rate: 429 + Retry-After, in the
        protocol's error shape, never forwarded; whether the connection goes on."""
        assert self._rate is not None
        self._tally.rate_limited(call)
        message = (
            f"tmlbench gateway: this agent may start {self._rate.per_minute} model calls a "
            f"minute (its spec's gateway.requests_per_minute); retry in {wait} s"
        )
        answer = error_response(
            kind,
            429,
            "rate_limit_error",
            "rate_limit_exceeded",
            message,
            close=not request.keep_alive,
            headers={"Retry-After": wait},
        )
        self._transcript.write("rate_limited", path=request.path[:500], retry_after=wait, call=call)
        try:
            client.sock.settimeout(WRITE_TIMEOUT)
            client.sock.sendall(answer)
        except OSError:
            return False
        return request.keep_alive

    def _answer_spent(
        self, client: ClientConnection, request: ClientRequest, kind: Protocol, call: int,
        ceiling: Ceiling,
    ) -> bool:  # fmt: skip
        """Refuse a model call past the attempt's spend ceilings, in the error its protocol's
        clients give up on (:func:`.spend.refusal`), never forwarded; whether the connection
        goes on. The sandbox ends the attempt on it (``limit_exceeded="spend"``)."""
        self._tally.spend_refused(call)
        self._transcript.write("spend_refused", path=request.path[:500], ceiling=ceiling, call=call)
        try:
            client.sock.settimeout(WRITE_TIMEOUT)
            client.sock.sendall(refusal_response(kind, ceiling, request.keep_alive))
        except OSError:
            return False
        return request.keep_alive

    def _account(
        self,
        call: int | None,
        kind: Protocol | None,
        status: int,
        seconds: float,
        reply: Reply | None,
        interrupted: str | None,
    ) -> None:
        """Count a forwarded request's end: in the stats, and a model call's usage against
        the spend ceilings."""
        self._tally.account(call, kind, status, seconds, reply, interrupted)
        if call is not None and kind is not None and self.spend is not None:
            usage = reply.usage if reply is not None else None
            self.spend.settle(usage, answered=200 <= status < 300)

    def _prepared_body(self, kind: Protocol | None, body: bytes) -> tuple[bytes, Any]:
        """The body to forward, and its transcript summary (``_NOT_PARSED``: not yet).

        Parsed before forwarding only if it may need include_usage; else after the reply.
        Only the transcript's summary is kept: the parsed body would hold far more memory.
        """
        summary: Any = _NOT_PARSED
        if kind == "openai-chat" and (b'"stream"' in body or b"\\u" in body):
            with self._parsing(body) as parse:
                if parse:
                    body, parsed = prepare_body(kind, body)
                    if not self._transcript.full:
                        summary = capped_request(kind, parsed)
                    del parsed
        return body, summary

    def _answer_unreachable(
        self,
        client: ClientConnection,
        request: ClientRequest,
        kind: Protocol | None,
        call: int | None,
        summary: Any,
        exc: Exception,
        seconds: float,
    ) -> bool:
        """Count and answer a request the provider did not answer (502/504, or the gateway
        stopped); whether the connection goes on."""
        if self._stopping:
            reply = Reply(error=(None, "the gateway stopped before the provider answered"))
            self._account(call, kind, 0, seconds, reply, "stopped")
            self._log(kind, call, request, 0, seconds, summary, False, reply, "stopped")
            return False
        timed_out = isinstance(exc, TimeoutError)
        status = 504 if timed_out else 502
        problem = redact_masked(self._forms.redact_text(f"{type(exc).__name__}: {exc}"))[:500]
        log.info("gateway: provider unreachable: %s", problem)
        code = TIMED_OUT if timed_out else UNREACHABLE
        reply = Reply(error=(code, f"cannot reach the provider: {problem}"))
        self._account(call, kind, status, seconds, reply, None)
        self._log(kind, call, request, status, seconds, summary, False, reply, None)
        text = f"tmlbench gateway: cannot reach the provider: {problem}"
        try:
            client.sock.settimeout(WRITE_TIMEOUT)
            client.sock.sendall(simple_response(status, text, close=not request.keep_alive))
        except OSError:
            return False
        return True

    def _log(
        self,
        kind: Protocol | None,
        call: int | None,
        request: ClientRequest,
        status: int,
        seconds: float,
        summary: Any,
        event_stream: bool,
        reply: Reply | None,
        interrupted: str | None,
    ) -> None:
        """The transcript line of one forwarded request (after the client has its reply)."""
        if self._transcript.full:  # nothing more is written: spend no parsing on it
            self._transcript.write("model_call" if kind is not None else "request")
            return
        if kind is not None and summary is _NOT_PARSED:
            summary = None
            with self._parsing(request.body) as parse:
                if parse:
                    with contextlib.suppress(ValueError, RecursionError):
                        summary = capped_request(kind, json.loads(request.body))
                else:
                    summary = {"cut": f"not parsed: over {MAX_PARSE_VALUES:,} commas and brackets"}
        # Classified as the tally classified it (the same pure rule on the same reply).
        usage_unknown = (
            kind is not None and classify(kind, status, reply, interrupted).usage_unknown
        )
        self._transcript.forwarded(
            kind,
            call,
            request,
            status=status,
            seconds=seconds,
            summary=summary,
            event_stream=event_stream,
            reply=reply,
            interrupted=interrupted,
            usage_unknown=usage_unknown,
        )

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

    def _connect(self) -> tuple[http.client.HTTPConnection, socket.socket]:
        """A new connection to the provider, its socket tracked so that stop() closes it."""
        conn = self._origin.connect(self.connect_timeout, self.request_timeout)
        sock = conn.sock
        assert sock is not None
        if not self._track(sock):
            conn.close()
            raise ConnectionAbortedError("the gateway is stopping")
        return conn, sock
