"""Tries to get out of the sandbox; prints one JSON object describing what worked.

argv: host port listening on 127.0.0.1, then host paths that must not be readable.
"""

import json
import os
import socket
import sys

port = int(sys.argv[1])
out: dict = {"env": dict(os.environ), "cwd": os.getcwd(), "uid": os.getuid(), "read": {}}
for path in sys.argv[2:]:
    try:
        with open(path, "rb") as f:
            f.read(1)
        out["read"][path] = "ok"
    except OSError as exc:
        out["read"][path] = type(exc).__name__


def connect(host: str, p: int) -> str:
    try:
        with socket.create_connection((host, p), timeout=1.5):
            return "ok"
    except OSError as exc:
        return type(exc).__name__


out["tcp_host_loopback"] = connect("127.0.0.1", port)
out["tcp_external"] = connect("1.1.1.1", 443)
out["write"] = {}
for path in ("/usr/pwned", "/opt/agent/pwned", "/etc/pwned", "/pwned", "/workspace/ok.txt"):
    try:
        with open(path, "w") as f:
            f.write("hello")
        out["write"][path] = "ok"
    except OSError as exc:
        out["write"][path] = type(exc).__name__
with open("/proc/self/status") as f:
    out["cpus"] = next(ln.split()[1] for ln in f if ln.startswith("Cpus_allowed_list"))
print(json.dumps(out))
