"""A hostile provider on loopback: it turns the credential the gateway sends it back on the
gateway, reflected in its headers and bodies, in the forms a reflecting provider or proxy
produces, and written in small pieces so that the gateway reads them split.

    with HostileUpstream(lambda request: Scripted(pieces=[...], framing="chunked")) as up:
        ... a ProviderGateway with base_url=up.url + "/v1" ...

``answer`` sees each request (with the credential it carried, ``request.key``) and says what
to send: status line, headers and body pieces, framed by Content-Length, chunked (one chunk a
piece) or by closing the connection. Between two pieces the upstream pauses ``pause`` seconds
with TCP_NODELAY on, so each piece reaches the gateway as its own segment.

:func:`reflections` are the key's reflected forms, each with an oracle (:meth:`Reflection.
leaked`) that says, independently of the gateway's redactor, whether what the client got at
that place still gives the key away.
"""

from __future__ import annotations

import base64
import contextlib
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal


@dataclass
class Received:
    method: str
    path: str
    headers: list[tuple[str, str]]
    body: bytes

    @property
    def key(self) -> str:
        """The credential the request carried (Bearer token or x-api-key), "" if none."""
        for name, value in self.headers:
            if name.lower() == "authorization" and value.startswith("Bearer "):
                return value[len("Bearer ") :]
            if name.lower() == "x-api-key":
                return value
        return ""


@dataclass
class Scripted:
    status: int = 200
    reason: str = "OK"
    headers: list[tuple[str, str]] = field(default_factory=list)
    pieces: list[bytes] = field(default_factory=list)
    framing: Literal["length", "chunked", "close"] = "length"
    raw: bytes | None = None  # sent as it is instead (a broken status line, ...), then closed


class HostileUpstream:
    """A raw HTTP/1.1 server on 127.0.0.1 that answers as ``answer`` says; see the module doc."""

    def __init__(self, answer: Callable[[Received], Scripted], pause: float = 0.001):
        self.answer = answer
        self.pause = pause
        self.received: list[Received] = []
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._listener.getsockname()[1]}"
        self._stop = threading.Event()
        self._conns: list[socket.socket] = []
        self._thread = threading.Thread(target=self._accept, daemon=True)

    def __enter__(self) -> HostileUpstream:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)  # wakes the accept()
        self._listener.close()
        for conn in list(self._conns):
            with contextlib.suppress(OSError):
                conn.close()
        self._thread.join(timeout=5)

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return
            self._conns.append(conn)
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        conn.settimeout(30)
        buf = b""
        with contextlib.suppress(OSError), conn:
            while not self._stop.is_set():
                while b"\r\n\r\n" not in buf:
                    data = conn.recv(65536)
                    if not data:
                        return
                    buf += data
                head, buf = buf.split(b"\r\n\r\n", 1)
                lines = head.decode("latin-1").split("\r\n")
                method, path, _ = lines[0].split(" ", 2)
                headers = [tuple(x.strip() for x in h.split(":", 1)) for h in lines[1:]]
                length = next((int(v) for n, v in headers if n.lower() == "content-length"), 0)
                while len(buf) < length:
                    data = conn.recv(65536)
                    if not data:
                        return
                    buf += data
                request = Received(method, path, headers, buf[:length])  # type: ignore[arg-type]
                buf = buf[length:]
                self.received.append(request)
                scripted = self.answer(request)
                self._send(conn, scripted)
                if scripted.framing == "close" or scripted.raw is not None:
                    return

    def _send(self, conn: socket.socket, scripted: Scripted) -> None:
        if scripted.raw is not None:
            conn.sendall(scripted.raw)
            return
        head = [
            f"HTTP/1.1 {scripted.status} {scripted.reason}",
            *(f"{n}: {v}" for n, v in scripted.headers),
        ]
        if scripted.framing == "length":
            head.append(f"Content-Length: {sum(len(p) for p in scripted.pieces)}")
        elif scripted.framing == "chunked":
            head.append("Transfer-Encoding: chunked")
        else:
            head.append("Connection: close")
        conn.sendall(("\r\n".join(head) + "\r\n\r\n").encode("latin-1"))
        for piece in scripted.pieces:
            time.sleep(self.pause)
            if scripted.framing == "chunked":
                piece = b"%x\r\n%b\r\n" % (len(piece), piece) if piece else b""
            conn.sendall(piece)
        if scripted.framing == "chunked":
            conn.sendall(b"0\r\n\r\n")


