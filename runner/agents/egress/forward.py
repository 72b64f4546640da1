"""In-sandbox half of provider-only egress: a loopback TCP port in front of the proxy socket.

Runs INSIDE the sandbox with the harness's Python, so it is stdlib only and imports
nothing from ``runner`` (the repository is not visible there; the harness binds this
folder read-only). Usage::

    python -I forward.py --socket /run/tmlbench/egress/egress.sock --port 18080 \
        [--gateway-socket /run/tmlbench/egress/gateway.sock --gateway-port 18081] -- agent argv...

It listens on ``127.0.0.1:PORT``, pipes every accepted connection to the harness's
egress proxy over the bound unix socket (and, with ``--gateway-socket``, connections to
``127.0.0.1:GATEWAY_PORT`` to the harness's provider gateway), starts the agent with ``HTTPS_PROXY``,
``HTTP_PROXY`` and ``ALL_PROXY`` (and their lowercase forms) pointing at that port, passes
SIGTERM/SIGINT/SIGHUP/SIGQUIT on to it and exits with its exit code (128 + N if signal N
killed it). The policy (which hosts pass) lives on the host side; this only moves bytes.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import selectors
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Callable

BUFSIZE = 64 * 1024
PROXY_VARS = ("HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY")
FORWARDED_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT)
UNREACHABLE = (
    b"HTTP/1.1 502 Bad Gateway\r\nContent-Type: text/plain\r\nConnection: close\r\n"
    b"Content-Length: %d\r\n\r\n%s"
)


def splice(
    a: socket.socket,
    b: socket.socket,
    on_a_to_b: Callable[[int], None] | None = None,
    on_b_to_a: Callable[[int], None] | None = None,
) -> None:
    """Copy bytes both ways until both directions reached EOF or either side failed.

    An EOF on one side is passed on as a half-close (``SHUT_WR``) of the other, so
    request/response protocols that close their sending half keep working. The
    callbacks see each chunk's size *before* it is sent on. Neither socket is closed.
    """
    peers = {a: b, b: a}
    counters = {a: on_a_to_b, b: on_b_to_a}
    sel = selectors.DefaultSelector()
    try:
        sel.register(a, selectors.EVENT_READ)
        sel.register(b, selectors.EVENT_READ)
        reading = 2
        while reading:
            for key, _ in sel.select():
                src: socket.socket = key.fileobj  # type: ignore[assignment]
                dst = peers[src]
                try:
                    data = src.recv(BUFSIZE)
                except OSError:
                    return
                if not data:
                    sel.unregister(src)
                    reading -= 1
                    with contextlib.suppress(OSError):
                        dst.shutdown(socket.SHUT_WR)
                    continue
                count = counters[src]
                if count is not None:
                    count(len(data))
                try:
                    dst.sendall(data)
                except OSError:
                    return
    except (OSError, ValueError):  # a socket shut down or closed under us: the splice is over
        return
    finally:
        sel.close()


def _pipe_to_proxy(conn: socket.socket, socket_path: str) -> None:
    with conn:
        # Streamed replies come in small writes: Nagle's algorithm would hold each ~40 ms.
        with contextlib.suppress(OSError):
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        with upstream:
            try:
                upstream.connect(socket_path)
            except OSError as exc:
                body = f"tmlbench egress proxy unreachable at {socket_path}: {exc}\n".encode()
                with contextlib.suppress(OSError):
                    conn.sendall(UNREACHABLE % (len(body), body))
                return
            splice(conn, upstream)


def _serve(listener: socket.socket, socket_path: str) -> None:
    while True:
        try:
            conn, _ = listener.accept()
        except OSError:
            return
        threading.Thread(target=_pipe_to_proxy, args=(conn, socket_path), daemon=True).start()


def proxy_env(base: dict[str, str], port: int, gateway: bool = False) -> dict[str, str]:
    """``base`` plus every proxy variable pointing at ``http://127.0.0.1:PORT``.

    With a gateway, loopback is reached directly (the gateway listens there); without one,
    even "localhost" goes through the proxy: the sandbox's loopback holds nothing else.
    """
    env = dict(base)
    url = f"http://127.0.0.1:{port}"
    for name in PROXY_VARS:
        env[name] = env[name.lower()] = url
    env["NO_PROXY"] = env["no_proxy"] = "127.0.0.1,localhost,::1" if gateway else ""
    return env


def _listen(port: int) -> socket.socket:
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", port))
        listener.listen(128)
    except OSError:
        listener.close()
        raise
    return listener


def exit_status(returncode: int) -> int:
    """Shell convention: a child killed by signal N exits 128 + N."""
    return 128 - returncode if returncode < 0 else returncode


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if "--" not in args:
        print(
            "tmlbench-egress: usage: forward.py --socket PATH --port N "
            "[--gateway-socket PATH --gateway-port N] -- command...",
            file=sys.stderr,
        )
        return 2
    split = args.index("--")
    command = args[split + 1 :]
    parser = argparse.ArgumentParser(prog="forward.py", description=__doc__.splitlines()[0])
    parser.add_argument("--socket", required=True, help="the egress proxy's unix socket")
    parser.add_argument("--port", type=int, default=18080, help="loopback port (0: any free)")
    parser.add_argument("--gateway-socket", help="the provider gateway's unix socket")
    parser.add_argument("--gateway-port", type=int, default=18081, help="its loopback port")
    opts = parser.parse_args(args[:split])
    if not command:
        parser.error("no command after --")

    routes = [(opts.port, opts.socket)]
    if opts.gateway_socket:
        routes.append((opts.gateway_port, opts.gateway_socket))
    ports = []
    for want, target in routes:
        try:
            listener = _listen(want)
        except OSError as exc:
            print(f"tmlbench-egress: cannot listen on 127.0.0.1:{want}: {exc}", file=sys.stderr)
            return 125
        ports.append(listener.getsockname()[1])
        threading.Thread(target=_serve, args=(listener, target), daemon=True).start()
    port = ports[0]

    # Signals that arrive before the child exists are delivered once it does.
    child: subprocess.Popen[bytes] | None = None
    pending: list[int] = []

    def forward(signum: int, _frame: object) -> None:
        if child is None:
            pending.append(signum)
        else:
            with contextlib.suppress(ProcessLookupError):
                child.send_signal(signum)

    for sig in FORWARDED_SIGNALS:
        signal.signal(sig, forward)
    try:
        env = proxy_env(dict(os.environ), port, gateway=bool(opts.gateway_socket))
        child = subprocess.Popen(command, env=env)
    except OSError as exc:
        print(f"tmlbench-egress: cannot start {command[0]!r}: {exc}", file=sys.stderr)
        return 126 if isinstance(exc, PermissionError) else 127
    for signum in pending:
        with contextlib.suppress(ProcessLookupError):
            child.send_signal(signum)
    return exit_status(child.wait())


if __name__ == "__main__":
    sys.exit(main())
