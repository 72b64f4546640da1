"""A stand-in for an external agent CLI that calls its model provider itself.

argv: provider host:port, a host:port not on the allow-list, a host loopback port to try
directly, the model id. The key comes from PROVIDER_KEY and the proxy from HTTPS_PROXY, as
for a real CLI. It asks the provider once, probes the other routes, copies the sample
submission, and prints a JSON report (and, carelessly, its key: the harness must redact it).
"""

import http.client
import json
import os
import shutil
import socket
import sys
from urllib.parse import urlsplit

provider, denied, direct_port, model = sys.argv[1:5]
key = os.environ["PROVIDER_KEY"]
proxy = urlsplit(os.environ["HTTPS_PROXY"])
report: dict = {}

host, port = provider.rsplit(":", 1)
conn = http.client.HTTPConnection(proxy.hostname, proxy.port, timeout=10)
conn.set_tunnel(host, int(port))
body = {"model": model, "messages": [{"role": "user", "content": "hello"}]}
conn.request(
    "POST",
    "/v1/chat/completions",
    body=json.dumps(body),
    headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"},
)
resp = conn.getresponse()
report["provider"] = {"status": resp.status, "reply": json.loads(resp.read())}
conn.close()

try:
    with socket.create_connection((proxy.hostname, proxy.port), timeout=10) as s:
        s.sendall(f"CONNECT {denied} HTTP/1.1\r\nHost: {denied}\r\n\r\n".encode())
        report["denied"] = s.recv(4096).split(b"\r\n")[0].decode()
except OSError as exc:
    report["denied"] = type(exc).__name__

try:
    with socket.create_connection(("127.0.0.1", int(direct_port)), timeout=3):
        report["direct"] = "ok"
except OSError as exc:
    report["direct"] = type(exc).__name__

shutil.copyfile("sample_submission.csv", "submission.csv")
print(json.dumps(report))
print(f"debug: using key {key}")
