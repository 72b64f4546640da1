"""Provider-only egress: the host proxy over its unix socket, the forwarder, and both in bwrap.

Everything is real: loopback servers, the proxy on a unix socket, the forwarder as a
process, and a stand-in agent CLI (tests/sandbox_agents/egress_client.py) in bubblewrap.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import ClassVar

import pytest

from runner.agents.egress import (
    FORWARDER_DIR,
    FORWARDER_INSIDE,
    SOCKET_DIR_INSIDE,
    SOCKET_INSIDE,
    SOCKET_NAME,
    AllowList,
    EgressProxy,
    egress_binds,
    socket_path,
    wrap_command,
)
from runner.config import REPO_ROOT
from runner.sandbox import (
    SandboxLimits,
    SandboxRequest,
    bwrap_available,
    bwrap_problem,
    get_sandbox,
)

pytestmark = pytest.mark.timeout(120)

AGENTS = REPO_ROOT / "tests" / "sandbox_agents"
BODY = '{"data": [{"id": "stand-in-model"}]}'


# -- loopback upstreams ------------------------------------------------------------------


class Upstream(BaseHTTPRequestHandler):
    """Answers every GET/POST with BODY and remembers what it was sent."""

    seen: ClassVar[list[dict]] = []

    def _answer(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        Upstream.seen.append(
            {
                "method": self.command,
                "path": self.path,
                "headers": {k.lower(): v for k, v in self.headers.items()},
                "body": self.rfile.read(length).decode(),
            }
        )
        data = BODY.encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = _answer

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def http_server() -> Iterator[int]:
    Upstream.seen = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), Upstream)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


@pytest.fixture
def echo_server() -> Iterator[int]:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)

    def echo(conn: socket.socket) -> None:
        with conn:
            while data := conn.recv(65536):
                conn.sendall(data)

    def serve() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            threading.Thread(target=echo, args=(conn,), daemon=True).start()

    threading.Thread(target=serve, daemon=True).start()
    yield listener.getsockname()[1]
    listener.shutdown(socket.SHUT_RDWR)
    listener.close()


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def control(tmp_path: Path) -> Path:
    d = tmp_path / "egress"
    d.mkdir()
    return d


# -- talking to the proxy ----------------------------------------------------------------


def connect(path: Path) -> socket.socket:
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(10)
    s.connect(str(path))
    return s


def read_head(s: socket.socket) -> tuple[str, bytes]:
    """The status line, and whatever came after the response header."""
    buf = b""
    while b"\r\n\r\n" not in buf:
        chunk = s.recv(4096)
        assert chunk, f"connection closed mid-header: {buf!r}"
        buf += chunk
    head, rest = buf.split(b"\r\n\r\n", 1)
    return head.split(b"\r\n")[0].decode(), rest


def read_all(s: socket.socket) -> bytes:
    data = b""
    while chunk := s.recv(65536):
        data += chunk
    return data


def recv_exactly(s: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = s.recv(n - len(data))
        assert chunk, f"closed after {len(data)} of {n} bytes"
        data += chunk
    return data


def ask(path: Path, raw: bytes) -> tuple[str, bytes]:
    """Send one request, read the whole answer: (status line, body)."""
    with connect(path) as s:
        s.sendall(raw)
        status, rest = read_head(s)
        return status, rest + read_all(s)


# -- allow-list ----------------------------------------------------------------------------


def test_allow_list_matching():
    allow = AllowList(["API.OpenAI.com", "localhost:8000", "127.0.0.1:9000", "*.example.com:8443"])
    assert allow.allows("api.openai.com", 443)
    assert not allow.allows("api.openai.com", 80)
    assert not allow.allows("openai.com", 443)
    assert not allow.allows("evilapi.openai.com", 443)
    assert allow.allows("localhost", 8000)
    assert allow.allows("127.0.0.1", 9000)
    assert not allow.allows("127.0.0.2", 9000)
    assert allow.allows("a.b.example.com", 8443)
    assert not allow.allows("example.com", 8443)
    assert not allow.allows("badexample.com", 8443)
    assert not allow.allows("a.example.com", 443)
    with pytest.raises(ValueError, match="allow-list entry"):
        AllowList(["api.openai.com:http"])
    with pytest.raises(ValueError, match="wildcard"):
        AllowList(["*.0.0.1"])
    with pytest.raises(ValueError, match="wildcard"):
        AllowList(["*.0x7f"])


# -- the proxy over its unix socket --------------------------------------------------------


def test_connect_to_allowed_host_counts_bytes_exactly(control: Path, echo_server: int):
    path = socket_path(control)
    with EgressProxy(path, allow=[f"127.0.0.1:{echo_server}"]) as proxy:
        assert stat.S_IMODE(path.stat().st_mode) == 0o666
        with connect(path) as s:
            s.sendall(f"CONNECT 127.0.0.1:{echo_server} HTTP/1.1\r\n\r\n".encode())
            status, rest = read_head(s)
            assert status == "HTTP/1.1 200 Connection established"
            assert rest == b""
            payload = os.urandom(200_000)
            s.sendall(payload)
            assert recv_exactly(s, len(payload)) == payload
            s.sendall(b"tail")
            assert recv_exactly(s, 4) == b"tail"
            stats = proxy.stats()
        assert stats.requests == 1 and stats.denied == 0
        assert stats.bytes_up == len(payload) + 4
        assert stats.bytes_down == len(payload) + 4
        assert stats.hosts == {f"127.0.0.1:{echo_server}": 1}
    assert not path.exists()


def test_bytes_sent_with_the_connect_header_are_tunnelled(control: Path, echo_server: int):
    path = socket_path(control)
    with EgressProxy(path, allow=[f"127.0.0.1:{echo_server}"]) as proxy, connect(path) as s:
        s.sendall(f"CONNECT 127.0.0.1:{echo_server} HTTP/1.1\r\n\r\nearly".encode())
        status, rest = read_head(s)
        assert status.endswith("200 Connection established")
        assert rest + recv_exactly(s, 5 - len(rest)) == b"early"
        assert proxy.stats().bytes_up == 5


def test_host_not_on_the_list_is_refused(control: Path, echo_server: int):
    path = socket_path(control)
    with EgressProxy(path, allow=["api.openai.com"]) as proxy:
        status, body = ask(path, f"CONNECT 127.0.0.1:{echo_server} HTTP/1.1\r\n\r\n".encode())
        assert status == "HTTP/1.1 403 Forbidden"
        assert f"127.0.0.1:{echo_server}" in body.decode()
        assert "not in the agent's egress allow-list" in body.decode()
        # A case or trailing-dot variant of an allowed name is the same name; a lookalike is not.
        status, _ = ask(path, b"CONNECT api.openai.com.evil.net:443 HTTP/1.1\r\n\r\n")
        assert status.endswith("403 Forbidden")
        stats = proxy.stats()
    assert stats.requests == 0 and stats.denied == 2
    assert stats.bytes_up == stats.bytes_down == 0
    assert stats.denied_hosts == {f"127.0.0.1:{echo_server}": 1, "api.openai.com.evil.net:443": 1}


def test_unreachable_upstream_is_502(control: Path):
    port = closed_port()
    path = socket_path(control)
    with EgressProxy(path, allow=[f"127.0.0.1:{port}"]) as proxy:
        status, body = ask(path, f"CONNECT 127.0.0.1:{port} HTTP/1.1\r\n\r\n".encode())
        assert status == "HTTP/1.1 502 Bad Gateway"
        assert f"127.0.0.1:{port}" in body.decode()
        stats = proxy.stats()
    assert stats.requests == 0 and stats.denied == 0 and stats.upstream_errors == 1


@pytest.mark.parametrize(
    ("raw", "status"),
    [
        (b"\x00\xff\xfegarbage\r\n\r\n", 400),
        (b"GET /v1/models HTTP/1.1\r\nHost: api.openai.com\r\n\r\n", 400),
        (b"GET https://api.openai.com/v1 HTTP/1.1\r\n\r\n", 400),
        (b"CONNECT api.openai.com HTTP/1.1\r\n\r\n", 400),
        (b"CONNECT api.openai.com:99999 HTTP/1.1\r\n\r\n", 400),
        (b"CONNECT bad\x01host:443 HTTP/1.1\r\n\r\n", 400),
        (b"CONNECT api.openai.com:443 SPDY/3\r\n\r\n", 400),
        (b"CONNECT api.openai.com:443 HTTP/1.1\r\nno colon here\r\n\r\n", 400),
        (b"GET http://user:pw@api.openai.com/ HTTP/1.1\r\n\r\n", 400),
        (b"GET http://[::1/v1 HTTP/1.1\r\n\r\n", 400),  # urlsplit raises ValueError
        (b"GET http://[zz]/v1 HTTP/1.1\r\n\r\n", 400),
        (b"X" * 70_000, 431),
    ],
)
def test_garbage_is_rejected_and_the_proxy_keeps_serving(
    control: Path, echo_server: int, raw: bytes, status: int
):
    path = socket_path(control)
    with EgressProxy(path, allow=["api.openai.com", f"127.0.0.1:{echo_server}"]) as proxy:
        got, body = ask(path, raw)
        assert got.split(" ")[1] == str(status), (got, body)
        assert body.startswith(b"tmlbench egress: ")
        with connect(path) as s:  # half a request, then hang up
            s.sendall(b"CONNECT 127.0.0.1:")
        with connect(path) as s:
            s.sendall(f"CONNECT 127.0.0.1:{echo_server} HTTP/1.1\r\n\r\n".encode())
            assert read_head(s)[0].endswith("200 Connection established")
            s.sendall(b"still here")
            assert recv_exactly(s, 10) == b"still here"
    # Read once the proxy stopped: the half request's handler may still be counting it.
    stats = proxy.stats()
    assert stats.requests == 1 and stats.denied == 0 and stats.malformed == 2


def test_slow_or_silent_clients_are_dropped_after_the_header_timeout(control: Path):
    path = socket_path(control)
    with EgressProxy(path, allow=[], header_timeout=0.5):
        with connect(path) as s:
            start = time.monotonic()
            assert s.recv(100) == b""
            assert time.monotonic() - start < 5
        with connect(path) as s:  # one byte at a time never completes a header
            start = time.monotonic()
            with pytest.raises(OSError):
                for _ in range(100):
                    s.sendall(b"C")
                    time.sleep(0.1)
            assert time.monotonic() - start < 5


def test_connections_beyond_the_cap_get_503(control: Path):
    path = socket_path(control)
    with EgressProxy(path, allow=[], max_connections=1), connect(path) as first:
        first.sendall(b"CONNECT ")  # keeps its handler busy
        time.sleep(0.2)
        status, body = ask(path, b"CONNECT a.b:443 HTTP/1.1\r\n\r\n")
        assert status == "HTTP/1.1 503 Service Unavailable"
        assert b"too many open connections (max 1)" in body


def test_plain_http_absolute_form(control: Path, http_server: int):
    path = socket_path(control)
    target = f"127.0.0.1:{http_server}"
    with EgressProxy(path, allow=[target]) as proxy:
        request = (
            f"POST http://{target}/v1/completions?stream=0 HTTP/1.1\r\nHost: {target}\r\n"
            "Proxy-Connection: keep-alive\r\nProxy-Authorization: Basic eDp5\r\n"
            "Content-Type: application/json\r\nContent-Length: 13\r\n\r\n"
            '{"prompt": 1}'
        ).encode()
        status, body = ask(path, request)
        assert status.endswith(" 200 OK"), body
        assert body.decode() == BODY
        stats = proxy.stats()
        # Not allowed over plain HTTP either.
        status, _ = ask(path, b"GET http://example.com/ HTTP/1.1\r\nHost: example.com\r\n\r\n")
        assert status.endswith("403 Forbidden")
        assert proxy.stats().denied_hosts == {"example.com:80": 1}
    (seen,) = Upstream.seen
    assert seen["method"] == "POST"
    assert seen["path"] == "/v1/completions?stream=0"
    assert seen["body"] == '{"prompt": 1}'
    assert seen["headers"]["connection"] == "close"
    assert seen["headers"]["host"] == target
    assert "proxy-connection" not in seen["headers"]
    assert "proxy-authorization" not in seen["headers"]
    assert stats.requests == 1 and stats.hosts == {target: 1}
    assert stats.bytes_up > 13 and stats.bytes_down > len(BODY)


def test_stop_closes_open_tunnels_and_is_idempotent(control: Path, echo_server: int):
    path = socket_path(control)
    proxy = EgressProxy(path, allow=[f"127.0.0.1:{echo_server}"]).start()
    tunnels = []
    for _ in range(3):
        s = connect(path)
        s.sendall(f"CONNECT 127.0.0.1:{echo_server} HTTP/1.1\r\n\r\n".encode())
        assert read_head(s)[0].endswith("200 Connection established")
        s.sendall(b"ping")
        assert recv_exactly(s, 4) == b"ping"
        tunnels.append(s)
    idle = connect(path)  # connected, header never sent
    time.sleep(0.1)
    # A stop that waited for the open tunnels or the idle client would take its whole timeout:
    # 30 s against a few at most on a loaded host.
    start = time.monotonic()
    proxy.stop(timeout=30.0)
    assert time.monotonic() - start < 10
    for s in [*tunnels, idle]:
        s.settimeout(3)
        with contextlib.suppress(ConnectionResetError):
            assert s.recv(100) == b""
        s.close()
    assert not path.exists()
    with pytest.raises(OSError):
        connect(path)
    proxy.stop()
    assert proxy.stats().requests == 3


def test_bad_allow_list_and_paths_fail_at_construction(tmp_path: Path):
    with pytest.raises(ValueError):
        EgressProxy(tmp_path / "s.sock", allow=["host:0"])
    with pytest.raises(FileNotFoundError, match="does not exist"):
        EgressProxy(tmp_path / "missing" / "s.sock", allow=[]).start()
    (tmp_path / "file").write_text("x")
    with pytest.raises(FileExistsError):
        EgressProxy(tmp_path / "file", allow=[]).start()


# -- the forwarder on the host ---------------------------------------------------------------


def run_forwarder(sock: Path, *argv: str, **kw) -> subprocess.Popen:
    cmd = wrap_command(sys.executable, str(FORWARDER_DIR), str(sock), list(argv), port=0)
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, **kw)


def test_wrap_command_and_binds(tmp_path: Path):
    cmd = wrap_command("/py", FORWARDER_INSIDE + "/", SOCKET_INSIDE, ["aider", "--yes"])
    assert cmd == [
        "/py",
        "-I",
        "/opt/tmlbench/egress/forward.py",
        "--socket",
        "/run/tmlbench/egress/egress.sock",
        "--port",
        "18080",
        "--",
        "aider",
        "--yes",
    ]
    code, sockets = egress_binds(tmp_path)
    assert (code.host, code.inside, code.writable) == (FORWARDER_DIR, FORWARDER_INSIDE, False)
    assert (sockets.host, sockets.inside, sockets.writable) == (tmp_path, SOCKET_DIR_INSIDE, False)
    assert (FORWARDER_DIR / "forward.py").is_file()
    assert f"{SOCKET_DIR_INSIDE}/{SOCKET_NAME}" == SOCKET_INSIDE
    with pytest.raises(ValueError):
        wrap_command("/py", FORWARDER_INSIDE, SOCKET_INSIDE, [])


def test_forwarder_sets_proxy_env_and_passes_exit_code(control: Path, echo_server: int):
    code = (
        "import json, os, socket, sys\n"
        "port = int(os.environ['HTTPS_PROXY'].rsplit(':', 1)[1])\n"
        "s = socket.create_connection(('127.0.0.1', port))\n"
        f"s.sendall(b'CONNECT 127.0.0.1:{echo_server} HTTP/1.1\\r\\n\\r\\n')\n"
        "head = s.recv(1000).decode()\n"
        "s.sendall(b'abc'); echo = s.recv(3).decode()\n"
        "env = {k: v for k, v in os.environ.items() if 'proxy' in k.lower()}\n"
        "print(json.dumps({'head': head, 'echo': echo, 'env': env}))\n"
        "sys.exit(7)\n"
    )
    with EgressProxy(socket_path(control), allow=[f"127.0.0.1:{echo_server}"]):
        proc = run_forwarder(socket_path(control), sys.executable, "-c", code)
        out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 7
    report = json.loads(out)
    assert report["head"].startswith("HTTP/1.1 200 Connection established")
    assert report["echo"] == "abc"
    url = report["env"]["HTTPS_PROXY"]
    assert url.startswith("http://127.0.0.1:") and not url.endswith(":0")
    for name in ("HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY"):
        assert report["env"][name] == report["env"][name.lower()] == url
    assert report["env"]["NO_PROXY"] == report["env"]["no_proxy"] == ""


def test_forwarder_without_proxy_answers_502(control: Path):
    code = (
        "import os, socket\n"
        "port = int(os.environ['HTTP_PROXY'].rsplit(':', 1)[1])\n"
        "s = socket.create_connection(('127.0.0.1', port))\n"
        "s.sendall(b'CONNECT a:443 HTTP/1.1\\r\\n\\r\\n')\n"
        "print(s.recv(1000).decode().splitlines()[0])\n"
    )
    proc = run_forwarder(socket_path(control), sys.executable, "-c", code)
    out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 0
    assert out.strip() == "HTTP/1.1 502 Bad Gateway"


def test_forwarder_passes_sigterm_on(control: Path):
    code = "import time; print('up', flush=True); time.sleep(60)"
    proc = run_forwarder(socket_path(control), sys.executable, "-c", code)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "up"
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=10) == 128 + signal.SIGTERM


def test_forwarder_reports_a_missing_command(control: Path):
    proc = run_forwarder(socket_path(control), "/nonexistent/agent", stderr=subprocess.PIPE)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 127
    assert "cannot start '/nonexistent/agent'" in err


# -- the whole path in bubblewrap ----------------------------------------------------------------


@pytest.mark.sandbox
def test_agent_in_bwrap_reaches_only_the_allowed_host(tmp_path: Path, http_server: int):
    if not bwrap_available():
        pytest.fail(f"bubblewrap is required for this test: {bwrap_problem()}")
    sandbox = get_sandbox("bwrap")
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    control = tmp_path / "egress"
    control.mkdir()
    binds = egress_binds(control)
    forwarder_inside, sockets_inside = (sandbox.bind_path(b) for b in binds)
    paths = sandbox.paths(workspace, AGENTS)
    allowed = f"127.0.0.1:{http_server}"
    agent = [paths.python, f"{paths.agent_dir}/egress_client.py"]
    agent += [allowed, "api.evil.example:443", str(http_server), "api.openai.com", sockets_inside]
    command = wrap_command(paths.python, forwarder_inside, f"{sockets_inside}/{SOCKET_NAME}", agent)
    request = SandboxRequest(
        command=command,
        workspace=workspace,
        agent_dir=AGENTS,
        env={"PATH": "/usr/bin:/bin", "HOME": paths.workspace},
        limits=SandboxLimits(wall_seconds=60),
        stdout_path=tmp_path / "logs" / "stdout.log",
        stderr_path=tmp_path / "logs" / "stderr.log",
        binds=binds,
    )
    with EgressProxy(socket_path(control), allow=[allowed, "api.openai.com"]) as proxy:
        result = sandbox.run(request)
        stats = proxy.stats()
    stderr = (tmp_path / "logs" / "stderr.log").read_text()
    assert result.exit_code == 0, stderr
    assert not result.timed_out
    report = json.loads((tmp_path / "logs" / "stdout.log").read_text())

    assert report["allowed"] == {"status": 200, "body": BODY}, report
    assert Upstream.seen[0]["path"] == "/v1/models"
    assert Upstream.seen[0]["headers"]["authorization"] == "Bearer test"
    assert report["denied"]["status_line"] == "HTTP/1.1 403 Forbidden", report
    assert (
        "api.evil.example:443 is not in the agent's egress allow-list" in report["denied"]["body"]
    )
    assert report["direct"] == "ConnectionRefusedError", report
    assert report["dns"] == "gaierror", report
    assert report["socket_dir"] == {"create": "OSError", "unlink": "OSError"}, report
    assert report["proxy_env"]["HTTPS_PROXY"] == "http://127.0.0.1:18080"
    assert report["proxy_env"]["https_proxy"] == "http://127.0.0.1:18080"

    assert stats.requests == 1 and stats.denied == 1, stats
    assert stats.hosts == {allowed: 1}
    assert stats.denied_hosts == {"api.evil.example:443": 1}
    assert stats.bytes_up > 0 and stats.bytes_down > len(BODY)
    assert stats.upstream_errors == 0 and stats.malformed == 0
    # The socket folder was bound read-only: nothing left in it once the proxy removed its socket.
    assert sorted(p.name for p in control.iterdir()) == []
