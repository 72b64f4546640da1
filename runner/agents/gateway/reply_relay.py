"""Streaming one provider reply back to the client, parsing it for usage as it passes."""

from __future__ import annotations

import contextlib
import http.client
import socket
import time
from collections.abc import Callable

from runner.agents.gateway.client_connection import (
    BAD_VALUE,
    BUFSIZE,
    TOKEN,
    WRITE_TIMEOUT,
    ClientRequest,
    reason_phrase,
    simple_response,
)
from runner.agents.gateway.model_requests import Protocol
from runner.agents.gateway.replies import Reply, error_of_bytes
from runner.agents.gateway.reply_parser import ReplyParser
from runner.agents.redaction import SecretForms

MAX_ERROR_BODY = 64 * 1024  # error replies kept to find their code and message
# The provider's headers the client gets (every other one is dropped: a provider or proxy
# that reflects the request's Authorization header must not hand the key on): what the
# CLIs read of a reply (grepped from Claude Code, Codex, OpenCode, Kilo and the Python
# SDKs): its type, retry and rate-limit advice, request ids, and Codex's model headers.
RELAYED_HEADERS = frozenset(
    {
        "content-type",
        "retry-after",
        "retry-after-ms",
        "x-should-retry",
        "request-id",
        "x-request-id",
        "openai-model",
        "x-reasoning-included",
        "x-models-etag",
    }
)
RELAYED_PREFIXES = ("x-ratelimit-", "anthropic-ratelimit-")
#: The error code of the gateway's 502 for a reply in an encoding it cannot redact.
ENCODED_REPLY = "provider_encoded_reply"

# kind, status, seconds, reply, interrupted: the call that counts a forwarded request
Account = Callable[[Protocol | None, int, float, Reply | None, str | None], None]


def relayed_headers(response: http.client.HTTPResponse, forms: SecretForms) -> list[str]:
    """The provider's header lines the client gets: the allowed ones, values redacted."""
    lines = []
    for name, value in response.getheaders():
        lowered = name.lower()
        if lowered in RELAYED_HEADERS or lowered.startswith(RELAYED_PREFIXES):
            value = forms.redact(value.encode("latin-1", "replace")).decode("latin-1")
            if TOKEN.fullmatch(name) and not BAD_VALUE.search(value):
                lines.append(f"{name}: {value}")
    return lines


def unreadable_encoding(response: http.client.HTTPResponse) -> str | None:
    """The header that makes the reply's bytes unreadable as they pass, or None: the gateway
    asks for ``identity``, and a compressed (or otherwise encoded) body would carry the key in
    a form no redaction finds. Only the header's name is said: its value is provider text."""
    for header, plain in (("Content-Encoding", {"identity"}), ("Transfer-Encoding", {"chunked"})):
        for value in response.headers.get_all(header) or []:
            codings = {c.strip().lower() for c in value.split(",")} - {""}
            if codings - plain:
                return header
    return None


def response_head(
    request: ClientRequest, response: http.client.HTTPResponse, no_body: bool, forms: SecretForms
) -> tuple[bytes, bool, bool]:
    """The head sent to the client, whether its body goes chunked, and whether to keep alive.

    The provider's allowed headers pass (:func:`relayed_headers`) under the status's own
    reason phrase (the provider's could echo anything); framing is the gateway's own:
    Content-Length if the provider gave one (redaction keeps the length), else chunked
    (HTTP/1.1) or the end of the connection (HTTP/1.0).
    """
    status = response.status
    keep_alive = request.keep_alive
    chunked = False
    lines = [f"HTTP/1.1 {status} {reason_phrase(status, '')}", *relayed_headers(response, forms)]
    length = response.length if not response.chunked else None
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
    return head, chunked, keep_alive


