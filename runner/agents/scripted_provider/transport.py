"""The HTTP plumbing of the scripted provider: reading a request body, writing an answer.

One request per connection, so nothing idles open; handler threads are not daemons, so
closing the server joins them all, and a silent client is woken by shutting its reads.
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Protocol

from .protocols import status_phrase

#: A request body larger than this is refused with 413 (real agents send a few MB at most).
MAX_REQUEST_BYTES = 32 * 1024 * 1024
# Shutdown interrupts hangs and delays at once; this only bounds a silent client.
_SOCKET_TIMEOUT = 1.0
THREAD_PREFIX = "scripted-provider"


@dataclass
class Answer:
    """What the provider sends back for one request."""

    status: int
    payload: object = None  # a JSON document, or
    events: list[bytes] | None = None  # server-sent events, streamed
    headers: dict[str, str] = field(default_factory=dict)
    wait: float = 0.0  # seconds to stay silent first, cut short by shutdown
    # None: a complete body; "close": a close-delimited body, cut (a JSON document is sent
    # half); "chunked": a chunked body that stops without its terminating chunk.
    cut: str | None = None


class BodyTooLarge(Exception):
    """The request body exceeds MAX_REQUEST_BYTES."""


class RequestHandling(Protocol):
    """What the server hands each request to (the ScriptedProvider)."""

    def handle(self, handler: RequestHandler, method: str) -> None: ...


def read_body(handler: RequestHandler) -> bytes:
    """The request body, framed by Content-Length or chunked, at most MAX_REQUEST_BYTES."""
    if "chunked" in handler.headers.get("Transfer-Encoding", "").lower():
        parts: list[bytes] = []
        size = 0
        while True:
            line = handler.rfile.readline(1024)
            length = int(line.split(b";", 1)[0].strip() or b"x", 16)
            if length == 0:
                while handler.rfile.readline(1024).strip():
                    pass  # trailers
                return b"".join(parts)
            size += length
            if size > MAX_REQUEST_BYTES:
                raise BodyTooLarge
            parts.append(handler.rfile.read(length))
            handler.rfile.readline(8)  # the CRLF after the chunk
    length = int(handler.headers.get("Content-Length") or 0)
    if length > MAX_REQUEST_BYTES:
        raise BodyTooLarge
    return handler.rfile.read(length) if length > 0 else b""


def write_answer(handler: RequestHandler, answer: Answer) -> None:
    handler.close_connection = True  # one request per connection: nothing idles open
    try:
        handler.send_response(answer.status, status_phrase(answer.status))
        for name, value in answer.headers.items():
            handler.send_header(name, value)
        handler.send_header("Connection", "close")
        if answer.events is None:
            data = json.dumps(answer.payload).encode()
            handler.send_header("Content-Type", "application/json")
            if answer.cut is None:
                handler.send_header("Content-Length", str(len(data)))
            parts = [data] if answer.cut is None else [data[: len(data) // 2]]
        else:
            handler.send_header("Content-Type", "text/event-stream; charset=utf-8")
            handler.send_header("Cache-Control", "no-cache")
            parts = answer.events
        chunked = answer.cut == "chunked" or (answer.events is not None and answer.cut is None)
        if chunked:
            handler.send_header("Transfer-Encoding", "chunked")
        handler.end_headers()
        for part in parts:
            handler.wfile.write(b"%x\r\n%s\r\n" % (len(part), part) if chunked else part)
        if chunked and answer.cut is None:
            handler.wfile.write(b"0\r\n\r\n")
        # A cut body ends here: the handler closes the connection (close_connection above).
    except OSError:
        pass  # the caller gave up (e.g. its timeout fired during a hang): nothing to tell


class ProviderHTTPServer(ThreadingHTTPServer):
    """Non-daemon handlers, so ``server_close()`` joins them all (it skips daemon threads)."""

    daemon_threads = False
    provider: RequestHandling

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
        threading.current_thread().name = f"{THREAD_PREFIX}-handler:{self.server_address[1]}"
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


class RequestHandler(BaseHTTPRequestHandler):
    server: ProviderHTTPServer
    protocol_version = "HTTP/1.1"  # chunked event streams, 100-continue; every answer closes
    timeout = _SOCKET_TIMEOUT

    def do_GET(self) -> None:
        self.server.provider.handle(self, "GET")

    def do_POST(self) -> None:
        self.server.provider.handle(self, "POST")

    def log_message(self, format: str, *args: Any) -> None:
        pass  # requests are recorded in ScriptedProvider.requests, not printed
