"""A stand-in agent CLI that spends: it makes model calls as fast as it can, forever.

Four threads, each on its own kept-alive connection to PROVIDER_BASE_URL (the gateway) with
PROVIDER_KEY (the placeholder), post chat completions back to back and ignore every answer,
the gateway's quota error included: a runaway agent that would empty its owner's account. It
leaves the sample submission first, so only the spend cap can make the attempt a failure.
Prints one line per status it met, at exit (it never exits on its own).
"""

import collections
import http.client
import json
import os
import shutil
import sys
import threading
from urllib.parse import urlsplit

shutil.copyfile("sample_submission.csv", "submission.csv")
base = urlsplit(os.environ["PROVIDER_BASE_URL"])
headers = {
    "Authorization": f"Bearer {os.environ['PROVIDER_KEY']}",
    "Content-Type": "application/json",
}
body = json.dumps({"model": sys.argv[1], "messages": [{"role": "user", "content": "more"}]})
seen: collections.Counter = collections.Counter()


def spend() -> None:
    conn = http.client.HTTPConnection(base.hostname, base.port, timeout=10)
    while True:
        try:
            conn.request("POST", f"{base.path}/chat/completions", body=body, headers=headers)
            response = conn.getresponse()
            response.read()
            seen[response.status] += 1
            if response.will_close:
                conn.close()
        except (OSError, http.client.HTTPException):
            conn.close()
            seen["error"] += 1


threads = [threading.Thread(target=spend, daemon=True) for _ in range(4)]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
