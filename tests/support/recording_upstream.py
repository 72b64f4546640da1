"""A provider gateway in front of a recording upstream, for tests of what the gateway forwards.

The upstream is a loopback HTTP/1.1 server that records every request it receives (method and
target as sent, query included) and answers from a queue (default: 200 ``{}``). Clients talk
to the gateway over its unix socket, as the sandbox's forwarder does.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import re
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from runner.agents.gateway import ProviderGateway

KEY = "sk-real-SECRET-routes-0123456789"
#: The base path of each protocol's provider, as the shipped agent specs have it.
BASE_PATHS = {"openai-chat": "/v1", "openai-responses": "/v1", "anthropic-messages": ""}


class RecordingUpstream:
    """Records ``(method, target)`` of every request; answers ``answers`` in order, then
    200 ``{}``."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str]] = []
        self.answers: list[tuple[int, bytes]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def _any(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                if length:
                    self.rfile.read(length)
                outer.seen.append((self.command, self.path))
                status, body = outer.answers.pop(0) if outer.answers else (200, b"{}")
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(body)

            do_GET = do_POST = do_DELETE = do_PUT = do_PATCH = do_HEAD = do_OPTIONS = _any

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    def __enter__(self) -> RecordingUpstream:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


class UnixHTTPConnection(http.client.HTTPConnection):
    """An HTTP connection to the gateway's unix socket."""

    def __init__(self, path: Path, timeout: float = 10.0):
        super().__init__("gateway", timeout=timeout)
        self.unix_path = str(path)

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        sock.connect(self.unix_path)
        self.sock = sock


def send_raw(path: Path, data: bytes, timeout: float = 5.0, *, one_response: bool = False) -> bytes:
    """Send raw bytes on a fresh connection; everything the gateway answers before closing.

    one_response: stop at the end of the first response that has a Content-Length (a
    well-formed request the gateway refuses keeps its connection alive: waiting for the close
    would wait out ``timeout``).
    """
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout)
        sock.connect(str(path))
        sock.sendall(data)
        out = b""
        with contextlib.suppress(OSError):
            while chunk := sock.recv(65536):
                out += chunk
                if one_response and _whole_response(out):
                    break
        return out


def _whole_response(data: bytes) -> bool:
    """Whether ``data`` starts with a whole response whose head gives its Content-Length."""
    head, separator, body = data.partition(b"\r\n\r\n")
    length = re.search(rb"(?im)^content-length:[ \t]*(\d+)\r?$", head)
    return bool(separator) and length is not None and len(body) >= int(length[1])


@dataclass
class GatewayUnderTest:
    gateway: ProviderGateway
    upstream: RecordingUpstream
    socket: Path
    transcript: Path
    _events: list[dict[str, Any]] = field(default_factory=list)

    def post(self, target: str, body: object) -> tuple[int, bytes]:
        conn = UnixHTTPConnection(self.socket)
        conn.request("POST", target, body=json.dumps(body), headers={"x-api-key": "placeholder"})
        response = conn.getresponse()
        data = response.read()
        conn.close()
        return response.status, data

    def events(self, event: str) -> list[dict[str, Any]]:
        """The transcript's lines of one kind (``model_call``, ``forbidden``, ...)."""
        lines = self.transcript.read_text().splitlines()
        return [e for e in map(json.loads, lines) if e["event"] == event]


@contextlib.contextmanager
def recording_gateway(tmp_path: Path, protocol: str) -> Iterator[GatewayUnderTest]:
    """A gateway for ``protocol`` in front of a :class:`RecordingUpstream`; on leaving, the
    transcript is checked to hold no trace of the key."""
    with RecordingUpstream() as upstream:
        transcript = tmp_path / "transcript.jsonl"
        gateway = ProviderGateway(
            tmp_path / "gw.sock",
            protocol=protocol,  # type: ignore[arg-type]
            base_url=upstream.url + BASE_PATHS[protocol],
            api_key=KEY,
            transcript_path=transcript,
        )
        with gateway:
            yield GatewayUnderTest(gateway, upstream, tmp_path / "gw.sock", transcript)
        assert "SECRET" not in transcript.read_text()
