"""A threaded server on a unix socket that sandboxed agents connect to.

The common part of the egress proxy (``runner.agents.egress``) and the provider gateway
(``runner.agents.gateway``): the socket (mode 0o666: the sandbox user may map to another host uid
than ours), one thread per connection up to ``max_connections`` (beyond it a short-lived
thread answers "busy", so the accept loop never waits), and a ``stop()`` that closes the
listener and every tracked socket and returns within its timeout, whatever a client or an
upstream is doing. Subclasses implement ``_serve(sock)`` and ``_answer_busy(sock, text)``.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import stat
import threading
import time
from pathlib import Path
from typing import Self

log = logging.getLogger(__name__)


class SocketServer:
    def __init__(self, socket_path: Path, max_connections: int):
        self.socket_path = Path(socket_path)
        self.max_connections = max_connections
        self._lock = threading.Lock()
        self._listener: socket.socket | None = None
        self._accept_thread: threading.Thread | None = None
        self._handlers: set[threading.Thread] = set()
        self._rejecting = 0  # of the _handlers, how many only answer "busy"
        self._sockets: set[socket.socket] = set()
        self._started = False
        self._stopping = False

    # -- what a subclass provides ----------------------------------------------------------

    def _serve(self, sock: socket.socket) -> None:
        """Handle one connection; the base closes ``sock`` afterwards."""
        raise NotImplementedError

    def _answer_busy(self, sock: socket.socket, text: str) -> None:
        """Tell a connection over the cap to come back later."""
        raise NotImplementedError

    def _on_start(self) -> None:
        """Called once the socket listens, before the first connection is accepted."""

    def _on_stop(self) -> None:
        """Called at the end of ``stop()``, once every connection is closed."""

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> Self:
        if self._started or self._stopping:
            raise RuntimeError(f"a {type(self).__name__} starts once")
        self._started = True
        path = self.socket_path
        if not path.parent.is_dir():
            raise FileNotFoundError(f"socket folder {path.parent} does not exist")
        if len(os.fsencode(path)) >= 108:
            raise OSError(f"socket path {path} is too long for a unix socket (max 107)")
        if path.is_symlink() or path.exists():
            if not stat.S_ISSOCK(path.lstat().st_mode):
                raise FileExistsError(f"{path} exists and is not a socket")
            path.unlink()
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            listener.bind(str(path))
            os.chmod(path, 0o666)
            listener.listen(64)
            self._on_start()
        except OSError:
            listener.close()
            raise
        self._listener = listener
        self._accept_thread = threading.Thread(
            target=self._accept_loop, name=f"{type(self).__name__}-accept", daemon=True
        )
        self._accept_thread.start()
        return self

    def stop(self, timeout: float = 2.0) -> None:
        """Close the listener and every connection; idempotent, returns within ``timeout``."""
        deadline = time.monotonic() + timeout
        with self._lock:
            if self._stopping:
                return
            self._stopping = True
            listener, self._listener = self._listener, None
            sockets = list(self._sockets)
        if listener is not None:
            with contextlib.suppress(OSError):
                listener.shutdown(socket.SHUT_RDWR)  # wakes the blocked accept()
            listener.close()
            with contextlib.suppress(OSError):
                self.socket_path.unlink()
        for sock in sockets:  # their threads close them once they notice
            with contextlib.suppress(OSError, ValueError):
                # socket.socket's own shutdown: SSLSocket.shutdown would unset its state
                # under the thread that is reading it.
                socket.socket.shutdown(sock, socket.SHUT_RDWR)
        threads = [self._accept_thread] if self._accept_thread else []
        with self._lock:
            threads += list(self._handlers)
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        self._on_stop()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- bookkeeping -----------------------------------------------------------------------

    def _track(self, sock: socket.socket) -> bool:
        """Register ``sock`` for stop(); False if the server is already stopping."""
        with self._lock:
            if self._stopping:
                return False
            self._sockets.add(sock)
            return True

    def _untrack(self, sock: socket.socket) -> None:
        with self._lock:
            self._sockets.discard(sock)
        with contextlib.suppress(OSError):
            sock.close()

    # -- serving ---------------------------------------------------------------------------

    def _accept_loop(self) -> None:
        listener = self._listener
        assert listener is not None
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return  # stop() shut the listener down
            with self._lock:
                self._handlers = {t for t in self._handlers if t.is_alive()}
                serving = len(self._handlers) - self._rejecting
                if serving < self.max_connections:
                    handler = self._handle
                elif self._rejecting < self.max_connections:
                    handler, self._rejecting = self._reject, self._rejecting + 1
                else:
                    handler = None
            if handler is None or not self._track(conn):
                conn.close()
                if self._stopping:
                    return
                continue
            thread = threading.Thread(target=handler, args=(conn,), daemon=True)
            with self._lock:
                self._handlers.add(thread)
            thread.start()

    def _handle(self, sock: socket.socket) -> None:
        try:
            self._serve(sock)
        except Exception:  # never let one connection take the server down
            log.exception("%s: connection failed", type(self).__name__)
        finally:
            self._done(sock)

    def _reject(self, sock: socket.socket) -> None:
        try:
            self._answer_busy(sock, f"too many open connections (max {self.max_connections})")
        except OSError:
            pass
        finally:
            with self._lock:
                self._rejecting -= 1
            self._done(sock)

    def _done(self, sock: socket.socket) -> None:
        self._untrack(sock)
        with self._lock:
            self._handlers.discard(threading.current_thread())
