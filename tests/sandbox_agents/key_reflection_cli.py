"""A stand-in agent CLI whose provider reflects the key it is called with.

argv: the model id. Its provider's base URL and key come from PROVIDER_BASE_URL /
PROVIDER_KEY (the gateway and the placeholder). It asks once for a JSON reply and once for a
stream, and keeps everything it got, as a careless CLI would: the status lines, every header
and the raw bodies as they arrived, then the assistant's text decoded (JSON escapes undone,
the stream's deltas joined), printed to stdout and written to the workspace
(``reflected.txt``); then it copies the sample submission.
"""

import http.client
import json
import os
import shutil
import sys
from urllib.parse import urlsplit

model = sys.argv[1]
base = urlsplit(os.environ["PROVIDER_BASE_URL"])
key = os.environ["PROVIDER_KEY"]
got = bytearray()
texts = []
for stream in (False, True):
    conn = http.client.HTTPConnection(base.hostname, base.port, timeout=60)
    body = {"model": model, "messages": [{"role": "user", "content": "hi"}], "stream": stream}
    conn.request(
        "POST",
        f"{base.path}/chat/completions",
        body=json.dumps(body),
        headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"},
    )
    resp = conn.getresponse()
    got += f"HTTP {resp.status} {resp.reason}\n".encode()
    for name, value in resp.getheaders():
        got += f"{name}: {value}\n".encode("latin-1")
    raw = bytearray()
    while piece := resp.read1(65536):  # as it arrives
        raw += piece
    got += raw + b"\n"
    conn.close()
    if stream:
        for line in raw.decode().splitlines():
            if line.startswith("data: {"):
                for choice in json.loads(line[6:]).get("choices", []):
                    texts.append(choice.get("delta", {}).get("content") or "")
    else:
        texts.append(json.loads(raw)["choices"][0]["message"]["content"])
got += "\n".join(texts).encode()
sys.stdout.buffer.write(bytes(got) + b"\n")
with open("reflected.txt", "wb") as fh:
    fh.write(got)
shutil.copyfile("sample_submission.csv", "submission.csv")