def split_everywhere(head: bytes, segment: bytes, tail: bytes) -> tuple[bytes, list[bytes]]:
    """``head + segment * len(segment) + tail`` and its pieces: the j-th copy of ``segment``
    is cut at its offset j, so that some read ends at every offset of it."""
    pieces, rest = [], head
    for j in range(len(segment)):
        pieces.append(rest + segment[:j])
        rest = segment[j:]
    pieces.append(rest + tail)
    return b"".join(pieces), pieces


# -- the key's reflected forms ------------------------------------------------------------


@dataclass(frozen=True)
class Reflection:
    """One reflected form of ``key``: ``text`` as the provider writes it (ASCII, safe inside
    a JSON string, an SSE line and a header value)."""

    name: str
    key: str
    text: str
    base64_prefix: bytes | None = None  # base64 forms: the bytes encoded before the key
    urlsafe: bool = False

    def leaked(self, got: str) -> bool:
        """Whether ``got`` (what the client received in this form's place) gives the key
        away: for the spelled forms any character left; for base64, more than two of the
        key's bytes decoded back (the characters at the key's two ends mix in bits of the
        neighbouring bytes and stay: less than 12 bits of the key)."""
        if self.base64_prefix is None:
            return got != "*" * len(self.text)
        alphabet = got.replace("*", "A")
        decoded = (base64.urlsafe_b64decode if self.urlsafe else base64.b64decode)(alphabet)
        start = len(self.base64_prefix)
        key = self.key.encode()
        return sum(a == b for a, b in zip(decoded[start : start + len(key)], key, strict=True)) > 2


def _json_escaped(text: str, every: int) -> str:
    r"""``text`` with every ``every``-th character a ``\uXXXX`` escape (hex case mixed),
    slashes as ``\/``."""
    out = []
    for i, char in enumerate(text):
        if i % every == 0:
            escape = f"\\u{ord(char):04x}"
            out.append(escape.upper().replace("\\U", "\\u") if i % 2 else escape)
        else:
            out.append("\\/" if char == "/" else char)
    return "".join(out)


def _percent(text: str, every: int) -> str:
    """``text`` with every ``every``-th byte ``%XX`` (hex case mixed)."""
    return "".join(
        (f"%{b:02X}" if i % 4 else f"%{b:02x}") if i % every == 0 else chr(b)
        for i, b in enumerate(text.encode())
    )


def reflections(key: str) -> list[Reflection]:
    """The forms in which a reflecting provider or proxy gives ``key`` back."""
    forms = [
        Reflection("literal", key, key),
        Reflection("json-escaped", key, _json_escaped(key, 1)),
        Reflection("json-some-escaped", key, _json_escaped(key, 3)),
        Reflection("json-escaped-in-json", key, _json_escaped(key, 2).replace("\\", "\\\\")),
        Reflection("percent-encoded", key, _percent(key, 1)),
        Reflection("percent-some-encoded", key, _percent(key, 2)),
        Reflection("percent-encoded-twice", key, _percent(key, 1).replace("%", "%25")),
    ]
    for prefix in (b"", b"Bearer ", b"user:", b"ab:"):  # alignments 0, 1, 2, 0
        for urlsafe in (False, True):
            encode = base64.urlsafe_b64encode if urlsafe else base64.b64encode
            text = encode(prefix + key.encode()).decode()
            name = f"base64{'url' if urlsafe else ''}({prefix.decode()}key)"
            forms.append(Reflection(name, key, text, prefix, urlsafe))
    return forms