class ReplyRelay:
    """Relays ``response`` to the client on ``sock``; ``run()`` once, then read the results.

    After ``run()``: ``reply`` (usage, text, error) and ``seconds`` as counted by ``account``;
    ``interrupted`` (``"client"``, ``"upstream"``, ``"stopped"`` or None); ``client_gone``;
    ``keep_alive`` (whether the framing lets the client connection go on).
    """

    def __init__(
        self,
        sock: socket.socket,
        request: ClientRequest,
        response: http.client.HTTPResponse,
        kind: Protocol | None,
        *,
        forms: SecretForms,
        started: float,
        account: Account,
        stopping: Callable[[], bool],
    ):
        self._sock = sock
        self._response = response
        self._kind = kind
        self._forms = forms
        self._redactor = forms.stream()  # every body byte toward the client passes it
        self._started = started
        self._account_with = account
        self._stopping = stopping
        self.status = response.status
        self.encoding = unreadable_encoding(response)
        content_type = (response.getheader("Content-Type") or "").lower()
        self.event_stream = "text/event-stream" in content_type
        self._parser = (
            ReplyParser(kind, event_stream=self.event_stream)
            if kind is not None and 200 <= self.status < 300
            else None
        )
        self._error_body = bytearray() if self.status >= 400 else None
        self._no_body = request.method == "HEAD" or self.status in (204, 304) or self.status < 200
        self._head, self._chunked, self.keep_alive = response_head(
            request, response, self._no_body, forms
        )
        # The head goes out with the first body bytes (one write, so a Nagle-bound TCP hop
        # behind us sends one segment); an event stream's head goes out at once.
        self._pending = b""
        self._accounted = False
        self.client_gone = False
        self.interrupted: str | None = None
        self.reply: Reply | None = None
        self.seconds = 0.0

    def run(self) -> None:
        self._sock.settimeout(WRITE_TIMEOUT)
        if self.encoding is not None:
            self._refuse_encoding(self.encoding)
            return
        if self._no_body or self.event_stream:
            self._send(self._head)
        else:
            self._pending = self._head
        if self._no_body:
            with contextlib.suppress(OSError, http.client.HTTPException, ValueError):
                self._response.read()  # b"": marks it done so the connection is reusable
        else:
            self._copy_body()
        if self.interrupted == "upstream" and self._pending:  # nothing sent yet: say so
            self._send(
                simple_response(
                    502, "tmlbench gateway: the provider broke off its reply", close=True
                )
            )
        if self.client_gone and not self._accounted:
            self.interrupted = "stopped" if self._stopping() else "client"
        if not self._accounted:
            self._account()
        if self.interrupted is None and not self.client_gone:
            if not self._response.isclosed():
                with contextlib.suppress(OSError, http.client.HTTPException, ValueError):
                    self._response.read()  # b"" at the end of a Content-Length body
            self._send(self._pending + b"0\r\n\r\n" if self._chunked else self._pending)

    def _copy_body(self) -> None:
        response = self._response
        while not self.client_gone:
            try:
                data = response.read1(BUFSIZE)
            except (OSError, http.client.HTTPException, ValueError):
                self.interrupted = "stopped" if self._stopping() else "upstream"
                return
            # The held tail goes out only at the body's regular end (a body broken off may
            # end in most of a key); redaction keeps the length: Content-Length stays right.
            if not data or response.length == 0:
                data = self._redactor.feed(data) + self._redactor.finish()
                if not data:
                    return
            else:
                data = self._redactor.feed(data)
                if not data:
                    continue
            if self._parser is not None:
                self._parser.feed(data)
            error_body = self._error_body
            if error_body is not None and len(error_body) < MAX_ERROR_BODY:
                error_body += data[: MAX_ERROR_BODY - len(error_body)]
            if response.length == 0:  # that was the last of a Content-Length body
                self._account()
            framed = b"%x\r\n%b\r\n" % (len(data), data) if self._chunked else data
            self._send(self._pending + framed)
            self._pending = b""

    def _refuse_encoding(self, encoding: str) -> None:
        """Answer a reply the gateway cannot redact with its own 502: a provider fault."""
        message = (
            f"the provider sent its reply with a {encoding} other than identity, which the "
            "gateway asked for; an encoded reply cannot be checked for the key: not relayed"
        )
        self.status = 502
        self._parser = self._error_body = None
        self.keep_alive = False
        self.reply = Reply(error=(ENCODED_REPLY, message))
        self._accounted = True
        self.seconds = time.monotonic() - self._started
        self._account_with(self._kind, self.status, self.seconds, self.reply, None)
        self._send(simple_response(502, f"tmlbench gateway: {message}", close=True))

    def _account(self) -> None:
        # Before the reply's last bytes go out: a client that has the whole reply finds it
        # counted in the stats already.
        self._accounted = True
        self.reply = self._parser.finish() if self._parser is not None else None
        if self._error_body is not None:
            retry_after = self._forms.redact_text(self._response.getheader("Retry-After") or "")
            self.reply = Reply(error=error_of_bytes(bytes(self._error_body)))
            self.reply.retry_after = retry_after[:100] if retry_after else None
        self.seconds = time.monotonic() - self._started
        self._account_with(self._kind, self.status, self.seconds, self.reply, self.interrupted)

    def _send(self, data: bytes) -> None:
        try:
            self._sock.sendall(data)
        except OSError:
            self.client_gone = True
