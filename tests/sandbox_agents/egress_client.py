"""A stand-in CLI agent behind provider-only egress; prints one JSON report.

argv: allowed host:port, denied host:port, a host loopback port to try directly, a host
name to resolve, the folder holding the proxy's socket (must not be writable). The proxy comes from HTTPS_PROXY, as for a real agent CLI.
"""

import http.client
import json
import os
import socket
import sys
from urllib.parse import urlsplit

allowed, denied, direct_port, name, socket_dir = sys.argv[1:6]
proxy = urlsplit(os.environ["HTTPS_PROXY"])
out: dict = {
    "proxy_env": {k: v for k, v in os.environ.items() if k.lower().endswith("_proxy")},
}

# 1. The allowed host, tunnelled the way HTTPS clients do it (CONNECT, then HTTP inside).
try:
    host, port = allowed.rsplit(":", 1)
    conn = http.client.HTTPConnection(proxy.hostname, proxy.port, timeout=10)
    conn.set_tunnel(host, int(port))
    conn.request("GET", "/v1/models", headers={"Authorization": "Bearer test"})
    resp = conn.getresponse()
    out["allowed"] = {"status": resp.status, "body": resp.read().decode()}
    conn.close()
except OSError as exc:
    out["allowed"] = {"error": repr(exc)}

# 2. A host that is not on the list: a raw CONNECT, to see the proxy's answer.
try:
    with socket.create_connection((proxy.hostname, proxy.port), timeout=10) as s:
        s.sendall(f"CONNECT {denied} HTTP/1.1\r\nHost: {denied}\r\n\r\n".encode())
        data = b""
        while chunk := s.recv(4096):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    out["denied"] = {"status_line": head.split(b"\r\n")[0].decode(), "body": body.decode()}
except OSError as exc:
    out["denied"] = {"error": repr(exc)}

# 3. Straight to the host's loopback server, around the proxy.
try:
    with socket.create_connection(("127.0.0.1", int(direct_port)), timeout=3):
        out["direct"] = "ok"
except OSError as exc:
    out["direct"] = type(exc).__name__

# 4. Name resolution.
try:
    out["dns"] = socket.getaddrinfo(name, 443)[0][4][0]
except OSError as exc:
    out["dns"] = type(exc).__name__

# 5. The socket folder: the agent must not replace the socket or leave files there.
out["socket_dir"] = {}
for what, act in [
    ("create", lambda: open(os.path.join(socket_dir, "x"), "w").close()),
    ("unlink", lambda: os.unlink(os.path.join(socket_dir, "egress.sock"))),
]:
    try:
        act()
        out["socket_dir"][what] = "ok"
    except OSError as exc:
        out["socket_dir"][what] = type(exc).__name__

print(json.dumps(out))
