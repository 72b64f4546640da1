"""A stand-in for an external agent CLI that calls its model provider itself.

argv: a host:port not on the allow-list, a host loopback port to try directly, the model id,
and optionally ``give-up``: exit 1 without a submission if the provider's answer is an error.
Its provider's base URL and key come from PROVIDER_BASE_URL / PROVIDER_KEY (the gateway and
the placeholder, as a real CLI's config would give them), the proxy from HTTPS_PROXY. It asks
the provider once, probes the other routes, copies the sample submission, prints a JSON
report, and carelessly prints its key (the placeholder: there is nothing secret to leak).
"""

import http.client
import json
import os
import shutil
import socket
import sys
from urllib.parse import urlsplit

denied, direct_port, model = sys.argv[1:4]
give_up = sys.argv[4:5] == ["give-up"]
base = urlsplit(os.environ["PROVIDER_BASE_URL"])
key = os.environ["PROVIDER_KEY"]
proxy = urlsplit(os.environ["HTTPS_PROXY"])
report: dict = {"base_url": os.environ["PROVIDER_BASE_URL"], "no_proxy": os.environ["NO_PROXY"]}

conn = http.client.HTTPConnection(base.hostname, base.port, timeout=10)
body = {"model": model, "messages": [{"role": "user", "content": "hello"}]}
conn.request(
    "POST",
    f"{base.path}/chat/completions",
    body=json.dumps(body),
    headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"},
)
resp = conn.getresponse()
report["provider"] = {"status": resp.status, "reply": json.loads(resp.read())}
conn.close()
if give_up and resp.status >= 400:
    print(json.dumps(report))
    sys.exit(1)

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
