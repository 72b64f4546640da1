"""A stand-in agent CLI that tries the provider operations a model call does not need.

argv: the model id. Its provider's base URL and key come from PROVIDER_BASE_URL / PROVIDER_KEY
(the gateway and the placeholder). It sends each of the issue's forbidden requests (deleting a
fine-tuned model, listing stored completions, other methods, path tricks) on its own
connection, then one allowed model call, copies the sample submission and prints a JSON report:
{"forbidden": {"<METHOD> <target>": status line}, "allowed": status}.
"""

import http.client
import json
import os
import shutil
import socket
import sys
from urllib.parse import urlsplit

FORBIDDEN = [
    ("DELETE", "/models/ft:gpt-4o:org:custom"),  # OpenAI: deletes a fine-tuned model
    ("POST", "/models/x"),
    ("GET", "/chat/completions?limit=100"),  # OpenAI: lists stored completions
    ("DELETE", "/chat/completions"),
    ("OPTIONS", "/chat/completions"),
    ("HEAD", "/models"),
    ("GET", "/models/..;"),
    ("GET", "/models/%252e%252e"),
    ("POST", "/files"),
    ("GET", "/../admin"),
]

model = sys.argv[1]
base = urlsplit(os.environ["PROVIDER_BASE_URL"])
key = os.environ["PROVIDER_KEY"]
report: dict = {"forbidden": {}}

for method, path in FORBIDDEN:
    target = base.path + path
    request = (
        f"{method} {target} HTTP/1.1\r\nHost: {base.netloc}\r\nAuthorization: Bearer {key}\r\n"
        "Content-Length: 0\r\nConnection: close\r\n\r\n"
    )
    try:
        with socket.create_connection((base.hostname, base.port), timeout=10) as s:
            s.sendall(request.encode())
            answer = b""
            while chunk := s.recv(65536):
                answer += chunk
        report["forbidden"][f"{method} {target}"] = answer.split(b"\r\n")[0].decode()
    except OSError as exc:
        report["forbidden"][f"{method} {target}"] = type(exc).__name__

conn = http.client.HTTPConnection(base.hostname, base.port, timeout=10)
body = {"model": model, "messages": [{"role": "user", "content": "hello"}]}
conn.request(
    "POST",
    f"{base.path}/chat/completions",
    body=json.dumps(body),
    headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"},
)
response = conn.getresponse()
response.read()
report["allowed"] = response.status
conn.close()

shutil.copyfile("sample_submission.csv", "submission.csv")
print(json.dumps(report))
